#!/usr/bin/env python3
"""PyTorch async tensor parallelism on a layer's shapes: the all-gather + GEMM pairs (QKV, FC1)
and GEMM + reduce-scatter pairs (projection, FC2) of one sequence-parallel transformer layer,
each as PyTorch's fused symmetric-memory op (torch.ops.symm_mem.fused_all_gather_matmul,
torch.ops.symm_mem.fused_matmul_reduce_scatter) and unfused (the NCCL collective, then the
matmul), taking turns, so that ridgeline's overlap strategies can be held to them in one job.

  torchrun --standalone --nproc-per-node N scripts/reference/torch_async_tp.py \\
      --hidden 8192 --heads 64 --ffn 32768 --seq 4096 --batch 1 [--json OUT]

Each pair is timed as nccl-tests times a collective: after a warm-up, `iters` back-to-back
calls between two CUDA events on every rank, the time the largest over the ranks; `rounds`
rounds with the fused and unfused forms alternating, medians reported. The fused output is
compared with the unfused one (relative L2 error).
"""
import os

# NVLink multicast stays off, as in every ridgeline process (read when NCCL loads).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"

import argparse
import json
import statistics

import torch
import torch.distributed as dist

from torch_collectives import start_ranks, time_launches_ms


def pairs(a, n):
    """(name, kind, A rows, A cols, B cols) of the layer's four pairs at tp = n."""
    tokens = a.batch * a.seq
    d = a.hidden // a.heads
    kv = a.kv_heads or a.heads
    fc1 = (2 if a.mlp == "swiglu" else 1) * a.ffn // n
    return [
        ("qkv", "all_gather_matmul", tokens // n, a.hidden, (a.heads + 2 * kv) * d // n),
        ("proj", "matmul_reduce_scatter", tokens, a.heads * d // n, a.hidden),
        ("fc1", "all_gather_matmul", tokens // n, a.hidden, fc1),
        ("fc2", "matmul_reduce_scatter", tokens, a.ffn // n, a.hidden),
    ]


def calls(kind, rows, k, cols, n, group, device):
    """(fused, unfused) callables of one pair, each returning its output."""
    gen = torch.Generator(device=device).manual_seed(1234 + dist.get_rank())
    A = torch.randn(rows, k, dtype=torch.bfloat16, device=device, generator=gen) * 0.1
    B = torch.randn(k, cols, dtype=torch.bfloat16, device=device, generator=gen) * 0.1
    name = group.group_name
    if kind == "all_gather_matmul":
        gathered = torch.empty(rows * n, k, dtype=torch.bfloat16, device=device)

        def fused():
            return torch.ops.symm_mem.fused_all_gather_matmul(A, [B], 0, name)[1][0]

        def unfused():
            dist.all_gather_into_tensor(gathered, A, group=group)
            return gathered @ B
        return fused, unfused
    scattered = torch.empty(rows // n, cols, dtype=torch.bfloat16, device=device)

    def fused():
        return torch.ops.symm_mem.fused_matmul_reduce_scatter(A, B, "sum", 0, name)

    def unfused():
        dist.reduce_scatter_tensor(scattered, A @ B, group=group)
        return scattered
    return fused, unfused


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hidden", type=int, default=8192)
    p.add_argument("--heads", type=int, default=64)
    p.add_argument("--kv-heads", type=int, default=0, help="0: as many as --heads")
    p.add_argument("--ffn", type=int, default=32768)
    p.add_argument("--mlp", choices=["gelu", "swiglu"], default="gelu")
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", metavar="OUT", help="write the results as JSON (rank 0)")
    a = p.parse_args()

    rank, n, device = start_ranks()
    group = dist.group.WORLD
    import torch.distributed._symmetric_memory as symm_mem
    if hasattr(symm_mem, "enable_symm_mem_for_group"):
        symm_mem.enable_symm_mem_for_group(group.group_name)

    rows = []
    for name, kind, m, k, cols in pairs(a, n):
        fused, unfused = calls(kind, m, k, cols, n, group, device)
        got, want = fused().float(), unfused().float()
        err = (torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want)).item()
        times = {"fused": [], "unfused": []}
        for _ in range(a.rounds):
            for form, call in (("fused", fused), ("unfused", unfused)):
                times[form].append(time_launches_ms(call, a.warmup, a.iters, 1, device))
        row = {"pair": name, "op": kind, "m": m, "k": k, "n": cols,
               "fused_ms": statistics.median(times["fused"]),
               "unfused_ms": statistics.median(times["unfused"]),
               "fused_ms_rounds": times["fused"], "unfused_ms_rounds": times["unfused"],
               "rel_l2_fused_vs_unfused": err}
        rows.append(row)
        if rank == 0:
            print(f"{name:5s} {kind:22s} A {m}x{k} B {k}x{cols}: fused {row['fused_ms']:.3f} ms, "
                  f"unfused {row['unfused_ms']:.3f} ms, rel. error {err:.2e}", flush=True)
    if rank == 0 and a.json:
        with open(a.json, "w") as f:
            json.dump({"torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                       "gpu": torch.cuda.get_device_name(device), "world_size": n,
                       "args": vars(a), "pairs": rows}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
