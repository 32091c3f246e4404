#!/usr/bin/env bash
# The job behind this page: one call on a one-GPU machine, with the binaries of a CUDA build
# of this commit bundled (scripts/bundle.sh). Two ranks share the GPU.
export NCCL_NVLS_ENABLE=0 GPU_CHECK_STEP_TIMEOUT=200
GPU_CHECK_TESTS="test_peer_exchange_cuda test_ipc_allreduce_cuda" \
  scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only tests,ce_ring
# section ce_ring on one GPU runs, for each phase:
#   mpirun -np 2 ridgeline run --config models/llama3-8b.toml --layers 2 --tp 2 \
#     --allow-shared-gpu --check on --allreduce oneshot --overlap none,ce-ring \
#     --warmup 1 --iters 3 --roofs none --phase prefill --seq 256 --batch 2
#   ... --phase decode --batch 4 --context 128
