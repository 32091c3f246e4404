#!/usr/bin/env bash
# The first of the three jobs that made this directory, on one H200 (NCCL_NVLS_ENABLE=0 in every process), from a
# bundle of the build of commit f7e3130 (the files record b84371248b45-dirty: the same code,
# built before it was committed; scripts/bundle.sh build bundle.tar.xz).
export NCCL_NVLS_ENABLE=0 GPU_CHECK_STEP_TIMEOUT=200
GPU_CHECK_TESTS="test_decode_cuda test_cuda_backend" \
  scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only tests,decode_gemm,decode
# decode_gemm: a roofs file, then two turns of, per model (llama3-8b, llama3-70b, gpt-h8192) and
# per variant, RIDGELINE_PDL=chain|gemm|0 (the variant's suffix: none = chain, -gemm, -nopdl):
#   ridgeline sweep --roofs h5/roofs_decode.h5 --config models/MODEL.toml --layers 1 \
#     --phase decode --graphs --gemm-algo ALGO --tp 1 --batch 1,16 --context 1024 \
#     --warmup 5 --iters 50
#   and llama3-8b eager at batch 1, context 1024 with each --gemm-algo (per-op times):
#   ridgeline run --config models/llama3-8b.toml --layers 1 --phase decode --batch 1 \
#     --context 1024 --gemm-algo ALGO --warmup 5 --iters 50
# decode: a roofs file of its own, then per model and per --gemm-algo (heuristic, search, skinny):
#   ridgeline sweep --roofs h5/roofs_decode.h5 --config models/MODEL.toml --layers 1 \
#     --phase decode --graphs --gemm-algo ALGO --attention fused --tp 1 \
#     --batch 1,16,64,256 --context 1024,8192,32768 --warmup 5 --iters 20
#   python3 scripts/decode_roof_table.py --markdown decode_roof_table.md h5/decode_sweep_*.h5
#   and the growing cache: ridgeline run --config models/llama3-8b.toml --layers 1 \
#     --phase decode --graphs --batch 16 --context 1024 --decode-steps 256 --warmup 5
# long-context-ab.txt, a second job from the same bundle: two turns of, per point (gpt-h8192
# batch 64, llama3-70b batch 256, llama3-8b batch 256, llama3-70b batch 1) and per
# RIDGELINE_PDL=chain|gemm|0:
#   ridgeline run --config models/MODEL.toml --layers 1 --phase decode --graphs \
#     --gemm-algo heuristic --tp 1 --batch B --context 32768 --warmup 5 --iters 30
# printing the step p50 and the NVML line of the step loop.
# logs/gpu-tests-all.log, a third job from a bundle of the GPU test binaries of the same build:
#   GPU_CHECK_STEP_TIMEOUT=300 scripts/gpu-check.sh OUT --bundle tests.tar.xz --only tests
