#!/usr/bin/env bash
# Job 6, on one H200, from a bundle of the build of 2ddc44a (ridgeline alone).
# Usage: commands.sh OUT bundle.tar.xz
export NCCL_NVLS_ENABLE=0 GPU_CHECK_STEP_TIMEOUT=200
# llama3-8b's decode step (one layer, context 1024, --graphs) at batch 1 (skinny GEMMs) and 16
# (cuBLASLt's heuristic): the step's p50, then every kernel of the captured step timed alone by
# Nsight Compute (scripts/ncu_step_kernels.py).
scripts/gpu-check.sh "$1" --bundle "$2" --only decode_kernels
