#!/usr/bin/env python3
"""PyTorch-eager reference for ridgeline's tensor-parallel transformer layer (forward, or train).

Megatron-style layer, per rank (tp = world size), x [b*s, h] replicated:
  LN -> QKV (column-parallel) -> SDPA -> out proj (row-parallel) -> all_reduce -> +x
     -> LN -> FC1 (column-parallel) -> GELU(tanh) -> FC2 (row-parallel) -> all_reduce -> +x

--phase train times forward + autograd backward of the same layer (loss = sum(y * g) for a
fixed random g, as ridgeline's train phase): weight and input gradients, the TP all-reduces of
the backward through autograd functions (identity forward / all-reduce backward before each
column-parallel GEMM, the reverse after each row-parallel one), as Megatron does.

  torchrun --standalone --nproc-per-node N scripts/reference/torch_tp_layer.py [ARGS]
  python3 scripts/reference/torch_tp_layer.py [ARGS]     # N=1, no torch.distributed
"""
import os

# NVLink multicast (NVLS) stays off, as in every ridgeline process. NCCL and symmetric
# memory read these when they load, so they must be set before torch.distributed is imported.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"

import argparse
import json
import statistics

import torch
import torch.distributed as dist
import torch.nn.functional as F

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hidden", type=int, default=8192)
    p.add_argument("--heads", type=int, default=64)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--batch", type=int, help="default 1 (prefill) or 64 (decode)")
    p.add_argument("--ffn-hidden", type=int, help="default 4*hidden")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--phase", choices=("prefill", "decode", "train"), default="prefill")
    p.add_argument("--dtype", choices=tuple(DTYPES), default="bf16")
    p.add_argument("--json", metavar="OUT", help="write the results as JSON (rank 0)")
    a = p.parse_args(argv)
    if a.phase == "decode":
        a.seq = 1  # one new token per sequence, attending only to itself (no KV cache)
    if a.batch is None:
        a.batch = 64 if a.phase == "decode" else 1
    if a.ffn_hidden is None:
        a.ffn_hidden = 4 * a.hidden
    if a.iters < 1 or a.warmup < 0:
        p.error("--iters must be >= 1 and --warmup >= 0")
    return a


def make_weights(hidden, ffn, heads, tp, dtype, device):
    """This rank's shards: QKV/FC1 split by output features, proj/FC2 by input features."""
    def w(out_f, in_f):
        return torch.randn(out_f, in_f, dtype=dtype, device=device) * 0.02

    ones = torch.ones(hidden, dtype=dtype, device=device)
    zeros = torch.zeros(hidden, dtype=dtype, device=device)
    d = hidden // heads
    return {"ln1": (ones, zeros), "ln2": (ones, zeros), "heads_local": heads // tp,
            "qkv": w(3 * (heads // tp) * d, hidden), "proj": w(hidden, (heads // tp) * d),
            "fc1": w(ffn // tp, hidden), "fc2": w(hidden, ffn // tp)}


def all_reduce(t):
    # The TP group is the whole world here; with a single process there is nothing to sum.
    if dist.is_initialized():
        dist.all_reduce(t)
    return t


class ReduceForward(torch.autograd.Function):
    """After a row-parallel GEMM: sum the partial outputs; the gradient passes unchanged."""

    @staticmethod
    def forward(ctx, t):
        return all_reduce(t.clone()) if dist.is_initialized() else t

    @staticmethod
    def backward(ctx, g):
        return g


class ReduceBackward(torch.autograd.Function):
    """Before a column-parallel GEMM: identity; the input gradients' partial sums are summed."""

    @staticmethod
    def forward(ctx, t):
        return t

    @staticmethod
    def backward(ctx, g):
        return all_reduce(g.clone()) if dist.is_initialized() else g


def reduce_out(t):
    return ReduceForward.apply(t) if torch.is_grad_enabled() else all_reduce(t)


def copy_in(t):
    return ReduceBackward.apply(t) if torch.is_grad_enabled() else t


def layer(x, w, batch, seq):
    """One layer forward on this rank; x is [batch*seq, hidden], identical on every rank."""
    hidden = x.shape[1]
    h = copy_in(F.layer_norm(x, (hidden,), *w["ln1"]))
    qkv = F.linear(h, w["qkv"])                                   # [b*s, 3*h/tp]
    q, k, v = qkv.view(batch, seq, 3, w["heads_local"], -1).permute(2, 0, 3, 1, 4)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=seq > 1)  # [b, heads/tp, s, d]
    a = a.transpose(1, 2).reshape(batch * seq, -1)                # [b*s, h/tp]
    x = x + reduce_out(F.linear(a, w["proj"]))                    # partial sums -> [b*s, h]
    h = copy_in(F.layer_norm(x, (hidden,), *w["ln2"]))
    f = F.gelu(F.linear(h, w["fc1"]), approximate="tanh")         # [b*s, ffn/tp]
    return x + reduce_out(F.linear(f, w["fc2"]))


def train_step(x, g, w, batch, seq):
    """Forward and backward: the gradients of every weight and of x (set to None first)."""
    for t in [x] + [t for t in w.values() if isinstance(t, torch.Tensor)]:
        t.grad = None
    for pair in (w["ln1"], w["ln2"]):
        for t in pair:
            t.grad = None
    layer(x, w, batch, seq).backward(g)


def time_layer(x, w, args, device, g=None):
    """Per-iteration layer time in ms (a train step with `g`), the max over ranks."""
    def once():
        if g is None:
            layer(x, w, args.batch, args.seq)
        else:
            train_step(x, g, w, args.batch, args.seq)
    for _ in range(args.warmup):
        once()
    torch.cuda.synchronize()
    if dist.is_initialized():
        dist.barrier()  # start the timed loop on all ranks together
    torch.cuda.synchronize()
    # CUDA events time each forward on the GPU's own timeline. No host sync inside the
    # loop: a sync would drain the queue every iteration and add its latency to the
    # measurement, which real eager inference does not pay. One sync after the loop.
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
    for start, end in zip(starts, ends):
        start.record()
        once()
        end.record()
    torch.cuda.synchronize()
    times = torch.tensor([s.elapsed_time(e) for s, e in zip(starts, ends)],
                         dtype=torch.float64, device=device)
    # A TP layer is done only when its slowest rank is, so each iteration counts the
    # max over ranks (the same rule the C++ benchmark applies to its own timings).
    if dist.is_initialized():
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
    return times.tolist()


def summarize(samples):
    return {"p50_ms": statistics.median(samples), "mean_ms": statistics.fmean(samples),
            "min_ms": min(samples), "max_ms": max(samples)}


def report_line(args, tp, stats):
    return (f"torch-eager {args.phase} tp={tp} h={args.hidden} s={args.seq} b={args.batch}: "
            f"p50 {stats['p50_ms']:.3f} ms  mean {stats['mean_ms']:.3f} ms  "
            f"min {stats['min_ms']:.3f} ms  max {stats['max_ms']:.3f} ms  ({args.iters} iters)")


def main(argv=None):
    args = parse_args(argv)
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    if "WORLD_SIZE" in os.environ:
        dist.init_process_group("nccl", device_id=device)
    tp = dist.get_world_size() if dist.is_initialized() else 1
    rank = dist.get_rank() if dist.is_initialized() else 0
    if args.hidden % args.heads or args.heads % tp or args.ffn_hidden % tp:
        raise SystemExit(f"need heads | hidden, tp | heads and tp | ffn-hidden (tp={tp})")

    dtype = DTYPES[args.dtype]
    train = args.phase == "train"
    with torch.inference_mode(mode=not train):
        torch.manual_seed(0)  # same seed on every rank: x is replicated
        x = torch.randn(args.batch * args.seq, args.hidden, dtype=dtype, device=device)
        g = torch.randn_like(x) if train else None
        torch.manual_seed(1 + rank)  # each rank holds different shards
        w = make_weights(args.hidden, args.ffn_hidden, args.heads, tp, dtype, device)
        if train:
            x.requires_grad_(True)
            for t in list(w.values()) + list(w["ln1"]) + list(w["ln2"]):
                if isinstance(t, torch.Tensor):
                    t.requires_grad_(True)
        samples = time_layer(x, w, args, device, g)

    if rank == 0:
        stats = summarize(samples)
        print(report_line(args, tp, stats), flush=True)
        if args.json:
            result = {"phase": args.phase, "tp": tp, "hidden": args.hidden, "heads": args.heads,
                      "ffn_hidden": args.ffn_hidden, "seq": args.seq, "batch": args.batch,
                      "dtype": args.dtype, "iters": args.iters, **stats, "samples_ms": samples,
                      "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
                      "nccl_version": ".".join(map(str, torch.cuda.nccl.version())),
                      "device_name": torch.cuda.get_device_name(device)}
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            with open(args.json, "w") as f:
                json.dump(result, f, indent=2)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
