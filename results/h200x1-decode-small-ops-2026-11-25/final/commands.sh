#!/usr/bin/env bash
# The final build (norms' parameters before the wait, 32-bit row division, SwiGLU in fast math):
# the single-GPU tests, then the decode
# section with cuBLASLt's heuristic and the skinny kernels.
# Usage: commands.sh OUT bundle.tar.xz
export NCCL_NVLS_ENABLE=0 GPU_CHECK_STEP_TIMEOUT=200 DECODE_GEMM_ALGOS="heuristic skinny"
GPU_CHECK_TESTS="test_decode_cuda test_attention_cuda test_cuda_backend test_train_cuda" \
  scripts/gpu-check.sh "$1" --bundle "$2" --only tests,decode
