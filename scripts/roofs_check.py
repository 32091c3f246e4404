"""The roofs benchmarks of the GPU check, as ratios measured in one job:
GEMM roof / PyTorch matmul of the same shape and copy roof / PyTorch device copy, from rounds in
which ridgeline and PyTorch take turns (medians over the rounds, so that clocks drifting under
the power cap fall on both alike); the largest attributed op efficiency of each file; and each
sweep point's overhead beyond its iterations.

    python3 roofs_check.py --turn ROOFS.h5 TORCH.json [--turn ...] [RUN_OR_SWEEP.h5 ...]
"""
import argparse
import json
import statistics

import h5py


def roofs_figures(path):
    """{(m, n, k): bf16 TFLOP/s} of square GEMMs, and the copy roof at the largest size (bytes, GB/s)."""
    with h5py.File(path, "r") as f:
        gemm = {(int(r["m"]), int(r["n"]), int(r["k"])): float(r["tflops"]) for r in f["roofs/gemm"][()]
                if r["dtype"] == b"bf16" and r["label"] == b"square"}
        copies = [r for r in f["roofs/memory"][()] if r["kind"] == b"copy"]
        largest = max(copies, key=lambda r: r["bytes"])
        memory = {r["kind"].decode(): float(r["gbps"]) for r in f["roofs/memory"][()] if r["bytes"] == largest["bytes"]}
    return gemm, int(largest["bytes"]), memory


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turn", nargs=2, action="append", default=[], metavar=("ROOFS_H5", "TORCH_JSON"))
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    print("benchmark                                   ridgeline    pytorch    ratio  target  (median of turns; each turn's ratio)")
    ours, theirs, copy_ours, copy_theirs, reads = {}, {}, [], [], []
    for roofs_path, torch_path in args.turn:
        gemm, copy_bytes, memory = roofs_figures(roofs_path)
        ref = json.load(open(torch_path))
        for g in ref["gemm"]:
            shape = (g["m"], g["n"], g["k"])
            if shape in gemm:
                ours.setdefault(shape, []).append(gemm[shape])
                theirs.setdefault(shape, []).append(g["tflops"])
        copy_ours.append(memory["copy"])
        copy_theirs.append(ref["copy"]["gbps"])
        reads.append((memory["read"], memory["write"]))
    for shape in sorted(ours):
        a, b = statistics.median(ours[shape]), statistics.median(theirs[shape])
        each = ", ".join(f"{x / y:.3f}" for x, y in zip(ours[shape], theirs[shape]))
        print(f"gemm roof bf16 {shape[0]}^3 (TFLOP/s)          {a:9.1f}  {b:9.1f}  {a / b:7.3f}  >= 0.97  ({each})")
    if copy_ours:
        a, b = statistics.median(copy_ours), statistics.median(copy_theirs)
        each = ", ".join(f"{x / y:.3f}" for x, y in zip(copy_ours, copy_theirs))
        print(f"copy roof {copy_bytes / 2**30:.0f} GiB (GB/s, read + write)      {a:9.1f}  {b:9.1f}  {a / b:7.3f}  >= 0.95  ({each})")
        print("read / write roof at that size (GB/s):      " + "; ".join(f"{r:.1f} / {w:.1f}" for r, w in reads))
    for path in args.files:
        with h5py.File(path, "r") as f:
            summaries = []
            if "summary/ops" in f:
                summaries.append(("", f["summary/ops"][()]))
            for k in f.get("points", {}):
                if "summary/ops" in f["points"][k]:
                    summaries.append((f"p{k}", f["points"][k]["summary/ops"][()]))
            worst = max(((float(r["efficiency"]), label, r["name"].decode()) for label, ops in summaries
                         for r in ops if "efficiency" in ops.dtype.names), default=None)
            if worst:
                print(f"max op efficiency {path.split('/')[-1]:24s} {worst[0]:9.3f} ({worst[2]} {worst[1]})  <= 1.05")
            if "sweep/points" in f:
                ok = [p for p in f["sweep/points"][()] if p["status"] == b"ok"]
                if ok:
                    setup = sorted(float(p["setup_s"]) for p in ok)
                    print(f"sweep {path.split('/')[-1]:24s} point overhead max {setup[-1]:6.2f} s, "
                          f"median {setup[len(setup) // 2]:6.2f} s  <= 2 s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
