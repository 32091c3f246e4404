#!/usr/bin/env bash
# The jobs of this directory. Binaries from a bundle (scripts/bundle.sh build-gpu bundle.tar.xz)
# of a Release build for sm_90 made on Debian 12 (GCC 12.2, nvcc 13.0.88, Open MPI 4.1.4,
# HDF5 1.10.8 parallel); the nodes' own CUDA 13.0, cuBLASLt 13.1.0, NCCL 2.28.3. NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 in every process.
#   a/, b/: 4 x H100 80GB HBM3 (NV18 between every pair), one node, jobs A then B minutes apart;
#           binary of commit 29f8a14 with the launch bound of 828f24f and the test fix of 36e8c0b
#           (the RMS norm then folded by default: `epilogues` compares it with rotary,act).
#   c/:     2 x H100 (the two-GPU tests), then 1 x H100 (test_cuda_backend, test_decode_cuda);
#           binary of 828f24f (with 1958aef).
#   d/:     2 x H100, binary of 828f24f.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# Job A (4 GPUs): tests, TP4 layers beside PyTorch, 4-rank collectives, roofs, NVLink sweeps at
# TP 1/2/4, the decode epilogue A/B on one GPU.
GPU_CHECK_STEP_TIMEOUT=90 LAYER_TPS=4 COLLECTIVE_NPS=4 ROOFS_TURNS=1 SWEEP_TRANSPORTS=nvlink \
  GPU_CHECK_TESTS="test_cuda_backend test_decode_cuda test_nccl_symmetric_cuda" \
  EPILOGUE_VARIANTS=rotary,act \
  scripts/gpu-check.sh a --bundle bundle.tar.xz --only tests,layers,collectives,roofs,sweeps,epilogues

# Job B (4 GPUs): overlap strategies at TP4 beside PyTorch's async TP, pipeline schedules at PP4
# and TP2 x PP2, host-path sweeps of gpt-h8192 at TP 1/2/4 (job A's roofs files copied into
# b/h5 first). The job's 530 s bound ended it after the host sweeps; decode_tp2 and allreduce did
# not run.
GPU_CHECK_STEP_TIMEOUT=120 CE_RING_TP=4 CE_RING_POLICIES=zero SYMM_MAX_BYTES=256M \
  GPU_CHECK_TURNS="1 2" TRAIN_MICROBATCHES_4=8 SWEEP_TRANSPORTS=host SWEEP_MODELS=gpt-h8192 \
  ROOFS_TURNS= scripts/gpu-check.sh b --bundle bundle.tar.xz \
  --only ce_ring,schedules4,sweeps,decode_tp2,allreduce

# Job C (2 GPUs, then 1): the GPU tests changed by this commit's parents.
GPU_CHECK_STEP_TIMEOUT=90 \
  GPU_CHECK_TESTS="test_nccl_symmetric_cuda test_peer_exchange_cuda test_decode_cuda test_cuda_backend" \
  scripts/gpu-check.sh c --bundle bundle.tar.xz --only tests
GPU_CHECK_TESTS="test_cuda_backend test_decode_cuda" scripts/gpu-check.sh c1 --bundle bundle.tar.xz --only tests

# Job D (2 GPUs): every pipeline schedule at PP2, M = 8 and 16.
GPU_CHECK_STEP_TIMEOUT=60 TRAIN_MICROBATCHES="8 16" scripts/gpu-check.sh d --bundle bundle.tar.xz --only schedules

# On the host, from the files above (build of the commit that adds this directory):
for f in a/h5/sweep_*.h5 b/h5/sweep_*.h5; do
  n=$(basename "$f" .h5)
  ridgeline model --validate "$f" --markdown "validate/$n.md" >"validate/$n.txt"
  ridgeline model --validate "$f" --calibrate a/h5/attributed_prefill_tp2.h5 \
    --calibrate a/h5/attributed_decode_tp2.h5 --markdown "validate/${n}_calibrated.md" \
    >"validate/${n}_calibrated.txt"
done
for f in b/h5/pipeline_*_m8.h5 d/h5/pipeline_*_m16.h5; do
  python3 -m ridgeline_analysis schedule "$f" -o "pictures/$(basename "$f" .h5).png"
done
python3 ../h200x2-symm-2026-11-24/hidden_share.py b/logs/ce_ring_tp4_*.log b/logs/symm_tp4_*.log >hidden_share.txt
python3 ../h200x2-symm-2026-11-24/hidden_share.py --clocks b/logs/ce_ring_tp4_prefill_*_1.log >clocks_power.md
