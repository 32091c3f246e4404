#!/usr/bin/env bash
# A sweep of mixed steps along their prefill share on 2 ranks (tp 2): the step's 40 tokens (2
# chunks of 16, 8 decode tokens at ragged contexts) moved from decode-only to prefill-only,
# every point checked against TP=1; the file valid to both validators, the axis in /sweep and
# its rows, each point's mix the share's (round(share x 40) prefill tokens over 2 sequences),
# the crossovers looked for along it, and the Python picture of the step by ceiling along the
# share drawn. Refused: the share without --phase mixed (as a base phase or a phase list).
# Usage: mixed_sweep.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rc=$?; [ "$rc" -eq 0 ] || cat "$work"/*.log >&2; rm -rf "$work"' EXIT
base=(--config "$repo/models/tiny.toml" --backend host --tp 2 --seq 128 --prefill-seqs 2
  --chunk 16 --decode-batch 8 --context-dist uniform:1:100 --context-seed 5 --warmup 1 --iters 2
  --quiet)
mpiexec -n 2 --oversubscribe "$bin" sweep "${base[@]}" --phase mixed \
  --prefill-share 0,0.25,.5,0.75,1 --repeats 2 --out "$work/mix.h5" --json "$work/mix.json" \
  >"$work/mix.log"
grep -q "^crossovers" "$work/mix.log"
grep -q "^  prefill_share" "$work/mix.log"
grep -q '"sweep_prefill_share": "0,0.25,0.5,0.75,1"' "$work/mix.json"
"$bin" validate "$work/mix.h5" >"$work/validate.log"
PYTHONPATH="$repo/scripts" python3 - "$work/mix.h5" <<'PY'
import sys
import h5py
from ridgeline_analysis import load, validate
path = sys.argv[1]
assert validate.problems(path) == [], validate.problems(path)
run = load(path)
points = run.sweep.points
assert run.sweep.axes == ["prefill_share"], run.sweep.axes
assert points["prefill_share"].tolist() == [0, 0.25, 0.5, 0.75, 1], points["prefill_share"]
assert [str(x) for x in points["label"]] == [f"prefill_share={s}" for s in
                                             ("0", "0.25", "0.5", "0.75", "1")]
assert all(str(s) == "ok" for s in points["status"]), points["status"]
assert all(str(c).startswith("passed") for c in points["check"]), points["check"]
assert all(str(a) == "prefill_share" for a in run.sweep.crossovers["axis"])
with h5py.File(path, "r") as f:
    for k, prefill in enumerate((0, 10, 20, 30, 40)):
        mix = f[f"points/{k}/summary"].attrs
        assert int(mix["mix_prefill_tokens"]) == prefill, (k, mix["mix_prefill_tokens"])
        assert int(mix["mix_decode_tokens"]) == 40 - prefill, (k, mix["mix_decode_tokens"])
        assert int(mix["mix_prefill_sequences"]) == (2 if prefill else 0)
        assert float(f[f"points/{k}/config"].attrs["prefill_share"]) == points["prefill_share"][k]
print("mixed sweep: 5 shares, each point's mix, every check passed")
PY
(cd "$repo/scripts" && python3 -m ridgeline_analysis scaling "$work/mix.h5" --axis prefill_share \
  -o "$work/share.png") >"$work/plot.log"
[ -s "$work/share.png" ]

# refused EXPECTED ARGS...: exit 2 with EXPECTED printed once, and no file.
refused() {
  local expected=$1 rc=0
  shift
  mpiexec -n 2 --oversubscribe "$bin" sweep "${base[@]}" "$@" --out "$work/none.h5" \
    >"$work/refused.log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || { echo "exit $rc, not 2, for $*" >&2; return 1; }
  [ "$(grep -c -- "$expected" "$work/refused.log")" -eq 1 ] ||
    { echo "'$expected' not printed once for $*" >&2; return 1; }
  [ ! -e "$work/none.h5" ] || { echo "a file was written for $*" >&2; return 1; }
}
refused "it needs --phase mixed (got --phase decode)" --phase mixed,decode --prefill-share 0,1
echo "e2e mixed sweep ok"
