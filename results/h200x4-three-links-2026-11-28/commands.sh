#!/usr/bin/env bash
# On a node of 4 x H200, from the top of the repository (gpu-check builds natively, then runs
# scripts/atlas.sh, NCCL_NVLS_ENABLE=0 in every process): llama3-8b's decode and prefill sweeps
# at TP 1, 2 and 4 over three transports, 3 repeats per point, points taking turns.
ATLAS_TRANSPORTS="nvlink host net" ATLAS_MODELS=llama3-8b ATLAS_PHASES="decode prefill" \
  ATLAS_CUSTOM_AR="" ATLAS_REPRO=0 ATLAS_STAGES=measure ATLAS_DEADLINE_S=390 \
  scripts/gpu-check.sh OUT --only atlas
build-gpu/src/ridgeline env >env.txt
# Then on any machine: the model's error and its predictions past the node (NVLink), and the
# page's tables and pictures.
ATLAS_RANKS=4 ATLAS_MODELS=llama3-8b ATLAS_PHASES="decode prefill" ATLAS_STAGES=predict \
  scripts/atlas.sh OUT/atlas nvlink host net
python3 scripts/atlas_report.py PAGE OUT/atlas
