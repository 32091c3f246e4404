#!/usr/bin/env bash
# How this page was produced, on a node of 2 x H200 from the top of the repository at commit
# d53aa5f: the commit before the change (2cbb5bc) archived, both built natively beside each
# other, then scripts/ab-check.sh with three turns per build.
git archive --format=tar.gz -o ab-base.tar.gz 2cbb5bc -- . ':(exclude)results'
AB_BASE=$PWD/ab-base.tar.gz AB_TURNS=3 scripts/gpu-check.sh OUT --only ab
python3 scripts/ab_table.py OUT/ab
# The gpu tests of the same tree, on the same kind of node:
scripts/gpu-check.sh OUT --only tests
