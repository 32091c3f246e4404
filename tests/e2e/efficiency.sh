#!/usr/bin/env bash
# No attributed host op may run faster than its own ceiling allows (efficiency <= 1.05): the
# roofs are measured by the same job, then every op of a prefill and a decode layer is held to
# them. A higher efficiency means a wrong roof or a wrong work model.
# Usage: efficiency.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpiexec -n 2 --oversubscribe "$bin" roofs --out "$work/roofs.h5" >"$work/roofs.log"
for phase in prefill decode; do
  mpiexec -n 2 --oversubscribe "$bin" run --config "$repo/models/tiny.toml" --tp 2 --phase "$phase" \
    --warmup 2 --iters 10 --roofs "$work/roofs.h5" --out "$work/$phase.h5" | tee "$work/$phase.log"
  python3 - "$work/$phase.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1]) as f:
    ops = f["summary/ops"][()]
    assert f["summary"].attrs["ops_over_ceiling"] == 0, f["summary"].attrs["ops_over_ceiling"]
    for op in ops:
        assert op["ceiling"] != b"none", op
        assert 0 < op["efficiency"] <= 1.05, (op["name"], op["efficiency"], op["ceiling"])
PY
done
echo "e2e efficiency ok"
