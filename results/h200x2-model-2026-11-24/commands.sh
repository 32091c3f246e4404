#!/usr/bin/env bash
# Made on the host from files already in results/ (no GPU): ridgeline model --validate of the
# three TP2 decode sweeps of results/h200x2-decode-2026-11-24, with the roofs that the allreduce
# job on the same two-GPU machine measured (the quick plan of `run`, stored in its run file:
# GEMM, memory, launch and the NCCL collectives over both GPUs). The sweeps' own roofs file was
# measured on one GPU and has no interconnect row, so it cannot time the all-reduces. Build of
# the commit that adds this directory (host build: scripts/build.sh build).
set -euo pipefail
roofs=results/h200x2-decode-2026-11-24/allreduce/h5/allreduce_llama8b_decode_nccl_1.h5
for m in gpt-h8192 llama3-8b llama3-70b; do
  build/src/ridgeline model --validate results/h200x2-decode-2026-11-24/h5/decode_tp2_${m}_heuristic.h5 \
    --roofs "$roofs" --markdown results/h200x2-model-2026-11-24/logs/validate_decode_tp2_$m.md \
    >results/h200x2-model-2026-11-24/logs/validate_decode_tp2_$m.txt 2>&1
done
# The train runs of results/h200x2-train-2026-11-24 (one gpt-h8192 or llama3-70b layer, s 4096,
# TP2, eager), each from its own roofs, then calibrated on the one-GPU train run of
# results/h200x1-train-2026-11-24 (another machine of the same kind).
for f in train_tp2 train_llama3_70b_tp2 train_tp2_sp; do
  build/src/ridgeline model --validate results/h200x2-train-2026-11-24/h5/$f.h5 \
    >results/h200x2-model-2026-11-24/logs/validate_$f.txt 2>&1
  build/src/ridgeline model --validate results/h200x2-train-2026-11-24/h5/$f.h5 \
    --calibrate results/h200x1-train-2026-11-24/h5/train_tp1.h5 \
    >results/h200x2-model-2026-11-24/logs/validate_${f}_calibrated_tp1.txt 2>&1
done
