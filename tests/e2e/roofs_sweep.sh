#!/usr/bin/env bash
# End to end on the host backend: roofs -> file -> validate -> report; a sweep over tp and batch
# -> file with its points, JSON and markdown -> validate -> report; run --roofs FILE.
# Usage: roofs_sweep.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mpiexec -n 2 --oversubscribe "$bin" roofs --quick --out "$work/roofs.h5" | tee "$work/roofs.log"
"$bin" validate "$work/roofs.h5"
"$bin" report "$work/roofs.h5" | tee "$work/roofs_report.log"
for roof in "gemm +fp32 +square" "memory +copy" "launch +eager" "interconnect all_reduce +x2"; do
  grep -Eq "$roof" "$work/roofs_report.log" || { echo "roofs report lacks '$roof'" >&2; exit 1; }
done

mpiexec -n 2 --oversubscribe "$bin" sweep --config "$repo/models/tiny.toml" --phase decode --tp 1,2 \
  --batch 1,4 --warmup 1 --iters 3 --roofs "$work/roofs.h5" --json "$work/sweep.json" \
  --markdown "$work/sweep.md" --out "$work/sweep.h5" 2>"$work/sweep.err" | tee "$work/sweep.log"
# 4 points, 3 repeats each (the default), the points taking turns.
grep -q "sweep: point 12 of 12" "$work/sweep.err"
"$bin" validate "$work/sweep.h5"
"$bin" report "$work/sweep.h5" | tee "$work/sweep_report.log"
grep -Eq "^ +3 +tp=2 batch=4 " "$work/sweep_report.log"
grep -q "^crossovers" "$work/sweep_report.log"
python3 - "$work" <<'PY'
import json, sys
import h5py
work = sys.argv[1]
with h5py.File(f"{work}/sweep.h5") as f:
    pts = f["sweep/points"][()]
    assert len(pts) == 4 and all(p["status"] == b"ok" for p in pts), pts["status"]
    assert f["sweep"].attrs["axes"] == "tp,batch" and f["sweep"].attrs["complete"] == 1
    for k in range(4):
        s = f[f"points/{k}/summary"]
        assert s.attrs["ceiling"] in ("compute", "hbm", "interconnect", "launch"), s.attrs["ceiling"]
        assert "efficiency" in s["ops"].dtype.names and "ranks" not in f[f"points/{k}"]
    assert f["roofs"].attrs["source"].endswith(")")  # the roofs file named, with its date
doc = json.load(open(f"{work}/sweep.json"))
assert len(doc["points"]) == 4 and doc["points"][3]["label"] == "tp=2 batch=4"
assert "| point |" in open(f"{work}/sweep.md").read()
PY
# A point that cannot run is recorded as failed and the sweep goes on.
mpiexec -n 2 --oversubscribe "$bin" sweep --config "$repo/models/tiny.toml" --tp 1,3 --warmup 1 --iters 2 \
  --roofs none --keep-timelines --out "$work/failed.h5" | tee "$work/failed.log"
grep -Eq "^ +1 +tp=3 +failed: " "$work/failed.log"
"$bin" validate "$work/failed.h5"
python3 -c "import h5py,sys; f=h5py.File(sys.argv[1]); assert 'ranks' in f['points/0'] and 'roofs' not in f" "$work/failed.h5"
echo "e2e roofs/sweep ok"
