"""PyTorch reference of attention alone: scaled_dot_product_attention under each SDPA backend
(cudnn, flash, efficient, math), forward and backward, on the shapes bench_attention times, with
the same layout (rows of heads: [batch, seq, heads, head_dim] seen as [batch, heads, seq, d]),
CUDA events around each call (median of --reps) and the same FLOP convention: forward
4 * b * h * s * s * d, halved when causal; backward 2.5 x forward. One GPU.

    python3 torch_attention.py --json out.json [--seq 4096,16384,32768] [--kv-heads 32,4]
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}


def time_calls(fn, warmup: int, reps: int):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    pairs = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    ms = sorted(s.elapsed_time(e) for s, e in pairs)
    return ms[0], ms[len(ms) // 2]


def rows_of_heads(b, s, h, d, dtype, grad=False):
    # ridgeline's layout: token rows of heads x head_dim columns.
    t = torch.randn(b, s, h, d, device="cuda", dtype=dtype).transpose(1, 2)
    return t.requires_grad_(grad)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", required=True)
    ap.add_argument("--backends", default="cudnn,flash,efficient,math")
    ap.add_argument("--seq", default="4096,16384,32768")
    ap.add_argument("--kv-heads", default="32,4")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--non-causal", action="store_true")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    causal = not args.non_causal
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cudnn": str(torch.backends.cudnn.version()), "rows": []}
    b, h, d = args.batch, args.heads, args.head_dim
    for s in (int(x) for x in args.seq.split(",")):
        for kvh in (int(x) for x in args.kv_heads.split(",")):
            fwd_flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
            for name in args.backends.split(","):
                row = {"impl": name, "batch": b, "seq": s, "heads": h, "kv_heads": kvh, "head_dim": d,
                       "causal": causal, "dtype": args.dtype}
                # The math backend materialises the scores (fp32 softmax and its gradient).
                if name == "math":
                    need = 3 * 4 * b * h * s * s
                    free, _ = torch.cuda.mem_get_info()
                    if need > free // 2:
                        for p in ("fwd", "bwd"):
                            out["rows"].append(dict(row, **{"pass": p, "status": "skipped: does not fit in memory"}))
                        continue
                try:
                    q = rows_of_heads(b, s, h, d, dtype, True)
                    k = rows_of_heads(b, s, kvh, d, dtype, True)
                    v = rows_of_heads(b, s, kvh, d, dtype, True)
                    gqa = {"enable_gqa": True} if kvh != h else {}
                    with sdpa_kernel([BACKENDS[name]]):
                        with torch.no_grad():
                            best, p50 = time_calls(
                                lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa),
                                args.warmup, args.reps)
                        out["rows"].append(dict(row, **{"pass": "fwd", "flops": fwd_flops, "best_ms": best,
                                                        "p50_ms": p50, "status": "ok"}))
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
                        do = torch.randn_like(o)
                        best, p50 = time_calls(
                            lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True),
                            args.warmup, args.reps)
                        out["rows"].append(dict(row, **{"pass": "bwd", "flops": 2.5 * fwd_flops, "best_ms": best,
                                                        "p50_ms": p50, "status": "ok"}))
                    del o, do
                except (RuntimeError, torch.OutOfMemoryError) as e:
                    done = {r["pass"] for r in out["rows"] if r["impl"] == name and r["seq"] == s
                            and r["kv_heads"] == kvh}
                    for p in ("fwd", "bwd"):
                        if p not in done:
                            out["rows"].append(dict(row, **{"pass": p, "status": "failed: " + str(e).splitlines()[0][:200]}))
                q = k = v = None
                torch.cuda.empty_cache()
    for r in out["rows"]:
        if r["status"] == "ok":
            r["tflops"] = r["flops"] / (r["p50_ms"] * 1e9)
        print(f"{r['impl']:<9} {r['pass']} s={r['seq']:<6} kv={r['kv_heads']:<3} "
              f"{r.get('p50_ms', float('nan')):>9.4f} ms {r.get('tflops', float('nan')):>7.1f} TFLOP/s  {r['status']}")
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
