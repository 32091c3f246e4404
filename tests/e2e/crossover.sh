#!/usr/bin/env bash
# A decode sweep along tp on 4 host ranks (1, 2 and auto: the node's 4) names its crossovers by the sweep's own rule: the file
# validates, every crossover row has a known status, and the Python twin of the rule
# (ridgeline_analysis.sweeps.find_crossovers) finds the same rows in the file's points. Where
# the crossover falls on this machine is timing, a benchmark's question (scripts/host-bench.sh);
# the decision on hand-made intervals is tests/unit/test_sweep.cpp's.
# Usage: crossover.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpiexec -n 4 --oversubscribe "$bin" sweep --backend host --hidden 64 --heads 4 --ffn-hidden 256 \
  --layers 2 --phase decode --batch 1 --context 16 --tp 1,2,auto --warmup 2 --iters 10 --repeats 2 \
  --out "$work/cross.h5" >"$work/cross.log"
"$bin" validate "$work/cross.h5" >/dev/null
PYTHONPATH="$repo/scripts" python3 - "$work/cross.h5" <<'PY'
import sys
from ridgeline_analysis import reader, sweeps
sweep = reader.load(sys.argv[1]).sweep
tps = sorted(int(t) for t in sweep.points["tp"])
assert tps == [1, 2, 4], tps  # tp auto resolved to the 4 ranks of this one node
rows = sweep.crossovers
allowed = {"found", "within noise", "unrepeated", "predicted", "from the first point"}
assert {str(s) for s in rows["status"]} <= allowed, set(rows["status"])
ours = sweeps.find_crossovers(sweep.points, sweep.axes)
cpp = rows[rows["predicted"] == 0]
assert ours.size == cpp.size, (ours, cpp)
for name in sweeps.CROSSOVER_FIELDS:
    assert ours[name].tolist() == cpp[name].tolist(), name
print(f"{cpp.size} measured crossover rows, the same in C++ and Python")
PY
echo "e2e crossover ok"
