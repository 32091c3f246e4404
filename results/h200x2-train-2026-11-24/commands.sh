#!/usr/bin/env bash
# The jobs that made this directory, on one machine of the nvidia-h200-x2 kind (2 x H200,
# NVLink), NCCL_NVLS_ENABLE=0 in every process, from a bundle of the build of commit e0c73c9
# (the files record 040aff267438-dirty: the same code for everything here) and the gpu-check.sh
# of commit 15020d5.
export NCCL_NVLS_ENABLE=0 GPU_CHECK_STEP_TIMEOUT=120
GPU_CHECK_TURNS=1 TRAIN_MICROBATCHES="4 8" scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only pipeline,train
# (its dp runs were refused: the section passed --layers twice; fixed in 15020d5 and run again
# in a later job on the same machine, logs/dp2_*, summary-dp.txt:)
scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only dp,decode_tp2
# pipeline: per schedule, the small model (models/tiny.toml, 4 layers, s 128, 4 microbatches,
#   naive attention) at PP2, train and prefill, --check on; then gpt-h8192 (4 layers, s 1024,
#   batch 4, m 4) train with gpipe and zb-h1 under --timeout 35.
# train: ridgeline run --config models/gpt-h8192.toml --layers 1 --phase train --seq 4096
#   --batch 1 --tp T [--attention cudnn] --warmup 3 --iters 10 beside
#   torchrun scripts/reference/torch_tp_layer.py --phase train --hidden 8192 --heads 64
#   --seq 4096 --batch 1 --warmup 3 --iters 10, for T in 1 2; llama3-70b's layer with cudnn;
#   TP2 with --sequence-parallel --overlap none,async; and PP2 (4 layers, s 4096, batch = m,
#   --microbatches m, --schedule gpipe|1f1b|interleaved:2|zb-h1, cudnn, --check off,
#   --warmup 2 --iters 5) for m in 4 8.
# dp: ridgeline run --config models/gpt-h8192.toml --layers 2 --phase train --seq 4096 --batch 2
#   --microbatches 1 --dp 2 --dp-overlap on|off --attention cudnn --warmup 3 --iters 10
# pictures/: python3 -m ridgeline_analysis schedule h5/pipeline_S_m8.h5 -o pictures/S_m8.png
