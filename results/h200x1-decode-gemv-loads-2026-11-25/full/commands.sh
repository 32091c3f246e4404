#!/usr/bin/env bash
# Job 4, on one H200, from a bundle of the build of 2bd5479 (ridgeline and the GPU test binaries
# test_decode_cuda, test_attention_cuda, test_cuda_backend, test_train_cuda).
# Usage: commands.sh OUT bundle.tar.xz
export NCCL_NVLS_ENABLE=0 GPU_CHECK_STEP_TIMEOUT=200
# The tests, then the decode section: a roofs file, then per model and GEMM choice (heuristic,
# search, skinny)
#   ridgeline sweep --roofs h5/roofs_decode.h5 --config models/MODEL.toml --layers 1 \
#     --phase decode --graphs --gemm-algo ALGO --attention fused --tp 1 \
#     --batch 1,16,64,256 --context 1024,8192,32768 --warmup 5 --iters 20
#   python3 scripts/decode_roof_table.py --markdown decode_roof_table.md h5/decode_sweep_*.h5
#   and the growing cache (llama3-8b, batch 16, context 1024 + 256 steps, --graphs).
GPU_CHECK_TESTS="test_decode_cuda test_attention_cuda test_cuda_backend test_train_cuda" \
  scripts/gpu-check.sh "$1" --bundle "$2" --only tests,decode
