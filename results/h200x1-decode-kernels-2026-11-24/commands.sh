#!/usr/bin/env bash
# The job that made this directory, on one H200 (NCCL_NVLS_ENABLE=0 in every process), from a
# bundle of the build of commit e0c73c9 (the files record 040aff267438-dirty: the decode path is
# the same code; scripts/bundle.sh build bundle.tar.xz), with the decode_kernels section of
# commit 8f27413. logs/decode_kernels_*.txt were written again afterwards from the same CSVs
# with that commit's scripts/ncu_step_kernels.py (the job's copy printed anonymous-namespace
# kernel names badly; the times are the same):
#   python3 scripts/ncu_step_kernels.py logs/decode_kernels_llama3-8b_b1_ncu.csv --step-us 138
#   python3 scripts/ncu_step_kernels.py logs/decode_kernels_llama3-8b_b16_ncu.csv --step-us 161
export NCCL_NVLS_ENABLE=0 GPU_CHECK_STEP_TIMEOUT=240
scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only decode_kernels
# decode_kernels, for B:ALGO in 1:skinny and 16:heuristic:
#   ridgeline run --config models/llama3-8b.toml --layers 1 --phase decode --batch B \
#     --context 1024 --graphs --gemm-algo ALGO --roofs none --warmup 5 --iters 50
#   ncu --clock-control none --cache-control none --graph-profiling node \
#     --metrics gpu__time_duration.sum --csv --log-file logs/..._ncu.csv \
#     ridgeline run (the same arguments) --warmup 2 --iters 3
#   python3 scripts/ncu_step_kernels.py logs/..._ncu.csv --step-us P50
