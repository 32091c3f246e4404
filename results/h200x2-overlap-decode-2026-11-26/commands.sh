#!/usr/bin/env bash
# The jobs of this directory (X, Y, Z, AA; AB at the end), each on a node of 2 x H200 of one kind,
# NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 in every process,
# from one bundle (scripts/bundle.sh) of the build of commit 5822968's C++ code (the files record
# ff3bc5edccb6-dirty: built before those commits were made, from the same tree).
# RUN = orterun --bind-to none --map-by slot -np 2 (the bundle's Open MPI).
#
# Job X: the GPU tests of the CUDA backend and of the decode steps; the ring at b4 with and
# without sequence parallelism, two turns, the strategies taking turns inside each run;
# PyTorch's async-TP pairs at b4:
GPU_CHECK_TESTS="test_cuda_backend test_decode_cuda" scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only tests
for turn in 1 2; do for sp in on off; do
  RUN ridgeline run --config models/gpt-h8192.toml --seq 4096 --batch 4 --tp 2 [--sequence-parallel] \
    --warmup 3 --iters 15 --overlap none,chunked:4,ce-ring,ce-ring:2 --timeout 50 --out X/ab/ring_b4_sp${sp}_$turn.h5
done; done
torchrun --standalone --nproc-per-node 2 scripts/reference/torch_async_tp.py --hidden 8192 \
  --heads 64 --ffn 32768 --seq 4096 --batch 4 --json X/ab/torch_async_tp_b4.json
#
# Job Y: the TP2 decode table with push-ll under skinny, then under cuBLASLt's heuristic, the
# TP1 decode table under both, the growing cache; the custom all-reduce beside NCCL and
# PyTorch's symmetric-memory one-shot on 2 GPUs, batch and graph timing, two turns:
DECODE_TP2_ALGO=skinny DECODE_TP2_ALLREDUCE=push-ll scripts/gpu-check.sh Y/decode --bundle bundle.tar.xz --only decode_tp2
#   (its table and files then moved to decode_tp2_table_skinny.md and h5/skinny/)
DECODE_TP2_ALGO=heuristic DECODE_TP2_ALLREDUCE=push-ll DECODE_GEMM_ALGOS="heuristic skinny" \
  scripts/gpu-check.sh Y/decode --bundle bundle.tar.xz --only decode_tp2,decode
COLLECTIVE_NPS=2 scripts/gpu-check.sh Y/ar --bundle bundle.tar.xz --only custom_allreduce
#
# Job Z: the TP2 sweeps of llama3-70b and llama3-8b with push-ll under skinny and under search,
# taking turns, two turns; llama3-8b's TP1 sweeps under skinny and search:
for turn in 1 2; do for algo in skinny search; do
  DECODE_MODELS="llama3-70b llama3-8b" DECODE_TP2_ALGO=$algo DECODE_TP2_ALLREDUCE=push-ll \
    scripts/gpu-check.sh Z/tp2_${algo}_$turn --bundle bundle.tar.xz --only decode_tp2
done; done
DECODE_MODELS=llama3-8b DECODE_GEMM_ALGOS="skinny search" scripts/gpu-check.sh Z/tp1 --bundle bundle.tar.xz --only decode
#
# Job AA: the ring at b1 as job X's at b4 (two turns), and PyTorch's async-TP pairs at b1:
torchrun --standalone --nproc-per-node 2 scripts/reference/torch_async_tp.py --hidden 8192 \
  --heads 64 --ffn 32768 --seq 4096 --batch 1 --json AA/ab/torch_async_tp_b1.json
#
# On the host, from this directory:
#   python3 ../h200x2-symm-2026-11-24/hidden_share.py X/ab/*.log AA/ab/*.log > hidden_share.txt
#   python3 ../h200x2-symm-2026-11-24/hidden_share.py --clocks X/ab/*.log AA/ab/*.log > clocks_power.md
#   python3 ../h100x2-2026-11-26/ring_tail.py X/ab/*.h5 AA/ab/*.h5 > ring_tail.txt
#   python3 ../../scripts/async_tp_table.py X/ab/ring_b4_spon_1.h5 X/ab/torch_async_tp_b4.json --markdown X/ab/async_tp_b4.md
#   python3 ../../scripts/async_tp_table.py X/ab/ring_b4_spon_2.h5 X/ab/torch_async_tp_b4.json --markdown X/ab/async_tp_b4_run2.md
#   python3 ../../scripts/async_tp_table.py AA/ab/ring_b1_spon_1.h5 AA/ab/torch_async_tp_b1.json --markdown AA/ab/async_tp_b1.md
#   python3 ../../scripts/async_tp_table.py AA/ab/ring_b1_spon_2.h5 AA/ab/torch_async_tp_b1.json --markdown AA/ab/async_tp_b1_run2.md
#   python3 ../../scripts/decode_roof_table.py --target 0.80 --markdown Z/tp2_*/decode_tp2_table.md Z/tp2_*/h5/decode_tp2_*.h5
#
# Job AB, on a later node, from a bundle of commit 02004d7: every GPU test binary (the MPI ones
# on 2 ranks):
scripts/gpu-check.sh AB --bundle bundle.tar.xz --only tests
