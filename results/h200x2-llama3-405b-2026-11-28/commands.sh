#!/usr/bin/env bash
# On a node of 2 x H200, from the top of the repository (gpu-check builds natively, then runs
# scripts/atlas.sh, NCCL_NVLS_ENABLE=0 in every process): one llama3-405b layer, decode (CUDA
# graphs), prefill and train at TP 1 and 2 over NVLink, then the host path; 3 repeats per point,
# points taking turns; decode also with the custom all-reduce where it is faster. The job's
# 540 s limit stopped the host path's prefill sweep (its file says complete = 0; left out) before
# its train sweep.
ATLAS_TRANSPORTS="nvlink host" ATLAS_MODELS=llama3-405b ATLAS_CUSTOM_AR=llama3-405b \
  ATLAS_REPRO=0 ATLAS_STAGES=measure ATLAS_DEADLINE_S=400 scripts/gpu-check.sh OUT --only atlas
build-gpu/src/ridgeline env >env.txt
# Then on any machine: the model's error and its predictions past the node, and the page.
ATLAS_RANKS=2 ATLAS_MODELS=llama3-405b ATLAS_STAGES=predict scripts/atlas.sh OUT/atlas nvlink host
python3 scripts/atlas_report.py PAGE OUT/atlas
