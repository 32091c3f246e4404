#!/usr/bin/env bash
# On a node of 2 x H200 (NCCL_NVLS_ENABLE=0 in every process), from the repository root.
# A: the commit before the change (efce364), archived as ab-base.tar.gz; B: the working tree.
git archive --format=tar.gz -o ab-base.tar.gz efce364 -- . ':(exclude)results'
export NCCL_NVLS_ENABLE=0
# Builds both (native) and runs the gpu tests; its A/B section ran past the call's limit at three
# turns, so the A/B was rerun directly on the two builds with two turns:
AB_BASE=$PWD/ab-base.tar.gz AB_TURNS=3 scripts/gpu-check.sh OUT/gc --only tests,ab
(cd build-gpu && ctest -L gpu)
AB_TURNS=2 AB_CASES="prefill decode_graphs train train_tp overlap_tp" \
  MPIRUN="mpirun --allow-run-as-root --bind-to none" \
  scripts/ab-check.sh OUT/ab /tmp/ridgeline-ab-base/build/src/ridgeline build-gpu/src/ridgeline
# The train phase under every strategy it now runs, each checked against one rank:
mpirun --allow-run-as-root --bind-to none -np 2 -x NCCL_NVLS_ENABLE build-gpu/src/ridgeline run \
  --config models/llama3-8b.toml --layers 2 --phase train --tp 2 --batch 2 --seq 2048 \
  --overlap none,async,chunked:2,split:2,symm:async,symm:chunked:2 --check on --warmup 3 \
  --iters 20 --roofs none
