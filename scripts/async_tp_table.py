"""A TP layer's GEMM + collective pairs under each of ridgeline's overlap strategies beside
PyTorch's fused async-TP ops on the same shapes: scripts/reference/torch_async_tp.py's JSON
(torch.ops.symm_mem.fused_all_gather_matmul / fused_matmul_reduce_scatter, and NCCL + matmul)
against a `ridgeline run` of the same layer with --sequence-parallel and several --overlap
strategies, on the same GPUs.

    python3 scripts/async_tp_table.py [--markdown OUT.md] RUN.h5 TORCH.json

ridgeline's time of a pair is analysis.pair_times_ns(): per layer and iteration, the span from
the first start to the last end of the GEMM's and the collective's rows (all their chunks), the
largest over the ranks; its median over the timed iterations of the instrumented run. PyTorch's
is the median over rounds of back-to-back calls between two events, the largest over the ranks.
A reduce-scatter pair (proj, fc2) is also charged with what the op after it
(analysis.TP_PAIR_NEXT) took beyond that op's median under `none` in the same run, where a
strategy leaves the pair's sum to that op (the copy-engine ring at TP2 adds the peer's partial in
the norm that follows), so that every pair's time holds its sum as PyTorch's fused op's does.
Prints one row per pair, the best strategy's time over PyTorch's fused op, and how many pairs
ridgeline's best strategy runs faster than the fused op. Exits 2 when the files do not describe
the same layer on the same number of ranks.
"""
import argparse
import json
import sys
from typing import Dict, List, Optional

import numpy as np

from ridgeline_analysis import analysis, output, reader
from ridgeline_analysis.tables import format_columns


def strategies(run: reader.Run) -> List[reader.Run]:
    """The run's strategies: its points, or the run itself when it holds one."""
    return run.points or [run]


def strategy_name(point: reader.Run) -> str:
    return str(point.config.get("strategy", point.config.get("overlap", "none")))


def check_same_layer(run: reader.Run, ref: Dict) -> Optional[str]:
    """Why the two files do not describe the same layer, or None."""
    args = ref.get("args", {})
    config = run.config
    if not int(config.get("sequence_parallel", 0)):
        return "the run has no sequence parallelism: PyTorch's fused ops are its pairs"
    pairs = [("ranks", int(config.get("tp", 1)), int(ref.get("world_size", 0))),
             ("seq", int(config.get("seq", 0)), int(args.get("seq", -1))),
             ("batch", int(config.get("batch", 0)), int(args.get("batch", -1))),
             ("hidden", int(config.get("hidden", 0)), int(args.get("hidden", -1)))]
    for what, ours, theirs in pairs:
        if ours != theirs:
            return f"{what} differs: {ours} in the run, {theirs} in the reference"
    return None


def next_op_ms(point: reader.Run) -> Dict[str, float]:
    """The median time (ms) of the op after each reduce-scatter pair, where the file has it."""
    out = {}
    for pair, name in analysis.TP_PAIR_NEXT.items():
        t = analysis.op_total_per_instance_ns(point, name)
        if t.size:
            out[pair] = float(np.median(t)) / 1e6
    return out


def deferred_ms(points: List[reader.Run]) -> Dict[str, Dict[str, float]]:
    """Per strategy and reduce-scatter pair, what the op after the pair took beyond its median
    under `none` (never below 0); empty without a `none` strategy in the run."""
    nexts = {strategy_name(p): next_op_ms(p) for p in points}
    base = nexts.get("none")
    if base is None:
        return {}
    return {s: {pair: max(0.0, t - base[pair]) for pair, t in n.items() if pair in base}
            for s, n in nexts.items()}


def table(run: reader.Run, ref: Dict) -> List[Dict]:
    """One row per pair of the reference: its times (ms) and ridgeline's per strategy, each
    reduce-scatter pair with the time its sum took in the next op (deferred_ms)."""
    points = [p for p in strategies(run) if p.status == "ok"]
    deferred = deferred_ms(points)
    times = {strategy_name(p): {pair: float(np.median(t)) / 1e6
                                for pair, t in analysis.pair_times_ns(p).items()}
             for p in points}
    rows = []
    for r in ref["pairs"]:
        pair = r["pair"]
        charged = {s: deferred.get(s, {}).get(pair, 0.0) for s, t in times.items() if pair in t}
        ours = {s: t[pair] + charged[s] for s, t in times.items() if pair in t}
        best = min(ours, key=ours.get) if ours else None
        rows.append({"pair": pair, "op": r["op"], "fused_ms": r["fused_ms"],
                     "unfused_ms": r["unfused_ms"], "strategies": ours, "charged": charged,
                     "best": best, "best_ms": ours[best] if best else float("nan")})
    return rows


def charges(rows: List[Dict]) -> str:
    """The time each strategy's pair was charged for its sum in the next op, one line."""
    parts = [f"{r['pair']} {s} +{c:.3f}" for r in rows for s, c in sorted(r["charged"].items())
             if c >= 0.0005]
    return ("charged for the sum in the next op (ms, beyond none's): " +
            (", ".join(parts) if parts else "nothing") + "\n")


def format_rows(rows: List[Dict], markdown: bool) -> str:
    names = sorted({s for r in rows for s in r["strategies"]})
    head = ["pair", "PyTorch op", "fused ms", "NCCL + matmul ms", *[f"{s} ms" for s in names],
            "best", "best / fused"]
    body = []
    for r in rows:
        ratio = r["best_ms"] / r["fused_ms"] if r["best"] else float("nan")
        body.append([r["pair"], r["op"], f"{r['fused_ms']:.3f}", f"{r['unfused_ms']:.3f}",
                     *[f"{r['strategies'][s]:.3f}" if s in r["strategies"] else "" for s in names],
                     r["best"] or "none ran", f"{ratio:.3f}"])
    return format_columns(head, body, left=2, markdown=markdown)


def verdict(rows: List[Dict]) -> str:
    faster = [r["pair"] for r in rows if r["best"] and r["best_ms"] < r["fused_ms"]]
    return (f"{len(faster)} of {len(rows)} pairs faster than PyTorch's fused op with ridgeline's "
            f"best strategy" + (f" ({', '.join(faster)})" if faster else ""))


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="ridgeline run file (--sequence-parallel, --overlap ...)")
    ap.add_argument("reference", help="JSON of scripts/reference/torch_async_tp.py")
    ap.add_argument("--markdown", help="also write the table as markdown to this file")
    args = ap.parse_args(argv)
    try:
        run = reader.load(args.run)
        with open(args.reference) as f:
            ref = json.load(f)
    except (reader.SchemaError, OSError, ValueError) as e:
        print(f"async_tp_table: {e}", file=sys.stderr)
        return 2
    why = check_same_layer(run, ref)
    if why is not None:
        print(f"async_tp_table: {args.run} and {args.reference} are not the same layer: {why}",
              file=sys.stderr)
        return 2
    rows = table(run, ref)
    print(format_rows(rows, markdown=False), end="")
    print(charges(rows), end="")
    print(verdict(rows))
    if args.markdown:
        try:
            output.write_text(args.markdown, format_rows(rows, markdown=True) + "\n" +
                              charges(rows) + "\n" + verdict(rows) + "\n")
        except output.WriteError as e:
            print(f"async_tp_table: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
