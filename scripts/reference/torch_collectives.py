#!/usr/bin/env python3
"""PyTorch/NCCL reference for `ridgeline collectives`: the same collectives, sizes and timing
rule as nccl-tests (warm-up, then `iters` back-to-back launches between two CUDA events, time =
elapsed / iters, busbw = algbw * factor; the median of --replays such batches, as `ridgeline
collectives --batch`), so ratios come from one job on one machine. With
--graph, as nccl-tests -G and `ridgeline collectives --graph` time them: the `iters` launches are
captured in one CUDA graph, and the time is the median over replays of replay time / iters.

  torchrun --standalone --nproc-per-node N scripts/reference/torch_collectives.py [ARGS]

PyTorch brings its own NCCL build; the version it reports is printed and stored with the
results, beside the NCCL that ridgeline loaded.
"""
import os

# NVLink multicast (NVLS) stays off, as in every ridgeline process; NCCL reads it at load time.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"

import argparse
import json

import torch
import torch.distributed as dist

SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def start_ranks():
    """NCCL process group of torchrun's ranks, each on the GPU of its LOCAL_RANK: (rank, world
    size, device)."""
    dist.init_process_group("nccl")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    torch.cuda.set_device(device)
    return dist.get_rank(), dist.get_world_size(), device


def size_bytes(text):
    text = text.upper().rstrip("B")
    unit = text[-1] if text and text[-1] in SUFFIX else ""
    return int(text[: len(text) - len(unit)]) * SUFFIX[unit]


def busbw_factor(name, n):
    return {"all_reduce": 2 * (n - 1) / n, "all_reduce_symm_oneshot": 2 * (n - 1) / n,
            "all_gather": (n - 1) / n,
            "reduce_scatter": (n - 1) / n, "sendrecv": 1.0}[name]


def launcher(name, size, n, rank, device):
    """One call of collective `name` whose nccl-tests size is `size` bytes (bf16)."""
    elems = size // 2
    if name == "all_reduce":
        buf = torch.ones(elems, dtype=torch.bfloat16, device=device)
        return lambda: dist.all_reduce(buf)
    if name == "all_reduce_symm_oneshot":
        # PyTorch's symmetric-memory one-shot all-reduce: every rank reads each peer's buffer
        # through NVLink and sums (the buffer allocated and exchanged once, outside the timing).
        import torch.distributed._symmetric_memory as symm_mem
        group = dist.group.WORLD.group_name
        if hasattr(symm_mem, "enable_symm_mem_for_group"):
            symm_mem.enable_symm_mem_for_group(group)
        buf = symm_mem.empty(elems, dtype=torch.bfloat16, device=device).fill_(1)
        symm_mem.rendezvous(buf, group)
        return lambda: torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", group)
    if name == "all_gather":
        out = torch.empty(elems - elems % n, dtype=torch.bfloat16, device=device)
        inp = torch.ones(out.numel() // n, dtype=torch.bfloat16, device=device)
        return lambda: dist.all_gather_into_tensor(out, inp)
    if name == "reduce_scatter":
        inp = torch.ones(elems - elems % n, dtype=torch.bfloat16, device=device)
        out = torch.empty(inp.numel() // n, dtype=torch.bfloat16, device=device)
        return lambda: dist.reduce_scatter_tensor(out, inp)
    send = torch.ones(elems, dtype=torch.bfloat16, device=device)
    recv = torch.empty_like(send)
    nxt, prv = (rank + 1) % n, (rank - 1) % n

    def ring():
        ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
    return ring


def median_over_ranks(times, device):
    """The median of this rank's per-call times, the largest over the ranks (a collective's time)."""
    times = sorted(times)
    t = torch.tensor([times[len(times) // 2]], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def time_launches_ms(call, warmup, iters, batches, device):
    """nccl-tests' timing of `call`: after `warmup` calls and a barrier, `batches` batches of
    `iters` back-to-back calls, two CUDA events around each batch (none between the calls); ms
    per call: the median over the batches of batch time / iters, the largest over the ranks (a
    collective's time). As `ridgeline collectives --batch` times them."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    dist.barrier()
    events = []
    for _ in range(batches):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            call()
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    return median_over_ranks([start.elapsed_time(end) / iters for start, end in events], device)


def time_graph_ms(call, warmup, iters, replays, device):
    """`iters` calls captured in one CUDA graph (after `warmup` eager calls on the capture
    stream); ms per call: the median over `replays` timed replays of replay time / iters, the
    largest over the ranks."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            call()
    torch.cuda.current_stream(device).wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(iters):
            call()
    graph.replay()  # untimed: the first launch uploads the graph
    torch.cuda.synchronize()
    dist.barrier()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / iters)
    return median_over_ranks(times, device)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="8,1K,64K,128K,64M,256M,1G,2G",
                   help="comma list of nccl-tests sizes (bytes, K/M/G suffixes)")
    p.add_argument("--collectives", default="all_reduce,all_gather,reduce_scatter,sendrecv",
                   help="comma list; also all_reduce_symm_oneshot (PyTorch's symmetric-memory "
                   "one-shot all-reduce, for small messages)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--graph", action="store_true",
                   help="capture --iters launches in one CUDA graph and time its replays")
    p.add_argument("--replays", type=int, default=10,
                   help="timed batches of --iters launches per size (with --graph: replays)")
    p.add_argument("--json", metavar="OUT", help="write the results as JSON (rank 0)")
    a = p.parse_args()

    rank, n, device = start_ranks()
    rows = []
    for name in a.collectives.split(","):
        for text in a.sizes.split(","):
            size = size_bytes(text)
            call = launcher(name, size, n, rank, device)
            if a.graph:
                time_us = time_graph_ms(call, a.warmup, a.iters, a.replays, device) * 1e3
            else:
                time_us = time_launches_ms(call, a.warmup, a.iters, a.replays, device) * 1e3
            algbw = size / (time_us * 1e3)
            rows.append({"collective": name, "size_bytes": size, "time_us": time_us,
                         "algbw_gbps": algbw, "busbw_gbps": algbw * busbw_factor(name, n)})
    if rank == 0:
        nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
        timing = (f"{a.iters} launches in one CUDA graph, median of {a.replays} replays"
                  if a.graph else f"{a.iters} launches back to back, median of {a.replays} batches")
        print(f"torch {torch.__version__}, NCCL {nccl}, {n} ranks, bf16, "
              f"{a.warmup} warm-up + {timing} per size")
        print(f"{'collective':<16}{'size(B)':>12}{'time(us)':>11}{'algbw(GB/s)':>13}{'busbw(GB/s)':>13}")
        for r in rows:
            print(f"{r['collective']:<16}{r['size_bytes']:>12}{r['time_us']:>11.2f}"
                  f"{r['algbw_gbps']:>13.3f}{r['busbw_gbps']:>13.3f}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"torch": torch.__version__, "nccl": nccl, "ranks": n,
                           "timing": "graph_replay" if a.graph else "batch_mean",
                           "rows": rows}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
