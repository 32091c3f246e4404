#!/usr/bin/env bash
# Every op of a prefill and a decode layer is attributed against roofs the same job measured:
# each has a ceiling (never "none"), a positive finite efficiency, and the summary counts the ops
# over their ceilings. Nothing here depends on how fast the machine is: whether an op runs within
# its ceiling is a benchmark's question (scripts/host-bench.sh), and the arithmetic of efficiency
# and ops_over_ceiling is tests/unit/test_run_attribution.cpp's, on injected times.
# Usage: efficiency.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mpiexec -n 2 --oversubscribe "$bin" roofs --out "$work/roofs.h5" >"$work/roofs.log"
for phase in prefill decode; do
  mpiexec -n 2 --oversubscribe "$bin" run --config "$repo/models/tiny.toml" --tp 2 --phase "$phase" \
    --warmup 2 --iters 10 --roofs "$work/roofs.h5" --out "$work/$phase.h5" --quiet >"$work/$phase.log"
  python3 - "$work/$phase.h5" <<'PY'
import math
import sys
import h5py
with h5py.File(sys.argv[1]) as f:
    ops = f["summary/ops"][()]
    assert len(ops) > 0
    for op in ops:
        assert op["ceiling"] != b"none", op
        assert op["bound_ns"] > 0 and math.isfinite(op["efficiency"]) and op["efficiency"] > 0, op
    over = int(f["summary"].attrs["ops_over_ceiling"])
    assert 0 <= over <= len(ops), over
    print(f"{sys.argv[1]}: {len(ops)} ops attributed, {over} over their ceiling "
          f"(max efficiency {max(float(o['efficiency']) for o in ops):.2f})")
PY
done
echo "e2e efficiency ok"
