#!/usr/bin/env bash
# How this page was produced. On the 4 x H200 node, from the top of the repository (gpu-check
# builds natively, then runs scripts/atlas.sh; one job would be `scripts/gpu-check.sh OUT --only
# atlas` for both transports; this page's two jobs split them to fit a 10-minute job limit):
ATLAS_TRANSPORTS=nvlink ATLAS_REPRO=0 ATLAS_STAGES=measure ATLAS_DEADLINE_S=420 \
  scripts/gpu-check.sh OUT_NVLINK --only atlas
ATLAS_TRANSPORTS=host ATLAS_REPRO=1 ATLAS_STAGES=measure ATLAS_DEADLINE_S=430 \
  scripts/gpu-check.sh OUT_HOST --only atlas
# Then on any machine (no GPU needed): the model's error on every measured point and its
# predictions past the node, from the files' own roofs, and this page's tables and pictures.
ATLAS_RANKS=4 ATLAS_STAGES=predict scripts/atlas.sh OUT_NVLINK/atlas nvlink
ATLAS_RANKS=4 ATLAS_STAGES=predict scripts/atlas.sh OUT_HOST/atlas host
python3 scripts/atlas_report.py results/atlas-h200x4-2026-11-27 OUT_NVLINK/atlas OUT_HOST/atlas
