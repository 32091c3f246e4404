#!/usr/bin/env bash
# The train phase on the host backend: the gradients of every layout, every schedule (with and
# without sequence parallelism) and every overlap strategy the train stage runs equal one rank's
# (the run's check, which exits non-zero on a failure), the files validate, and the stages run
# gpipe's and 1f1b's order (p = 2, m = 4).
# Usage: train.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tiny=(--config "$repo/models/tiny.toml" --layers 4 --batch 4 --warmup 1 --iters 2 --roofs none -q)

run() { # NP NAME [options...]
  local np=$1 name=$2
  shift 2
  mpiexec -n "$np" --oversubscribe "$bin" run "${tiny[@]}" --phase train --out "$work/$name.h5" \
    "$@" >"$work/$name.log"
  grep -q "^check: passed" "$work/$name.log" || { cat "$work/$name.log"; exit 1; }
  grep -q "^check_compares: gradients" "$work/$name.log"
  "$bin" validate "$work/$name.h5" >/dev/null
  echo "ok: np=$np $*"
}

run 2 tp2 --tp 2 --microbatches 2 --overlap none,async
run 2 gpt_tp2 --tp 2 --microbatches 2 --mlp gelu --norm layernorm --rotary off
run 2 dp2 --dp 2 --microbatches 2 --bucket-mb 0.1
run 2 dp2_shard --dp 2 --microbatches 2 --dp-shard --dp-overlap off
run 2 recompute --pp 2 --microbatches 2 --recompute full
for schedule in gpipe 1f1b interleaved:2 zb-h1; do
  run 2 "pp2_${schedule%%:*}" --pp 2 --microbatches 4 --schedule "$schedule"
done
run 4 tp2_pp2 --tp 2 --pp 2 --microbatches 2 --attention naive
# Sequence parallelism: each rank's rows of the stream, the input gradient compared per rank.
run 2 tp2_sp --tp 2 --microbatches 2 --overlap none,async --sequence-parallel
run 4 tp2_pp2_sp --tp 2 --pp 2 --microbatches 2 --schedule zb-h1 --sequence-parallel
# Every strategy the train stage runs, forward and backward: each one's gradients checked against
# one rank (a check line per strategy), each recorded as a point of the file under its name, and
# the file valid to the Python validator too.
strategies() { # NP NAME OVERLAPS [options...]
  local np=$1 name=$2 overlaps=$3
  shift 3
  run "$np" "$name" --overlap "$overlaps" "$@"
  local n
  n=$(grep -c "^check: passed" "$work/$name.log")
  [ "$n" -eq "$(tr ',' '\n' <<<"$overlaps" | wc -l)" ] || { cat "$work/$name.log"; exit 1; }
  PYTHONPATH="$repo/scripts" python3 - "$work/$name.h5" "$overlaps" <<'PY'
import sys
import h5py
from ridgeline_analysis import validate
path, overlaps = sys.argv[1:]
assert validate.problems(path) == [], validate.problems(path)
with h5py.File(path) as f:
    assert f["config"].attrs["overlap"] == overlaps, f["config"].attrs["overlap"]
    got = [f["points"][k]["summary"].attrs["overlap"] for k in sorted(f["points"], key=int)]
    assert got == overlaps.split(","), got
PY
}
strategies 2 tp2_strategies none,chunked:2,split:2,ce-ring,symm:chunked:2 --tp 2 \
  --microbatches 2
strategies 2 tp2_sp_strategies chunked:2,split:2,ce-ring:2,symm:none,symm:async --tp 2 \
  --microbatches 2 --sequence-parallel
strategies 4 tp2_pp2_sp_strategies split:2,chunked:2,ce-ring --tp 2 --pp 2 --microbatches 2 \
  --schedule zb-h1 --sequence-parallel
strategies 4 tp4_strategies ce-ring:2,async --tp 4 --microbatches 2
# Forward only through a schedule: the outputs are checked instead.
mpiexec -n 2 --oversubscribe "$bin" run "${tiny[@]}" --phase prefill --pp 2 --microbatches 4 \
  --schedule interleaved:2 --out "$work/prefill.h5" >"$work/prefill.log"
grep -q "^check: passed" "$work/prefill.log" && grep -q "^check_compares: outputs" "$work/prefill.log"
"$bin" validate "$work/prefill.h5" >/dev/null
echo "ok: prefill --schedule interleaved:2"
mpiexec -n 4 --oversubscribe "$bin" run "${tiny[@]}" --phase prefill --tp 2 --pp 2 \
  --microbatches 4 --schedule 1f1b --sequence-parallel --out "$work/prefill_sp.h5" \
  >"$work/prefill_sp.log"
grep -q "^check: passed" "$work/prefill_sp.log"
"$bin" validate "$work/prefill_sp.h5" >/dev/null
echo "ok: prefill --schedule 1f1b --sequence-parallel"

# The output checksum of a train run (its gradients) and of a scheduled prefill (its outputs):
# present whether or not the check runs, and the same for the same seed and configuration.
for phase in train prefill; do
  for check in on off; do
    mpiexec -n 2 --oversubscribe "$bin" run "${tiny[@]}" --phase "$phase" --pp 2 --microbatches 2 \
      --schedule 1f1b --check "$check" --out "$work/sum_$check.h5" >/dev/null
  done
  "$bin" compare "$work/sum_on.h5" "$work/sum_off.h5" >"$work/sum.log"
  grep -q "^output checksums (fnv1a64): identical (1 of 1)$" "$work/sum.log" ||
    { cat "$work/sum.log"; echo "no identical checksum ($phase)" >&2; exit 1; }
  echo "ok: $phase output checksum, check on and off"
done

# The schedule as run: each stage's timed iteration runs its forwards and backwards in the
# schedule's order (gpipe: every forward, then every backward; 1f1b: p - s - 1 forwards, then one
# forward and one backward in turn), and the bubble the simulator gives that order is theory's.
# How close the measured bubble comes to theory is a benchmark's question (scripts/host-bench.sh).
order() { # SCHEDULE
  mpiexec -n 2 --oversubscribe "$bin" run "${tiny[@]}" --microbatches 4 --pp 2 --phase train \
    --schedule "$1" --check off --out "$work/order.h5" >"$work/order.log"
  python3 - "$work/order.h5" "$work/order.log" "$1" <<'PY'
import re, sys
import h5py
path, log, schedule = sys.argv[1:]
p, m = 2, 4
def expected(stage):
    if schedule == "gpipe":
        return [f"F{i}" for i in range(m)] + [f"B{i}" for i in range(m)]
    warm = min(p - stage - 1, m)
    seq = [f"F{i}" for i in range(warm)]
    for i in range(m - warm):
        seq += [f"F{warm + i}", f"B{i}"]
    return seq + [f"B{i}" for i in range(m - warm, m)]
with h5py.File(path) as f:
    names = [n.decode() for n in f["ops"]["name"]]
    for stage in range(p):
        t = f[f"ranks/{stage}/timeline"][()]
        t = t[(t["warmup"] == 0) & (t["layer"] >= 0)]
        t = t[t["iteration"] == t["iteration"].min()]
        seq = []
        for e in sorted(t, key=lambda e: e["t_start_ns"]):
            name = names[e["op_id"]]
            item = ("B" if name.endswith(("_bwd", "_dgrad", "_wgrad")) else "F") + str(e["microbatch"])
            if not seq or seq[-1] != item:
                seq.append(item)
        assert seq == expected(stage), (schedule, stage, seq, expected(stage))
        print(f"{schedule} stage {stage}: {' '.join(seq)}")
text = open(log).read()
theory = float(re.search(r"^bubble_theory: (\S+)", text, re.M).group(1))
simulated = float(re.search(r"^bubble_simulated: (\S+)", text, re.M).group(1))
assert abs(theory - (p - 1) / (m + p - 1)) < 1e-9, theory
assert abs(simulated - theory) < 1e-9, (simulated, theory)
PY
}
order gpipe
order 1f1b
echo "train e2e ok"
