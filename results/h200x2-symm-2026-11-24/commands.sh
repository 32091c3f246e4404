#!/usr/bin/env bash
# The two jobs that made this directory, on one machine of the nvidia-h200-x2 kind (2 x H200,
# NVLink), NCCL_NVLS_ENABLE=0 in every process, from a bundle of the build of commit e0c73c9
# (ridgeline and the GPU test binaries; the files record 040aff267438-dirty: the same code for
# everything measured here, built before the memory-check change was committed) and the
# gpu-check.sh of commit 15020d5 (its knobs GPU_CHECK_TURNS, CE_RING_POLICIES, SYMM_MAX_BYTES).
# Job 1 (the top level of this directory):
export NCCL_NVLS_ENABLE=0 GPU_CHECK_STEP_TIMEOUT=150 GPU_CHECK_TURNS=1 SYMM_MAX_BYTES=256M
GPU_CHECK_TESTS="test_nccl_symmetric_cuda test_peer_exchange_cuda test_ipc_allreduce_cuda test_nccl_cuda test_collectives_cuda" \
  scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only tests,ce_ring
# Job 2 (turn2/), on the same machine some minutes later:
GPU_CHECK_TURNS=2 SYMM_MAX_BYTES=16M scripts/gpu-check.sh OUT --bundle bundle.tar.xz --only ce_ring
# ce_ring, per turn, for B in 1 4 and with and without --sequence-parallel:
#   mpirun -np 2 ridgeline run --config models/gpt-h8192.toml --seq 4096 --batch B --tp 2 \
#     [--sequence-parallel] --warmup 3 --iters 15 \
#     --overlap none,async,chunked:2,chunked:4,ce-ring,symm:none,symm:chunked:2,symm:chunked:4
# and in the first turn, per CTA policy P in efficiency zero:
#   ... --nccl-cta-policy P --overlap none,chunked:4,symm:none,symm:chunked:2,symm:chunked:4
# then per B: torchrun --nproc-per-node 2 scripts/reference/torch_async_tp.py --hidden 8192 \
#   --heads 64 --ffn 32768 --seq 4096 --batch B --json torch_async_tp_bB.json
#   python3 scripts/async_tp_table.py h5/ce_ring_prefill_bB_spon_TURN.h5 torch_async_tp_bB.json
# and per CTA policy (default, efficiency, zero): mpirun -np 2 ridgeline collectives \
#   --collectives all_gather,reduce_scatter,all_reduce --buffers ordinary,symmetric \
#   --nccl-cta-policy P --min-bytes 1M --max-bytes 256M (16M in job 2) --warmup 5 --iters 20
# hidden_share.txt and clocks_power.md: python3 hidden_share.py [--clocks] logs/ce_ring_prefill_*.log \
#   turn2/logs/ce_ring_prefill_*.log logs/symm_*.log
