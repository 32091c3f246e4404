"""The roofs benchmarks of the GPU check, as ratios measured in one job:
GEMM roof / PyTorch matmul of the same shape, copy roof / PyTorch device copy, the largest
attributed op efficiency of each run file, and each sweep point's overhead beyond its iterations.

    python3 roofs_check.py ROOFS.h5 TORCH.json [RUN_OR_SWEEP.h5 ...]
"""
import json
import sys

import h5py


def main(argv) -> int:
    roofs_path, torch_path, *files = argv
    ref = json.load(open(torch_path))
    with h5py.File(roofs_path, "r") as f:
        gemm = f["roofs/gemm"][()]
        memory = f["roofs/memory"][()]
    print("benchmark                                   ridgeline    pytorch    ratio  target")
    for g in ref["gemm"]:
        rows = [r for r in gemm if r["dtype"].decode() == "bf16" and r["m"] == g["m"] and r["label"].decode() == "square"]
        if rows:
            ours = rows[0]["tflops"]
            print(f"gemm roof bf16 {g['m']}^3 (TFLOP/s)             {ours:9.1f}  {g['tflops']:9.1f}  {ours / g['tflops']:7.3f}  >= 0.97")
    copies = [r for r in memory if r["kind"].decode() == "copy"]
    largest = max(copies, key=lambda r: r["bytes"])
    c = ref["copy"]
    print(f"copy roof {largest['bytes'] / 2**30:.0f} GiB vs torch {c['bytes'] / 2**30:.0f} GiB (GB/s)      "
          f"{largest['gbps']:9.1f}  {c['gbps']:9.1f}  {largest['gbps'] / c['gbps']:7.3f}  >= 0.95")
    for path in files:
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
                pts = f["sweep/points"][()]
                ok = [p for p in pts if p["status"].decode() == "ok"]
                if ok:
                    print(f"sweep {path.split('/')[-1]:24s} point overhead max {max(p['setup_s'] for p in ok):6.2f} s, "
                          f"median {sorted(p['setup_s'] for p in ok)[len(ok) // 2]:6.2f} s  <= 2 s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
