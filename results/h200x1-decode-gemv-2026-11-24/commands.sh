#!/usr/bin/env bash
# The two jobs that made this directory, each on one H200 (NCCL_NVLS_ENABLE=0 in every process),
# from a bundle of the build of commit 03902ad96edf (scripts/bundle.sh build bundle.tar.xz).
export NCCL_NVLS_ENABLE=0 GPU_CHECK_STEP_TIMEOUT=240
# sweep/: the CUDA backend's GPU tests, a roofs file, the decode sweeps, the growing cache.
GPU_CHECK_TESTS=test_cuda_backend scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only tests,decode
#   per model (gpt-h8192, llama3-8b, llama3-70b) and per --gemm-algo (heuristic, search, skinny):
#   ridgeline sweep --roofs h5/roofs_decode.h5 --config models/MODEL.toml --layers 1 \
#     --phase decode --graphs --gemm-algo ALGO --attention fused --tp 1 \
#     --batch 1,16,64,256 --context 1024,8192,32768 --warmup 5 --iters 20
#   python3 scripts/decode_roof_table.py --markdown decode_roof_table.md h5/decode_sweep_*.h5
# ab/: its own roofs file, then two turns of, per model (llama3-8b, llama3-70b) and per variant
# (heuristic, search, skinny, skinny with RIDGELINE_SKINNY_PDL=0):
scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only decode_gemm
#   ridgeline sweep ... --gemm-algo ALGO --tp 1 --batch 1,16 --context 1024 --warmup 5 --iters 50
# and llama3-8b eager at batch 1, context 1024 with each --gemm-algo (per-op times):
#   ridgeline run --config models/llama3-8b.toml --layers 1 --phase decode --batch 1 \
#     --context 1024 --gemm-algo ALGO --warmup 5 --iters 50
