"""The custom all-reduces beside NCCL and PyTorch, size by size: the all-reduce tables of one
`ridgeline collectives --collectives all_reduce --allreduce nccl,oneshot,push,push-ll,twoshot`
file (p50 per call) and, optionally, scripts/reference/torch_collectives.py's JSON of the same
sizes timed the same way in the same job: both in graphs (`--graph`), or both as nccl-tests times
eager launches (ridgeline's `--batch`; the reference's default).

    python3 scripts/allreduce_table.py [--markdown OUT.md] [--target 0.6] RIDGELINE.h5 [TORCH.json]

Prints one row per size: every implementation's time in us, the fastest custom one over
NCCL's, and with the JSON PyTorch's NCCL all-reduce, its symmetric-memory one-shot and the
fastest custom one over that; then how many sizes meet the target (fastest custom <= target x
NCCL) and how many are no slower than PyTorch's one-shot. Exits 2 when the files disagree on
the timing (graph replays, batches of launches, or ridgeline's launches stamped one by one,
which the reference does not time) or on the number of ranks.
"""
import argparse
import json
import sys
from typing import Dict, List, Optional

import h5py
import numpy as np

from ridgeline_analysis import output
from ridgeline_analysis.tables import format_columns

CUSTOM = ("oneshot", "push", "push-ll", "twoshot")


def read_ridgeline(path: str) -> Dict:
    """{"timing", "ranks", "p50_us": {impl: {bytes: us}}, "complete"} of a collectives file
    (complete False: the job ended before it measured every size, root attribute complete =
    0)."""
    p50: Dict[str, Dict[int, float]] = {}
    timing, ranks = None, None
    with h5py.File(path, "r") as f:
        complete = f.attrs.get("complete", 1)
        if not isinstance(complete, (int, np.integer)) or complete not in (0, 1):
            raise ValueError(f"{path}: /: complete must be 0 or 1, found '{complete}'")
        for impl in ("nccl",) + CUSTOM:
            name = "/collectives/all_reduce" + ("" if impl == "nccl" else "_" + impl)
            if name not in f:
                continue
            table = f[name]
            rows = table[()]
            p50[impl] = {int(b): float(t) / 1e3
                         for b, t in zip(rows["size_bytes"], rows["time_p50_ns"])}
            attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in table.attrs.items()}
            timing = str(attrs.get("timing", timing))
            ranks = int(attrs.get("group_size", ranks or 0))
    if "nccl" not in p50 or not any(c in p50 for c in CUSTOM):
        raise ValueError(f"{path}: needs /collectives/all_reduce and a custom all-reduce table "
                         "(collectives --allreduce nccl,oneshot,push,push-ll,twoshot)")
    return {"timing": timing, "ranks": ranks, "p50_us": p50, "complete": bool(complete)}


def read_torch(path: str) -> Dict:
    with open(path) as f:
        doc = json.load(f)
    times: Dict[str, Dict[int, float]] = {}
    for row in doc["rows"]:
        times.setdefault(row["collective"], {})[int(row["size_bytes"])] = float(row["time_us"])
    # Earlier references called their one batch of back-to-back launches per_launch_mean.
    timing = doc.get("timing", "batch_mean")
    return {"timing": "batch_mean" if timing == "per_launch_mean" else timing,
            "ranks": int(doc["ranks"]), "time_us": times}


def mismatch(ours: Dict, torch: Dict) -> Optional[str]:
    if ours["timing"] != torch["timing"]:
        return (f"timings differ: ridgeline {ours['timing']}, PyTorch {torch['timing']} "
                "(time ridgeline with --graph and the reference with --graph, or ridgeline with "
                "--batch and the reference without)")
    if ours["ranks"] != torch["ranks"]:
        return f"ranks differ: ridgeline {ours['ranks']}, PyTorch {torch['ranks']}"
    return None


def rows(ours: Dict, torch: Optional[Dict], target: float) -> List[Dict]:
    out = []
    p50 = ours["p50_us"]
    for size in sorted(p50["nccl"]):
        row = {"bytes": size, "nccl": p50["nccl"][size]}
        custom = {c: p50[c][size] for c in CUSTOM if c in p50 and size in p50[c]}
        row.update(custom)
        best = min(custom, key=custom.get) if custom else None
        row["best"] = best
        row["best_over_nccl"] = custom[best] / row["nccl"] if best else None
        row["meets_target"] = best is not None and row["best_over_nccl"] <= target
        if torch is not None:
            t = torch["time_us"]
            row["torch_nccl"] = t.get("all_reduce", {}).get(size)
            row["torch_symm"] = t.get("all_reduce_symm_oneshot", {}).get(size)
            if best and row["torch_symm"]:
                row["best_over_torch_symm"] = custom[best] / row["torch_symm"]
        out.append(row)
    return out


def size_text(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def render(table: List[Dict], with_torch: bool, markdown: bool) -> str:
    head = ["bytes", "NCCL", *CUSTOM, "best", "best/NCCL"]
    if with_torch:
        head += ["torch NCCL", "torch symm 1-shot", "best/symm"]

    def num(v, fmt="{:.2f}"):
        return "-" if v is None else fmt.format(v)

    body = []
    for r in table:
        line = [size_text(r["bytes"]), num(r["nccl"]), *[num(r.get(c)) for c in CUSTOM],
                r["best"] or "-", num(r["best_over_nccl"], "{:.3f}")]
        if with_torch:
            line += [num(r.get("torch_nccl")), num(r.get("torch_symm")),
                     num(r.get("best_over_torch_symm"), "{:.3f}")]
        body.append(line)
    return format_columns(head, body, markdown=markdown)


def verdict(table: List[Dict], target: float, with_torch: bool) -> str:
    text = (f"{sum(r['meets_target'] for r in table)} of {len(table)} sizes with the fastest "
            f"custom all-reduce at <= {target:g} x NCCL's p50")
    if with_torch:
        compared = [r for r in table if r.get("best_over_torch_symm") is not None]
        faster = sum(r["best_over_torch_symm"] <= 1.0 for r in compared)
        text += (f"; {faster} of {len(compared)} no slower than PyTorch's symmetric-memory "
                 "one-shot")
    return text


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ridgeline", help="a `ridgeline collectives --allreduce ...` file")
    p.add_argument("torch", nargs="?", help="torch_collectives.py --json of the same sizes")
    p.add_argument("--target", type=float, default=0.6,
                   help="the fastest custom all-reduce's p50 over NCCL's to reach (default 0.6)")
    p.add_argument("--markdown", metavar="OUT", help="also write the table as markdown")
    a = p.parse_args(argv)
    try:
        ours = read_ridgeline(a.ridgeline)
    except (OSError, ValueError, KeyError) as e:
        print(f"allreduce_table: {e}", file=sys.stderr)
        return 2
    torch = read_torch(a.torch) if a.torch else None
    if torch is not None:
        why = mismatch(ours, torch)
        if why:
            print(f"allreduce_table: {why}", file=sys.stderr)
            return 2
    table = rows(ours, torch, a.target)
    mark = "" if ours["complete"] else " (incomplete)"
    if mark:
        print(f"allreduce_table: warning: {a.ridgeline} is incomplete (complete = 0: the job ended "
              "before it finished); its sizes are partial, marked (incomplete)", file=sys.stderr)
    print(f"{ours['ranks']} ranks, {ours['timing']} timing, us{mark}")
    print(render(table, torch is not None, False), end="")
    line = verdict(table, a.target, torch is not None)
    print(line)
    if a.markdown:
        try:
            output.write_text(a.markdown, render(table, torch is not None, True) + "\n" + line
                              + mark + "\n")
        except output.WriteError as e:
            print(f"allreduce_table: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
