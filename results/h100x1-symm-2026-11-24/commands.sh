#!/usr/bin/env bash
# The job behind this page: one call on a one-GPU machine, with the binaries of a CUDA build of
# the symmetric-memory code (scripts/bundle.sh; ridgeline and the GPU tests named below).
export NCCL_NVLS_ENABLE=0 GPU_CHECK_STEP_TIMEOUT=200
GPU_CHECK_TESTS="test_nccl_symmetric_cuda test_nccl_cuda test_peer_exchange_cuda test_collectives_cuda" \
  scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only tests,ce_ring
# The GPU tests run under mpirun -np 2 (the two ranks share the GPU). Section ce_ring on one GPU
# runs the two ce-ring correctness runs of results/h100x1-ce-ring-2026-11-24, then, per policy:
#   mpirun -np 1 ridgeline collectives --collectives all_gather,reduce_scatter,all_reduce \
#     --buffers ordinary,symmetric --nccl-cta-policy POLICY --min-bytes 1K --max-bytes 64M \
#     --warmup 2 --iters 10      (POLICY = default, efficiency, zero)
