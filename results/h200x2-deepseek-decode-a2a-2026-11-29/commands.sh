#!/usr/bin/env bash
# How this directory was made. On 2 x H200 (NV18), from the repository root after
# scripts/build.sh build-gpu -DCMAKE_CUDA_ARCHITECTURES=90 at commit 745b64a, NCCL_NVLS_ENABLE=0 in
# every process: the DeepSeek-V3-shaped decode step at EP 2, NCCL's and the project's IPC
# all-to-all taking turns three times, then EP 2 x TP 2 once with each.
set -u
export NCCL_NVLS_ENABLE=0
R=build-gpu/src/ridgeline
mp="mpirun -np 2 --bind-to none -x NCCL_NVLS_ENABLE"
M="--config models/deepseek-v3.toml --layers 1 --ep 2 --phase decode --context 4096 --warmup 5 --iters 50 --check on --roofs none"
for turn in 1 2 3; do
  for a2a in nccl ipc; do
    # shellcheck disable=SC2086
    $mp $R run $M --tp 1 --dp 2 --batch 128 --a2a $a2a --out tp1_${a2a}_t$turn.h5
  done
done
for a2a in nccl ipc; do
  # shellcheck disable=SC2086
  $mp $R run $M --tp 2 --batch 256 --a2a $a2a --out tp2_${a2a}.h5
done
