#!/usr/bin/env bash
# On a node of 2 x H200, from the top of the repository (gpu-check builds natively, then runs
# scripts/atlas.sh over NVLink with NCCL_NVLS_ENABLE=0): the decode steps of llama3-8b and
# llama3-70b at TP 2 with NCCL's all-reduce, then with the custom one where the node's table
# says it is faster (--allreduce auto), 3 repeats per point, points taking turns.
ATLAS_TRANSPORTS=nvlink ATLAS_MODELS=llama3-8b ATLAS_PHASES=decode \
  ATLAS_CUSTOM_AR="llama3-8b llama3-70b" ATLAS_REPRO=0 ATLAS_STAGES=measure \
  scripts/gpu-check.sh OUT --only atlas
build-gpu/src/ridgeline env >env.txt
# Then on any machine: this page's table.
python3 scripts/atlas_report.py PAGE OUT/atlas     # -> PAGE/custom_ar.md
