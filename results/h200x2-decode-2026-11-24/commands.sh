#!/usr/bin/env bash
# The jobs that made this directory, on one machine of the nvidia-h200-x2 kind (2 x H200,
# NVLink), NCCL_NVLS_ENABLE=0 in every process, from a bundle of the build of commit e0c73c9
# (the files record 040aff267438-dirty: the same code for everything here) and the gpu-check.sh
# of commit 15020d5.
export NCCL_NVLS_ENABLE=0 GPU_CHECK_STEP_TIMEOUT=120
# allreduce/ (one turn):
GPU_CHECK_TURNS=1 scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only allreduce
#   mpirun -np 2 ridgeline collectives --collectives all_reduce --allreduce nccl,oneshot,twoshot \
#     --min-bytes 8K --max-bytes 4M --warmup 5 --iters 20
#   torchrun --nproc-per-node 2 scripts/reference/torch_collectives.py \
#     --collectives all_reduce,all_reduce_symm_oneshot --sizes 8K,...,4M --warmup 5 --iters 20
#   and, per --allreduce nccl|oneshot|twoshot|auto (auto with the table above), the TP2 decode
#   step of gpt-h8192 (batch 16) and llama3-8b (batch 1), context 1024, --graphs, 100 iterations
# top level (heuristic GEMMs), in the job that also ran the dp section:
GPU_CHECK_SWEEP_TIMEOUT=170 scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only dp,decode_tp2
# skinny/ (the skinny GEMMs wherever they apply), the next job on the same machine:
DECODE_TP2_ALGO=skinny GPU_CHECK_SWEEP_TIMEOUT=170 scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only decode_tp2
# decode_tp2, per model: ridgeline roofs --dtypes bf16 --memory-max-bytes 4G (one GPU), then
#   mpirun -np 2 ridgeline sweep --roofs h5/roofs_decode.h5 --config models/MODEL.toml --layers 1 \
#     --phase decode --graphs --gemm-algo ALGO --tp 2 --batch 1,16,64,256 \
#     --context 1024,8192,32768 --warmup 5 --iters 20
#   python3 scripts/decode_roof_table.py --target 0.80 --markdown decode_tp2_table.md h5/decode_tp2_*.h5
