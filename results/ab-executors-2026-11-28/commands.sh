#!/usr/bin/env bash
# On a node of 2 x H200 (NCCL_NVLS_ENABLE=0 in every process), from the top of the repository.
# A: commit 7dc23f9 (before one issue_collective served both executors and before the reporters
# and roofs-per-scope merges), archived; B: the tree of commit f67a14a.
git archive --format=tar.gz -o ab-base.tar.gz 7dc23f9 -- . ':(exclude)results'
export NCCL_NVLS_ENABLE=0
# Call 1: both builds (native), the GPU tests of B, then two turns of the TP 2 workloads.
AB_BASE=$PWD/ab-base.tar.gz AB_TURNS=2 AB_CASES="train_tp overlap_tp" \
  scripts/gpu-check.sh OUT/gc --only tests,ab            # -> table_call1.md, gpu-tests.txt
build-gpu/src/ridgeline env >env.txt
# Call 2, on the same two builds: four more turns of the train step at TP 2.
AB_TURNS=4 AB_CASES=train_tp MPIRUN="mpirun --allow-run-as-root --bind-to none" \
  scripts/ab-check.sh OUT/ab /tmp/ridgeline-ab-base/build/src/ridgeline build-gpu/src/ridgeline
                                                          # -> table_call2.md
