#!/usr/bin/env python3
"""The table of a scripts/ab-check.sh folder: per workload and strategy, each build's median
step p50 over its turns with the spread of those turns (min..max), the ratio B / A of the
medians, whether B's median lies inside A's spread or A's inside B's ("within noise"), and
whether the output checksums of all turns of both builds are one value."""
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def collect(folder):
    """{(case, strategy): {"a": [(p50, checksum)], "b": [...]}} from NAME.WHO.tT.json files."""
    runs = defaultdict(lambda: {"a": [], "b": []})
    for path in sorted(Path(folder).glob("*.json")):
        m = re.fullmatch(r"(.+)\.([ab])\.t(\d+)\.json", path.name)
        if not m:
            continue
        case, who = m.group(1), m.group(2)
        data = json.loads(path.read_text())
        for key, summary in data.items():
            if not key.startswith("summary") or not isinstance(summary, dict):
                continue
            strategy = summary.get("strategy", key.partition(" ")[2] or "-")
            runs[(case, strategy)][who].append(
                (float(summary["step_p50_ns"]), summary.get("output_checksum", "")))
    return runs


def verdict(a, b):
    if not a or not b:
        return "-"
    a_lo, a_hi, b_lo, b_hi = min(a), max(a), min(b), max(b)
    ma, mb = statistics.median(a), statistics.median(b)
    return "within noise" if a_lo <= mb <= a_hi or b_lo <= ma <= b_hi else "moved"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ab_table.py AB_CHECK_FOLDER")
    runs = collect(sys.argv[1])
    if not runs:
        sys.exit(f"ab_table.py: no NAME.a|b.tN.json files in {sys.argv[1]}")
    print("| workload | strategy | A p50 ms (min..max) | B p50 ms (min..max) | B / A | "
          "verdict | checksums |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    moved = 0
    for (case, strategy), r in sorted(runs.items()):
        a = [p for p, _ in r["a"]]
        b = [p for p, _ in r["b"]]

        def cell(v):
            if not v:
                return "-"
            return (f"{statistics.median(v) / 1e6:.4f} "
                    f"({min(v) / 1e6:.4f}..{max(v) / 1e6:.4f}, n={len(v)})")

        ratio = f"{statistics.median(b) / statistics.median(a):.4f}" if a and b else "-"
        sums = {c for _, c in r["a"] + r["b"] if c}
        sums_a = {c for _, c in r["a"] if c}
        sums_b = {c for _, c in r["b"] if c}
        if len(sums) == 1:
            same = "identical"
        elif sums_a & sums_b:
            same = "overlap"
        elif len(sums_a) > 1 or len(sums_b) > 1:
            same = "vary within a build"
        else:
            same = "differ"
        v = verdict(a, b)
        moved += v == "moved"
        print(f"| {case} | {strategy} | {cell(a)} | {cell(b)} | {ratio} | {v} | {same} |")
    print(f"\n{moved} of {len(runs)} rows moved beyond both builds' spreads.")


if __name__ == "__main__":
    main()
