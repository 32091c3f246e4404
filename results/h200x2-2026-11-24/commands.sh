#!/usr/bin/env bash
# The two jobs of this directory, on a 2 x H200 node, from a bundle of the build of commit
# a50749dfc009 (scripts/bundle.sh; the test binaries these jobs do not run left out).
export NCCL_NVLS_ENABLE=0
# allreduce/
GPU_CHECK_STEP_TIMEOUT=150 \
  GPU_CHECK_TESTS="test_nccl_cuda test_collectives_cuda test_ipc_allreduce_cuda test_decode_cuda" \
  scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only tests,allreduce
# train/ (the job was stopped at 575 s)
GPU_CHECK_STEP_TIMEOUT=120 scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only train
# pipeline/ (binary of commit 63d3211's tree; the section as of commit 9e040b6)
scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only pipeline
