#!/usr/bin/env bash
# Damaged or hostile files, made here with h5py from real ones, are refused by every C++ reader
# (validate and report exit 1, compare and model --validate exit 2) with a line naming the
# problem, within 20 s and 2 GB of address space: a world_size of 1e12 (nothing is allocated
# by a count the file does not hold), attributes of the wrong type (never read as a default),
# NaN and negative times, a timeline row before the epoch, a sweep naming an axis that does not
# exist, a `complete` that is neither 0 nor 1, a timeline whose shape claims 1e10 rows the
# file does not hold. (The Python readers' side is scripts/tests/test_hostile_files.py.)
# Usage: hostile_files.sh RIDGELINE_BIN REPO_DIR
set -uo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
tiny=(--config "$repo/models/tiny.toml" --warmup 1 --iters 3 --roofs none --backend host -q)
mpiexec -n 2 --oversubscribe "$bin" run "${tiny[@]}" --tp 2 --out run.h5 >/dev/null || exit 1
mpiexec -n 2 --oversubscribe "$bin" sweep "${tiny[@]}" --tp 1,2 --repeats 1 --out sweep.h5 >/dev/null || exit 1
python3 - <<'PY' || exit 1
import shutil
import h5py
import numpy as np

def make(name, source, damage):
    shutil.copy(source, name)
    with h5py.File(name, "r+") as f:
        damage(f)

def retype(group, key, value):
    del group.attrs[key]
    group.attrs[key] = value

def poke(path, field, value):
    def damage(f):
        rows = f[path][()]
        if field is None:
            rows[0] = value
        else:
            rows[field][0] = value
        f[path][...] = rows
    return damage

make("world_size.h5", "run.h5", lambda f: f.attrs.modify("world_size", np.int64(10**12)))
make("tp_text.h5", "run.h5", lambda f: retype(f["config"], "tp", "2"))
make("tp_float.h5", "run.h5", lambda f: retype(f["config"], "tp", 2.0))
make("phase_number.h5", "run.h5", lambda f: retype(f["config"], "phase", np.int64(1)))
make("step_nan.h5", "run.h5", poke("summary/step_time_ns", None, np.nan))
make("op_nan.h5", "run.h5", poke("summary/ops", "p50_ns", np.nan))
make("op_negative.h5", "run.h5", poke("summary/ops", "flops", -1.0))
make("timeline.h5", "run.h5", poke("ranks/0/timeline", "t_start_ns", -5))
make("axis.h5", "sweep.h5", lambda f: f["sweep"].attrs.modify("axes", "tp,bogus"))
make("complete.h5", "sweep.h5", lambda f: f["sweep"].attrs.modify("complete", np.int64(2)))
make("timeline_flops.h5", "run.h5", poke("ranks/0/timeline", "flops", np.nan))
make("warmup.h5", "run.h5", poke("summary/warmup_step_time_ns", None, -1.0))

def unwritten(f):  # a chunked timeline whose shape claims 1e10 rows, none written
    group = f["ranks/1"]
    dtype = group["timeline"].dtype
    del group["timeline"]
    group.create_dataset("timeline", shape=(10**10,), dtype=dtype, chunks=(4096,))
make("unwritten.h5", "run.h5", unwritten)
PY
failures=0
expect() { # FILE TEXT
  local file=$1 text=$2 command rc want
  for command in validate report compare model; do
    case $command in
    compare) args=(compare "$([[ $file == axis.h5 || $file == complete.h5 ]] && echo sweep.h5 || echo run.h5)" "$file") want=2 ;;
    model) args=(model --hardware "$repo/models/hardware/h200-sxm.toml" --validate "$file") want=2 ;;
    *) args=("$command" "$file") want=1 ;;
    esac
    (ulimit -v 2000000; timeout 20 "$bin" "${args[@]}") >out.log 2>err.log
    rc=$?
    if [ "$rc" -ne "$want" ] || ! grep -qF -- "$text" err.log; then
      echo "FAIL [$file, $command]: exit $rc (want $want), stderr:"; sed 's/^/    /' err.log | head -3
      failures=$((failures + 1))
    else
      echo "ok   [$file, $command]: $(head -1 err.log | cut -c1-120)"
    fi
  done
}
expect world_size.h5 "world_size 1000000000000 but /topology holds 2 ranks"
expect tp_text.h5 "/config: tp must be an integer, found the string '2'"
expect tp_float.h5 "/config: tp must be an integer, found the number 2"
expect phase_number.h5 "/config: phase must be a string"
expect step_nan.h5 "/summary/step_time_ns: value 0 is nan"
expect op_nan.h5 "p50_ns is nan, expected a finite value >= 0"
expect op_negative.h5 "flops is -1, expected a finite value >= 0"
expect timeline.h5 "/ranks/0/timeline: row 0: t_start_ns -5 < 0"
expect axis.h5 "/sweep: axes names 'bogus', which is not a sweep axis"
expect complete.h5 "/sweep: complete must be 0 or 1, found 2"
expect timeline_flops.h5 "/ranks/0/timeline: row 0: flops is nan"
expect warmup.h5 "/summary/warmup_step_time_ns: value 0 is -1, expected > 0"
expect unwritten.h5 "10000000000 rows in its shape, but the file holds 0 of the"
[ "$failures" -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
echo "hostile files ok"
