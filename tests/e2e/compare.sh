#!/usr/bin/env bash
# `ridgeline compare` end to end on the host backend: two runs that differ in one environment
# variable name that layer and no other; a run against itself moves nothing (exit 0 under
# --fail-above); a run of another --batch names the configuration, and with its step times made
# three times slower fails --fail-above (exit 3); missing files and files of different kinds exit 2 with one line.
# Usage: compare.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset NCCL_ALGO

run() {  # run OUT BATCH [mpiexec options...]: tiny, tp=2, no roofs (nothing to attribute)
  local out=$1 batch=$2
  shift 2
  mpiexec -n 2 --oversubscribe "$@" "$bin" run --config "$repo/models/tiny.toml" --tp 2 \
    --batch "$batch" --warmup 1 --iters 20 --roofs none --out "$work/$out" >"$work/$out.log"
}

# json FILE EXPR: evaluates a Python expression over the JSON document `d`; fails when false.
json() {
  python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert eval(sys.argv[2]), (sys.argv[2], d["compare"], d["stack"])
PY
}

run a.h5 2
run env.h5 2 -x NCCL_ALGO=Ring  # the host backend never reads it; the fingerprint records it
run slow.h5 8

# One environment variable: the environment layer and no other (run identity aside).
"$bin" compare "$work/a.h5" "$work/env.h5" --json "$work/env.json" --markdown "$work/env.md" \
  | tee "$work/env.log"
grep -q "^  \[environment variables\]$" "$work/env.log"
grep -q "env NCCL_ALGO: (unset) -> Ring" "$work/env.log"
grep -q "^stack layers that differ: environment variables$" "$work/env.log"
# The same seed and configuration: the same output, bit for bit.
grep -q "^output checksums (fnv1a64): identical (1 of 1)$" "$work/env.log"
json "$work/env.json" 'd["compare"]["layers_differ"] == "environment"'
json "$work/env.json" '[r["key"] for r in d["stack"] if r["layer"] != "not_compared"] == ["NCCL_ALGO"]'
# (created_utc has whole seconds: two tiny runs may share it.)
json "$work/env.json" '{"argv", "out", "pid"} <= {r["key"] for r in d["stack"] if r["layer"] == "not_compared"}'
grep -q "| NCCL_ALGO |" "$work/env.md"

# A run against itself: every change is 0, so nothing can move, whatever the host's noise.
"$bin" compare "$work/a.h5" "$work/a.h5" --fail-above 5 --json "$work/self.json" | tee "$work/self.log"
grep -q "^stack: no layer differs$" "$work/self.log"
grep -q "^moved (0 of [0-9]* with a verdict): nothing$" "$work/self.log"
json "$work/self.json" 'd["compare"]["moved"] == 0 and d["compare"]["with_verdict"] >= 10'
json "$work/self.json" 'all(t["verdict"] == "unchanged" for t in d["timings"])'

# Four times the tokens: the configuration layer and the output checksum differ. The step times
# of both sides are injected (whether a real step moved must not depend on the machine's load,
# and a busy host's own spread can hide even a threefold change): base.h5 is a.h5 with steady
# step times, slow.h5 has three times those. The step moved, --fail-above 10 exits 3.
cp "$work/a.h5" "$work/base.h5"
python3 - "$work/base.h5" "$work/slow.h5" <<'PY'
import sys
import h5py
import numpy as np
with h5py.File(sys.argv[1], "r+") as a, h5py.File(sys.argv[2], "r+") as b:
    shape = a["summary/step_time_ns"].shape
    assert b["summary/step_time_ns"].shape == shape
    steady = np.linspace(1.0e6, 1.02e6, int(np.prod(shape))).reshape(shape)
    a["summary/step_time_ns"][...] = steady
    b["summary/step_time_ns"][...] = 3 * steady
PY
status=0
"$bin" compare "$work/base.h5" "$work/slow.h5" --fail-above 10 --json "$work/slow.json" \
  | tee "$work/slow.log" || status=$?
[ "$status" -eq 3 ] || { echo "compare of a slowed run exited $status, not 3" >&2; exit 1; }
grep -q "config batch: 2 -> 8" "$work/slow.log"
grep -Eq "^step .* moved " "$work/slow.log"
json "$work/slow.json" 'd["compare"]["layers_differ"] == "configuration"'
grep -q "^output checksums (fnv1a64): 1 differ: overlap=none (A [0-9a-f]\{16\}, B [0-9a-f]\{16\})$" "$work/slow.log"
json "$work/slow.json" 'd["compare"]["checksums_differ"] == 1 and d["checksums"][0]["verdict"] == "differs"'
json "$work/slow.json" '[t for t in d["timings"] if t["item"] == "step"][0]["change_pct"] > 10'

# Errors: one line on stderr, exit 2.
mpiexec -n 2 --oversubscribe "$bin" collectives --backend host --collectives all_reduce \
  --max-bytes 1K --out "$work/coll.h5" >"$work/coll.log"
"$bin" compare "$work/coll.h5" "$work/coll.h5" | tee "$work/coll_self.log"
grep -Eq "^all_reduce +1 KiB .* unchanged$" "$work/coll_self.log"
for case in "missing.h5:no such file" "coll.h5:compare needs two files of the same kind"; do
  status=0
  "$bin" compare "$work/a.h5" "$work/${case%%:*}" >/dev/null 2>"$work/err.log" || status=$?
  [ "$status" -eq 2 ] || { echo "compare with ${case%%:*} exited $status, not 2" >&2; exit 1; }
  [ "$(wc -l <"$work/err.log")" -eq 1 ] || { cat "$work/err.log" >&2; exit 1; }
  grep -q "${case#*:}" "$work/err.log"
done
echo "e2e compare ok"
