#!/usr/bin/env bash
# How this directory was made, on a node of 2 x H200 (NV18), from the top of the repository,
# NCCL_NVLS_ENABLE=0 in every process.
# A: commit f67a14a, the last commit whose TP 2 figures were taken on two GPUs
#    (results/ab-executors-2026-11-28); B: the tree of commit 949507f (the code of 7a64b11 with
#    this page's two new ab-check cases).
git archive --format=tar.gz -o base.tar.gz f67a14a -- . ':(exclude)results'
export NCCL_NVLS_ENABLE=0
# Call 1: both builds (native, side by side), the gpu tests of B on two GPUs, then two turns.
AB_BASE=$PWD/base.tar.gz AB_TURNS=2 \
  AB_CASES="train_tp train_tp_split overlap_tp overlap_tp_split train_pp" \
  GPU_CHECK_STEP_TIMEOUT=120 scripts/gpu-check.sh OUT/gc --only tests,ab
                                        # -> table_call1.md, gpu-tests.txt, env.txt
# Call 2, on the same two builds: three more turns of the cases with a strategy list or a
# pipeline (train_tp had no row beyond its spreads in call 1 and was left out).
AB_TURNS=3 AB_CASES="overlap_tp overlap_tp_split train_tp_split train_pp" \
  MPIRUN="mpirun --bind-to none --map-by slot" \
  scripts/ab-check.sh OUT/ab2 /tmp/ridgeline-ab-base/build/src/ridgeline build-gpu/src/ridgeline
                                        # -> table_call2.md
# Pooled: call 1's turns as t1-t2 and call 2's as t3-t5 in one folder (json/ab-json.tar.xz).
python3 scripts/ab_table.py POOLED > table_pooled.md
# Later, on a fresh 2 x H200 node: StageCore (9c3c90b, B) beside 0197f52 (A), two turns.
git archive --format=tar.gz -o base2.tar.gz 0197f52 -- . ':(exclude)results'
AB_BASE=$PWD/base2.tar.gz AB_TURNS=2 AB_CASES="overlap_tp train_tp_split" \
  GPU_CHECK_STEP_TIMEOUT=100 scripts/gpu-check.sh OUT/gd --only ab   # -> table_stagecore.md
