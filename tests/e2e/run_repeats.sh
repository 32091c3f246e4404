#!/usr/bin/env bash
# `run --repeats 3` with two overlap strategies at TP 2 on the host backend: the file validates
# in C++ and in Python, /repeats holds three rows per strategy, each strategy's summary holds the
# median over the repeats inside its interval and the repeat kept, the first repeat's check is
# the run's, and both validators refuse an interval that does not hold its median. A repeat count
# of 0 is refused with exit 2.
# Usage: run_repeats.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpiexec -n 2 --oversubscribe "$bin" run --backend host --hidden 64 --heads 4 --ffn-hidden 256 \
  --layers 1 --seq 32 --tp 2 --overlap none,async --warmup 1 --iters 4 --repeats 3 --roofs none \
  --out "$work/r.h5" --json "$work/r.json" >"$work/r.log" 2>&1
grep -q "none: step p50 over 3 repeats" "$work/r.log"
"$bin" validate "$work/r.h5" >/dev/null
PYTHONPATH="$repo/scripts" python3 - "$work/r.h5" "$work/r.json" <<'PY'
import json
import sys

import h5py

from ridgeline_analysis import validate

path = sys.argv[1]
assert validate.problems(path) == [], validate.problems(path)
with h5py.File(path, "r") as f:
    rows = f["/repeats"][()]
    names = [n.decode() if isinstance(n, bytes) else n for n in rows["strategy"]]
    assert sorted(names) == ["async"] * 3 + ["none"] * 3, names
    assert int(f["/config"].attrs["repeats"]) == 3
    for group in ("/points/0/summary", "/points/1/summary"):
        a = f[group].attrs
        assert int(a["repeats"]) == 3 and 0 <= int(a["repeat_used"]) < 3, dict(a)
        assert 0 < a["step_p50_lo_ns"] <= a["step_p50_median_ns"] <= a["step_p50_hi_ns"], dict(a)
        check = a["check"].decode() if isinstance(a["check"], bytes) else a["check"]
        assert check == "passed", check
summary = json.load(open(sys.argv[2]))
assert len(summary["repeats"]) == 6, summary["repeats"]
with h5py.File(path, "r+") as f:
    a = f["/summary"].attrs
    a["step_p50_lo_ns"] = 2 * a["step_p50_hi_ns"]
problems = validate.problems(path)
assert any("step_p50_lo_ns <= step_p50_median_ns" in p for p in problems), problems
PY
if "$bin" validate "$work/r.h5" >"$work/v.log" 2>&1; then
  echo "FAIL: validate accepted an interval that does not hold its median"; exit 1
fi
grep -q "step_p50_lo_ns <= step_p50_median_ns" "$work/v.log"
set +e
"$bin" run --backend host --repeats 0 --out "$work/x.h5" >"$work/zero.log" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "FAIL: --repeats 0 exited $rc, not 2"; cat "$work/zero.log"; exit 1; }
echo "run repeats ok"
