#!/usr/bin/env bash
# The nine jobs of this directory, each on a fresh node of 2 x H100 (asked for as 2 x H200),
# NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 in every process,
# from a bundle of the build of commit a630437 (files: 13374c5e258d-dirty) made with
# scripts/bundle.sh, and for "before" the ridgeline binary of the bundle of commit 3b1e5f5.
# RUN = orterun --bind-to none --map-by slot -np 2 (the bundle's Open MPI).
#
# Job L: the GPU tests of the changed code, then two turns of the ring before/after, then the
# custom all-reduce section of gpu-check (batch and graph timing, two turns):
GPU_CHECK_TESTS="test_cuda_backend test_peer_exchange_cuda" scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only tests
for turn in 1 2; do for build in before after; do for b in 1 4; do
  RUN ridgeline-$build run --config models/gpt-h8192.toml --seq 4096 --batch $b --tp 2 \
    --sequence-parallel --warmup 3 --iters 15 --overlap none,async,chunked:4,ce-ring,symm:chunked:4 \
    --timeout 60 --out L/ab/ce_ring_b${b}_spon_${build}_$turn.h5
done; done; done
COLLECTIVE_NPS=2 GPU_CHECK_TURNS="1 2" scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only custom_allreduce
#   per turn and mode (batch: ridgeline --batch, the reference without --graph; graph: --graph on both):
#   torchrun --standalone --nproc-per-node 2 scripts/reference/torch_collectives.py \
#     --collectives all_reduce,all_reduce_symm_oneshot --sizes 8K,16K,...,4M --warmup 20 --iters 100 [--graph]
#   RUN ridgeline collectives --collectives all_reduce --allreduce nccl,oneshot,push,push-ll,twoshot \
#     --min-bytes 8K --max-bytes 4M --warmup 20 --iters 100 --batch|--graph
#   python3 scripts/allreduce_table.py FILE.h5 TORCH.json --markdown TABLE.md
#
# Job M: the ring before/after, three turns at b4 and two at b1 (same command as job L, b4 first
# in each turn), then per batch B in 1 4:
#   torchrun --standalone --nproc-per-node 2 scripts/reference/torch_async_tp.py --hidden 8192 \
#     --heads 64 --ffn 32768 --seq 4096 --batch B --json M/ab/torch_async_tp_bB.json
#   python3 scripts/async_tp_table.py M/ab/ce_ring_bB_spon_BUILD_TURN.h5 M/ab/torch_async_tp_bB.json
#
# Job O: the ring without sequence parallelism, "after" = the build of commit 8ebcd41, two turns:
#   the job L ring command without --sequence-parallel, b4 then b1, OUT O/ab/ce_ring_bB_spoff_BUILD_TURN.h5
#   (and GPU_CHECK_TESTS=test_peer_exchange_cuda scripts/gpu-check.sh OUT --only tests first)
#
# Job N: twice, gpu-check's collectives section at 2 ranks:
COLLECTIVE_NPS=2 scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only collectives
#
# Job P (the build of commit d976e41): gpu-check's decode_tp2 section with push-ll, both GEMM
# choices; the ring at b4 and b1, with and without sequence parallelism, one run each; PyTorch's
# async-TP pairs; gpu-check's custom_allreduce section, one turn:
for algo in skinny heuristic; do
  DECODE_TP2_ALGO=$algo DECODE_TP2_ALLREDUCE=push-ll scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only decode_tp2
done
#   RUN ridgeline run --config models/gpt-h8192.toml --seq 4096 --batch B --tp 2 [--sequence-parallel] \
#     --warmup 3 --iters 15 --overlap none,async,chunked:4,ce-ring,symm:chunked:4 --timeout 60 \
#     --out P/ab/ce_ring_bB_spon|spoff.h5
#   torch_async_tp.py and async_tp_table.py as in job M, on P/ab/ce_ring_bB_spon.h5
COLLECTIVE_NPS=2 GPU_CHECK_TURNS=1 scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only custom_allreduce
#
# Job Q (the build of commit 8107c38): the GPU test of the ring, then turns 1-3 (b1 in turns 1
# and 2 only; the run with sequence parallelism in turns 1 and 2 only):
GPU_CHECK_TESTS=test_peer_exchange_cuda scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only tests
for turn in 1 2 3; do
  for b in 4 1; do
    RUN ridgeline run --config models/gpt-h8192.toml --seq 4096 --batch $b --tp 2 --warmup 3 --iters 15 \
      --overlap none,chunked:4,ce-ring,ce-ring:2,ce-ring:4 --timeout 60 --out Q/ab/ring_b${b}_spoff_$turn.h5
  done
  RUN ridgeline run --config models/gpt-h8192.toml --seq 4096 --batch 4 --tp 2 --sequence-parallel \
    --warmup 3 --iters 15 --overlap none,async,chunked:4,ce-ring,symm:chunked:4 --timeout 60 \
    --out Q/ab/ring_b4_spon_$turn.h5
done
#
# Job R: the GPU tests (GPU_CHECK_TESTS="test_cuda_backend test_peer_exchange_cuda"), then the
# build of commit 8107c38 ("before") and of commit bc3c71b ("after") taking turns, b1 in turns 1
# and 2 only:
for turn in 1 2 3; do for build in before after; do for b in 4 1; do
  RUN ridgeline-$build run --config models/gpt-h8192.toml --seq 4096 --batch $b --tp 2 --warmup 3 \
    --iters 15 --overlap none,ce-ring,ce-ring:2,ce-ring:4 --timeout 60 --out R/ab/ring_b${b}_spoff_${build}_$turn.h5
done; done; done
#
# Job S (the build of commit feffcda): the GPU test of the ring, then per turn 1-3 (the last two
# in turns 1 and 2 only):
#   RUN ridgeline run ... --batch 4 --sequence-parallel --overlap none,chunked:4,ce-ring,ce-ring:2,ce-ring:4
#   RUN ridgeline run ... --batch 1 --sequence-parallel --overlap none,chunked:4,ce-ring,ce-ring:2,ce-ring:4
#   RUN ridgeline run ... --batch 4 --overlap none,chunked:4,ce-ring,ce-ring:2
# (... = --config models/gpt-h8192.toml --seq 4096 --tp 2 --warmup 3 --iters 15 --timeout 60),
# then torch_async_tp.py at b4 and b1 and async_tp_table.py on the runs with sequence parallelism
# of turns 1 and 2.
#
# Job T (the build of commit feffcda), turns 1-3 (the second in turns 1 and 2 only):
#   RUN ridgeline run ... --batch 4 --overlap none,chunked:4,ce-ring,ce-ring:2,ce-ring:4
#   RUN ridgeline run ... --batch 4 --sequence-parallel --overlap none,chunked:4,ce-ring,ce-ring:2
#
# On the host, from this directory:
#   python3 ../h200x2-symm-2026-11-24/hidden_share.py L/ab/*.log M/ab/*.log O/ab/*.log   (hidden_share.txt)
#   python3 ../h200x2-symm-2026-11-24/hidden_share.py --clocks L/ab/*b4*.log M/ab/*b4*.log
#   python3 reduction_ops.py > reduction_ops.txt
#   python3 ../h200x2-symm-2026-11-24/hidden_share.py --clocks P/ab/*b4*.log Q/ab/*b4*.log > clocks_power_PQ.md
#   python3 ring_tail.py > ring_tail.txt   (jobs Q, R, S, T)
#   python3 ../h200x2-symm-2026-11-24/hidden_share.py --clocks R/ab/*b4*.log S/ab/*b4*.log T/ab/*b4*.log > clocks_power_RST.md
