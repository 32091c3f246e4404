#!/usr/bin/env bash
# Jobs 5 and 6, on one H200 each, from a bundle of the kept build (ridgeline and the GPU test
# binaries test_decode_cuda, test_attention_cuda, test_cuda_backend, test_train_cuda).
# Usage: commands.sh OUT bundle.tar.xz
export NCCL_NVLS_ENABLE=0 GPU_CHECK_STEP_TIMEOUT=200
# Job 5: logs/gpu-tests.log. (Its decode section was given the GEMM choices comma-separated,
# which gpu-check does not take; every point failed at once and nothing of it was kept.)
GPU_CHECK_TESTS="test_decode_cuda test_attention_cuda test_cuda_backend test_train_cuda" \
  scripts/gpu-check.sh "$1/job5" --bundle "$2" --only tests
# Job 6: everything else here. The decode section: a roofs file, then per model and GEMM choice
#   ridgeline sweep --roofs h5/roofs_decode.h5 --config models/MODEL.toml --layers 1 \
#     --phase decode --graphs --gemm-algo ALGO --attention fused --tp 1 \
#     --batch 1,16,64,256 --context 1024,8192,32768 --warmup 5 --iters 20
#   python3 scripts/decode_roof_table.py --markdown decode_roof_table.md h5/decode_sweep_*.h5
#   and the growing cache (llama3-8b, batch 16, context 1024 + 256 steps, --graphs).
DECODE_GEMM_ALGOS="heuristic skinny" scripts/gpu-check.sh "$1/job6" --bundle "$2" --only decode
