"""PyTorch references of two roofs, timed with CUDA events as ridgeline times them: a bf16 matmul
(cuBLAS) at square sizes, and a device-to-device copy (bytes read + written). One GPU.

    python3 torch_roofs.py --json out.json [--sizes 4096,8192,16384] [--copy-bytes 4294967296]
"""
import argparse
import json

import torch


def time_calls(fn, warmup: int, reps: int):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e6)  # ns
    times.sort()
    return times[0], times[len(times) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", required=True)
    ap.add_argument("--sizes", default="4096,8192,16384")
    ap.add_argument("--copy-bytes", type=int, default=4 << 30)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "gemm": [], "copy": {}}
    for n in (int(s) for s in args.sizes.split(",")):
        # Random operands (zeros run faster); c = a @ w.T as ridgeline's c = a w^T.
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        best, p50 = time_calls(lambda: torch.matmul(a, w.t()), 2, args.reps)
        out["gemm"].append({"m": n, "n": n, "k": n, "best_ns": best, "p50_ns": p50,
                            "tflops": 2.0 * n ** 3 / best / 1e3})
        del a, w
    half = args.copy_bytes // 2
    src = torch.empty(half, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    best, p50 = time_calls(lambda: dst.copy_(src), 1, args.reps)
    out["copy"] = {"bytes": 2 * half, "best_ns": best, "p50_ns": p50, "gbps": 2 * half / best}
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
