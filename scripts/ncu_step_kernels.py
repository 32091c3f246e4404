"""The kernels of one captured step, each timed alone by Nsight Compute: reads the CSV of
`ncu --graph-profiling node --metrics gpu__time_duration.sum --csv` over a `ridgeline run
--graphs`, finds the step's kernel sequence as the period with which the last kernels repeat
(every replay of the step's graph launches the same kernels in the same order), and prints the
last replay's kernels with their durations and their sum.

    python3 scripts/ncu_step_kernels.py NCU.csv [--step-us P50]

With --step-us (the step's p50 from a run without the profiler, same job), the last line also
gives the step time the kernels alone do not account for: launch and dependency gaps and
ramps, which ncu, running each kernel by itself, does not see.
"""
import argparse
import csv
import re
import sys
from typing import List, Optional, Tuple

_UNIT_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
            "second": 1e9, "s": 1e9}


def kernels(path: str) -> List[Tuple[str, float]]:
    """(kernel name, duration ns) of every profiled kernel, in launch order."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    out = []
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = _UNIT_NS.get(row.get("Metric Unit", "").strip())
        if unit is None:
            raise ValueError(f"unknown unit {row.get('Metric Unit')!r}")
        value = float(row["Metric Value"].replace(",", ""))
        out.append((row["Kernel Name"], value * unit))
    return out


def step_period(names: List[str], repeats: int = 2) -> Optional[int]:
    """The shortest p such that the last `repeats` blocks of p names are identical."""
    for p in range(1, len(names) // repeats + 1):
        last = names[len(names) - p:]
        if all(names[len(names) - (r + 1) * p:len(names) - r * p] == last
               for r in range(1, repeats)):
            return p
    return None


def short(name: str) -> str:
    """A kernel's name without its template arguments and parameter list."""
    # ncu writes an anonymous namespace as "(anonymous namespace)" or, cut, "unnamed>".
    name = re.sub(r"\(anonymous namespace\)::|<?unnamed>::", "", name)
    name = re.sub(r"\([^()]*\)$", "", name)
    depth, out = 0, []
    for c in name:
        depth += c == "<"
        if depth == 0:
            out.append(c)
        depth = max(0, depth - (c == ">"))
    return "".join(out).replace("void ", "").split("::")[-1]


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="ncu --csv output (--log-file)")
    ap.add_argument("--step-us", type=float, help="the step's p50 without the profiler (us)")
    ap.add_argument("--repeats", type=int, default=2,
                    help="identical replays required at the end (default 2)")
    args = ap.parse_args(argv)
    try:
        ks = kernels(args.csv)
    except (OSError, ValueError, KeyError) as e:
        print(f"ncu_step_kernels: {args.csv}: {e}", file=sys.stderr)
        return 2
    p = step_period([k for k, _ in ks], args.repeats)
    if p is None:
        print(f"ncu_step_kernels: {args.csv}: no repeated step among {len(ks)} kernels",
              file=sys.stderr)
        return 2
    step = ks[len(ks) - p:]
    total = sum(ns for _, ns in step)
    for name, ns in step:
        print(f"{ns / 1e3:9.2f} us  {short(name)}")
    line = f"{p} kernels, {total / 1e3:.2f} us alone"
    if args.step_us:
        gap = args.step_us - total / 1e3
        line += (f"; step p50 {args.step_us:.2f} us, {gap:.2f} us of it outside the kernels' own "
                 f"times" if gap >= 0 else
                 f"; step p50 {args.step_us:.2f} us, {-gap:.2f} us less than the kernels alone "
                 f"(each alone carries its own ramp and tail, which the step's programmatic "
                 f"launches overlap)")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
