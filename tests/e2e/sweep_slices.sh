#!/usr/bin/env bash
# A sweep in slices, as the tasks of a job array run it: `--slice 1/2` and `--slice 2/2` of one
# grid hold disjoint points (every second one), each file records its slice and the grid's axes,
# and the two joined by `ridgeline report` and by the Python join are the whole grid. A slice
# that selects no point and a malformed one exit 2, printed once. `run --tp auto` on one node is
# the node's ranks.
# Usage: sweep_slices.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rc=$?; [ "$rc" -eq 0 ] || cat "$work"/*.log >&2; rm -rf "$work"' EXIT
sweep=(sweep --config "$repo/models/tiny.toml" --backend host --tp 1,2 --batch 1,2 --warmup 1
  --iters 2 --repeats 1 --roofs none --quiet)
for i in 1 2; do
  mpiexec -n 2 --oversubscribe "$bin" "${sweep[@]}" --slice "$i/2" --out "$work/s$i.h5" >"$work/s$i.log"
  "$bin" validate "$work/s$i.h5" >/dev/null
done
"$bin" report "$work/s1.h5" "$work/s2.h5" >"$work/report.log"
grep -q "== joined: 2 files, 4 points" "$work/report.log"
PYTHONPATH="$repo/scripts" python3 - "$work/s1.h5" "$work/s2.h5" <<'PY'
import sys
from ridgeline_analysis import reader, sweeps
runs = [reader.load(p) for p in sys.argv[1:]]
halves = [sorted(str(x) for x in r.sweep.points["label"]) for r in runs]
assert halves == [["tp=1 batch=1", "tp=2 batch=1"], ["tp=1 batch=2", "tp=2 batch=2"]], halves
for i, r in enumerate(runs, 1):
    assert r.sweep.axes == ["tp", "batch"], r.sweep.axes
    assert r.config["sweep_slice"] == f"{i}/2", r.config.get("sweep_slice")
joined = sweeps.join_sweeps(runs)
assert joined.points.size == 4 and joined.axes == ["tp", "batch"], (joined.points, joined.axes)
print("slices 1/2 and 2/2: disjoint, joined into the 4 points")
PY

# refused EXPECTED ARGS...: exit 2 on both ranks with EXPECTED printed once, and no file.
refused() {
  local expected=$1 rc=0
  shift
  mpiexec -n 2 --oversubscribe "$bin" "${sweep[@]}" "$@" --out "$work/none.h5" >"$work/refused.log" 2>&1 ||
    rc=$?
  [ "$rc" -eq 2 ] || { echo "exit $rc, not 2, for $*" >&2; return 1; }
  [ "$(grep -c -- "$expected" "$work/refused.log")" -eq 1 ] ||
    { echo "'$expected' not printed once for $*" >&2; return 1; }
  [ ! -e "$work/none.h5" ] || { echo "a file was written for $*" >&2; return 1; }
}
refused "selects no point" --slice 5/5
refused "expected I/N" --slice 3/2
refused "expected I/N" --slice 0/2

mpiexec -n 2 --oversubscribe "$bin" run --config "$repo/models/tiny.toml" --backend host --tp auto \
  --warmup 1 --iters 2 --roofs none --out "$work/auto.h5" >"$work/auto.log"
python3 - "$work/auto.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    tp, dp, nodes = int(f["config"].attrs["tp"]), int(f["config"].attrs["dp"]), int(f.attrs["nodes"])
assert (tp, dp, nodes) == (2, 1, 1), (tp, dp, nodes)
print("run --tp auto on one node of 2 ranks: tp 2")
PY
echo "e2e sweep slices ok"
