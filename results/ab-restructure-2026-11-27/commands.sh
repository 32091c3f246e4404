#!/usr/bin/env bash
# How this page was produced (its first table), on a node of 2 x H200 from the top of the repository at commit
# 27e3023: the commit before the restructure (1fb5fd5) archived, both built natively beside
# each other, then scripts/ab-check.sh with three turns per build.
git archive --format=tar.gz -o ab-base.tar.gz 1fb5fd5 -- . ':(exclude)results'
AB_BASE=$PWD/ab-base.tar.gz AB_TURNS=3 scripts/gpu-check.sh OUT --only ab
# The table (table.md) from the runs' --json summaries:
python3 scripts/ab_table.py OUT/ab
