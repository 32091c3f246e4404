#!/usr/bin/env bash
# The three jobs of this directory, one after the other on one node of 2 x H200 (the same node),
# NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 in every process,
# from a bundle of the build of commit 3c15b31 made with scripts/bundle.sh.
# RUN = orterun --bind-to none --map-by slot -np 2 (the bundle's Open MPI).
#
# Job U: the GPU tests of the ring and the CUDA backend, then one checked run of every ring
# strategy at b1 with and without sequence parallelism (files not kept, logs in U/):
GPU_CHECK_TESTS="test_cuda_backend test_peer_exchange_cuda" scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only tests
for sp in on off; do
  RUN ridgeline run --config models/gpt-h8192.toml --seq 4096 --batch 1 --tp 2 [--sequence-parallel] \
    --warmup 2 --iters 5 --overlap none,ce-ring,ce-ring:2,ce-ring:4 --timeout 60 --out U/ring_b1_sp$sp.h5
done
#
# Job V: the ring at b4, two turns, each with and without sequence parallelism; then the TP2
# decode table with push-ll and the skinny GEMMs:
for turn in 1 2; do for sp in on off; do
  RUN ridgeline run --config models/gpt-h8192.toml --seq 4096 --batch 4 --tp 2 [--sequence-parallel] \
    --warmup 3 --iters 15 --overlap none,chunked:4,ce-ring,ce-ring:2 --timeout 50 --out V/ab/ring_b4_sp${sp}_$turn.h5
done; done
DECODE_TP2_ALGO=skinny DECODE_TP2_ALLREDUCE=push-ll scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only decode_tp2
#
# Job W: the ring at b1 with and without sequence parallelism (as job V, --batch 1, one run
# each), then PyTorch's async-TP pairs at b1:
torchrun --standalone --nproc-per-node 2 scripts/reference/torch_async_tp.py --hidden 8192 \
  --heads 64 --ffn 32768 --seq 4096 --batch 1 --json W/ab/torch_async_tp_b1.json
python3 scripts/async_tp_table.py W/ab/ring_b1_spon.h5 W/ab/torch_async_tp_b1.json --markdown W/ab/async_tp_b1.md
#
# On the host, from this directory:
#   python3 ../h200x2-symm-2026-11-24/hidden_share.py V/ab/*.log W/ab/*.log > hidden_share.txt
#   python3 ../h200x2-symm-2026-11-24/hidden_share.py --clocks V/ab/*.log W/ab/*.log > clocks_power.md
#   python3 ../h100x2-2026-11-26/ring_tail.py V/ab/*.h5 W/ab/*.h5 > ring_tail.txt
