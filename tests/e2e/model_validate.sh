#!/usr/bin/env bash
# End to end on the host backend: a small sweep with its roofs -> `model --validate` on it (exit
# 0, per-op and per-step table, a valid predicted file, the same steps in its JSON and markdown);
# a train run -> `model --validate`
# predicting its backward ops too; `model` over a grid from a hardware
# description; bad input (unknown link preset, a hardware file with an unknown key) exits 2.
# Usage: model_validate.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mpiexec -n 2 --oversubscribe "$bin" roofs --quick --out "$work/roofs.h5" >/dev/null
mpiexec -n 2 --oversubscribe "$bin" sweep --config "$repo/models/tiny.toml" --phase decode \
  --tp 1,2 --batch 1,4 --warmup 1 --iters 3 --roofs "$work/roofs.h5" --out "$work/sweep.h5" \
  --quiet >/dev/null
"$bin" model --validate "$work/sweep.h5" --out "$work/model.h5" --json "$work/model.json" \
  --markdown "$work/model.md" | tee "$work/model.log"
grep -Eq "^tp=1 batch=1: step measured [0-9.]+ ms, predicted [0-9.]+ ms, error [-+][0-9.]+ %" \
  "$work/model.log"
grep -Eq "^  qkv_gemm +[0-9.]+ +[0-9.]+ " "$work/model.log"
grep -Eq "^step-time error over 4 measured point\(s\): max [0-9.]+ %, median [0-9.]+ %" \
  "$work/model.log"
grep -q "every point is predicted" "$work/model.log"
# Each step is held to its uninstrumented loop (the sweep has one at every point).
grep -q "^measured step: the uninstrumented loop.s median of sub-batch means at 4, its mean (a file written before sub-batches) at 0 of 4 point(s)" "$work/model.log"
"$bin" validate "$work/model.h5"
# --json and --markdown: every measured step beside its prediction, as the log prints them.
python3 - "$work" <<'PY'
import json, re, sys
work = sys.argv[1]
rows = json.load(open(f"{work}/model.json"))["validation"]
log = open(f"{work}/model.log").read()
printed = re.findall(r"^(.*): step measured ([0-9.]+) ms, predicted ([0-9.]+) ms, error ([-+][0-9.]+) %$",
                     log, re.M)
assert len(rows) == len(printed) == 4, (rows, printed)
for row, (label, measured, predicted, error) in zip(rows, printed):
    assert row["point"] == label, (row, label)
    assert abs(row["measured_step_ms"] - float(measured)) < 1e-4 * max(1.0, float(measured)), row
    assert abs(row["predicted_step_ms"] - float(predicted)) < 1e-4 * max(1.0, float(predicted)), row
    assert abs(row["error_pct"] - float(error)) < 0.06, row
md = open(f"{work}/model.md").read()
assert all(r["measured_step_source"] == "uninstrumented_p50" for r in rows), rows
assert "| point | measured_step_ms | measured_step_source | predicted_step_ms | error_pct |" in md, md
assert all(r["point"] in md for r in rows)
PY
python3 - "$work" <<'PY'
import sys
import h5py
with h5py.File(f"{sys.argv[1]}/model.h5") as f:
    assert f.attrs["predicted"] == 1 and f.attrs["command"] == "sweep"
    pts = f["sweep/points"][()]
    assert len(pts) == 4 and all(p["check"] == b"predicted" for p in pts), pts["check"]
    for k in range(4):
        g = f[f"points/{k}"]
        assert g.attrs["predicted"] == 1 and "summary" not in g
        assert g["prediction"].attrs["step_ns"] > 0 and g.attrs["measured_step_ns"] > 0
        assert g.attrs["measured_step_source"] in ("uninstrumented_p50", b"uninstrumented_p50")
PY
# A predicted file whose point lost its mark, or whose point holds a measured summary, is refused
# by both validators.
cp "$work/model.h5" "$work/unmarked.h5"
python3 - "$work/unmarked.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r+") as f:
    del f["points/1"].attrs["predicted"]
    f["points/2"].create_group("summary")
PY
set +e
"$bin" validate "$work/unmarked.h5" >"$work/unmarked.log" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || { echo "validate accepted an unmarked predicted file" >&2; exit 1; }
grep -q "/points/1: a point of a predicted file lacks predicted = 1" "$work/unmarked.log"
grep -q "/points/2: a predicted point holds a measured summary" "$work/unmarked.log"
PYTHONPATH="$repo/scripts" python3 - "$work/unmarked.h5" <<'PY'
import sys
from ridgeline_analysis import validate
found = validate.problems(sys.argv[1])
assert "/points/1: a point of a predicted file lacks predicted = 1" in found, found
assert "/points/2: a predicted point holds a measured summary" in found, found
PY

# The train phase: the forward and the backward of the layer plan are predicted, each op beside
# its measured time.
mpiexec -n 2 --oversubscribe "$bin" run --config "$repo/models/tiny.toml" --phase train --tp 2 \
  --warmup 1 --iters 2 --roofs "$work/roofs.h5" --out "$work/train.h5" >/dev/null
"$bin" model --validate "$work/train.h5" | tee "$work/train_model.log"
for op in qkv_gemm fc2_dgrad fc1_wgrad attention_bwd allreduce_attn_bwd; do
  grep -Eq "^  $op +[0-9.]+ +[0-9.]+ " "$work/train_model.log" ||
    { echo "model --validate: no prediction of $op in the train run" >&2; exit 1; }
done

# A grid from a hardware description: tp 4 and 8 on one node, 16 over two.
"$bin" model --config "$repo/models/llama3-70b.toml" --layers 1 --phase decode --batch 64 \
  --context 1024 --dtype bf16 --tp 4,8,16 --nodes 2 --hardware "$repo/models/hardware/h200-sxm.toml" \
  --out "$work/grid.h5" | tee "$work/grid.log"
grep -Eq "^ +2 +tp=16 " "$work/grid.log"
"$bin" validate "$work/grid.h5"

expect_usage_error() {
  local want=$1
  shift
  set +e
  mpiexec -n 2 --oversubscribe "$bin" "$@" >"$work/bad.out" 2>"$work/bad.err"
  local rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "exit $rc, expected 2: $*" >&2; cat "$work/bad.err" >&2; exit 1; }
  grep -q -- "$want" "$work/bad.err" || { echo "no '$want' in:" >&2; cat "$work/bad.err" >&2; exit 1; }
  [ "$(grep -c -- "$want" "$work/bad.err")" -eq 1 ] || { echo "printed more than once" >&2; exit 1; }
}
expect_usage_error "unknown link preset 'nvlink5'" model --hardware "$repo/models/hardware/h200-sxm.toml" --link nvlink5
sed 's/^hbm_gbps = /hbm_gbs = /' "$repo/models/hardware/h200-sxm.toml" >"$work/bad.toml"
line=$(grep -n '^hbm_gbs' "$work/bad.toml" | cut -d: -f1)
expect_usage_error "bad.toml:$line: unknown key 'hbm_gbs'" model --hardware "$work/bad.toml"
expect_usage_error "give --roofs FILE (measured) or --hardware FILE" model --tp 2
# A preset's dimensions reach the prediction as given: its hidden size, an axis value, never
# rescales its MLP from the default hidden size.
for preset in "llama3-8b 4096 14336" "llama3-405b 16384 53248"; do
  read -r name hidden ffn <<<"$preset"
  "$bin" model --config "$repo/models/$name.toml" --hardware "$repo/models/hardware/h200-sxm.toml" \
    --layers 1 --phase decode --batch 1 --context 1024 --out "$work/$name.h5" >/dev/null
  python3 - "$work/$name.h5" "$hidden" "$ffn" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1]) as f:
    config = f["/points/0/config"].attrs
    got = (int(config["hidden"]), int(config["ffn_hidden"]))
    assert got == (int(sys.argv[2]), int(sys.argv[3])), got
PY
done
echo "model e2e: ok"
