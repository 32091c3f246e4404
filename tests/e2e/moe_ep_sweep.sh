#!/usr/bin/env bash
# A sweep along the expert-parallel degree on 4 ranks: a small Mixtral layer (8 experts) at
# --ep 1,2,4 and two sequence lengths, every rank a data-parallel replica in EP groups of ep
# consecutive ones. The file valid to both validators; the axis in /sweep, its rows, the JSON and
# each point's config and MoE summary (moe_ep, the imbalance 1 at ep 1 only); every point at ep
# 2 and 4 checked against one rank of every expert (at ep 1 the run is its own reference); the
# crossovers looked for along ep.
# Usage: moe_ep_sweep.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rc=$?; [ "$rc" -eq 0 ] || cat "$work"/*.log >&2; rm -rf "$work"' EXIT
mpiexec -n 4 --oversubscribe "$bin" sweep --config "$repo/models/mixtral-8x7b.toml" --layers 1 \
  --hidden 256 --heads 8 --kv-heads 2 --expert-ffn-hidden 128 --backend host --warmup 1 \
  --iters 2 --roofs none --routing zipf:1.2 --batch 1 --seq 16,32 --ep 1,2,4 --repeats 2 --quiet \
  --out "$work/ep.h5" --json "$work/ep.json" >"$work/ep.log"
# One MoE line per repeat of each point, at its degree.
for ep in 1 2 4; do
  [ "$(grep -c "^ridgeline: MoE ep $ep, routing zipf:1.2" "$work/ep.log")" -eq 4 ] ||
    { echo "not 2 points x 2 repeats at ep $ep" >&2; exit 1; }
done
grep -q "^crossovers" "$work/ep.log"
grep -Eq "^  ep( |:)" "$work/ep.log"
grep -q '"sweep_ep": "1,2,4"' "$work/ep.json"
"$bin" validate "$work/ep.h5" >"$work/validate.log"
"$bin" report "$work/ep.h5" >"$work/report.log"
grep -q "seq=16 ep=4" "$work/report.log"
if ! python3 -c "import h5py, numpy" 2>/dev/null; then
  echo "e2e moe ep sweep ok (skipped the Python checks: no h5py)"
  exit 0
fi
PYTHONPATH="$repo/scripts" python3 - "$work/ep.h5" "$work/ep.json" <<'PY'
import json, sys
import h5py
from ridgeline_analysis import load, validate
path, json_path = sys.argv[1:]
assert validate.problems(path) == [], validate.problems(path)
run = load(path)
points = run.sweep.points
assert run.sweep.axes == ["seq", "ep"], run.sweep.axes
# The last axis varies fastest.
assert points["ep"].tolist() == [1, 2, 4, 1, 2, 4], points["ep"]
assert points["seq"].tolist() == [16, 16, 16, 32, 32, 32], points["seq"]
assert [str(x) for x in points["label"]] == [f"seq={s} ep={e}" for s in (16, 32) for e in (1, 2, 4)]
assert all(str(s) == "ok" for s in points["status"]), points["status"]
# At ep 1 every rank holds every expert: the run is its own reference.
for ep, check in zip(points["ep"].tolist(), points["check"]):
    expected = "passed" if ep > 1 else "skipped: tp=1, pp=1 and ep=1"
    assert str(check).startswith(expected), (ep, check)
assert all(str(a) in ("seq", "ep") for a in run.sweep.crossovers["axis"])
with h5py.File(path, "r") as f:
    for k, ep in enumerate(points["ep"].tolist()):
        assert int(f[f"points/{k}/config"].attrs["ep"]) == ep
        summary = f[f"points/{k}/summary"].attrs
        assert int(summary["moe_ep"]) == ep
        # ep 1: one rank holds every expert, so its rows are the group's mean.
        assert (float(summary["moe_rank_imbalance_max"]) == 1) == (ep == 1), (ep, dict(summary))
        # The per-step ratios the attributes summarise.
        steps = f[f"points/{k}/summary/moe_rank_imbalance_per_step"][()]
        assert steps.size == int(summary["moe_imbalance_steps"]) > 0, (k, steps.size)
        assert steps.min() >= 1 and steps.max() == float(summary["moe_rank_imbalance_max"])
        assert abs(steps.mean() - float(summary["moe_rank_imbalance"])) < 1e-9 * steps.mean()
        assert run.points[k].summary.moe_rank_imbalance_per_step.tolist() == steps.tolist()
document = json.load(open(json_path))
assert [p["ep"] for p in document["points"]] == [1, 2, 4, 1, 2, 4], document["points"]
print("moe ep sweep: 6 points along seq and ep, every check at ep 2 and 4 passed")
PY
# A per-step ratio below 1 (no rank computes fewer rows than the mean's) and one entry short of
# moe_imbalance_steps: both validators name each.
cp "$work/ep.h5" "$work/bad.h5"
python3 - "$work/bad.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r+") as f:
    d = f["points/2/summary/moe_rank_imbalance_per_step"]
    steps = d[()]
    steps[0] = 0.5
    del f["points/2/summary/moe_rank_imbalance_per_step"]
    f["points/2/summary/moe_rank_imbalance_per_step"] = steps[:-1]
PY
if "$bin" validate "$work/bad.h5" >"$work/bad.log" 2>&1; then
  echo "validate passed a tampered imbalance dataset" >&2; exit 1
fi
grep -q "moe_rank_imbalance_per_step: entry 0 is 0.5, expected >= 1" "$work/bad.log"
grep -q "moe_rank_imbalance_per_step: .* entries but moe_imbalance_steps is" "$work/bad.log"
PYTHONPATH="$repo/scripts" python3 - "$work/bad.h5" <<'PY'
import sys
from ridgeline_analysis import validate
found = validate.problems(sys.argv[1])
assert any("moe_rank_imbalance_per_step: entry 0 is 0.5, expected >= 1" in p for p in found), found
assert any("entries but moe_imbalance_steps is" in p for p in found), found
PY
echo "e2e moe ep sweep ok"
