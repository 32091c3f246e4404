#!/usr/bin/env bash
# A trace run end to end on the host backend: a trace written by `model --write-trace` replayed
# with real mixed steps at tp 2 (the capacity step, then every replayed step again, checked
# against the TP=1 model), the requests' latency percentiles in the console, in --json and in
# /serving of a file both validators accept; the same trace generated in place (--trace-gen)
# replays the same requests; --duration replays the requests arriving before it, each step's
# time split by ceiling under the run's roofs; `model --validate` makes the measured steps again
# from the file's requests and step times (it refuses a file whose steps are not its
# scheduler's) and predicts the trace. Nothing timed is asserted: only counts, names and the
# scheduler's rules.
# Usage: trace_run.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gen="rate=400,requests=10,prompt=8:90,output=1:12,seed=5"
sched=(--token-budget 64 --chunk 32 --max-batch 6 --kv-capacity 400)

"$bin" model --config "$repo/models/tiny.toml" --hardware "$repo/models/hardware/h200-sxm.toml" \
  --trace-gen "$gen" "${sched[@]}" --write-trace "$work/trace.csv" >"$work/model.log"
test "$(grep -vc '^#\|^arrival_s' "$work/trace.csv")" -eq 10

mpiexec -n 2 --oversubscribe "$bin" run --config "$repo/models/tiny.toml" --phase mixed \
  --seq 128 --tp 2 --trace "$work/trace.csv" "${sched[@]}" --slo-ttft-ms 10000 --warmup 1 \
  --iters 2 --roofs none --check on --out "$work/trace.h5" --json "$work/trace.json" |
  tee "$work/trace.log"
grep -q "^check: passed" "$work/trace.log"
grep -Eq "^  check: every step against the TP=1 model: passed \(max rel error [0-9.e+-]+ over [0-9]+ step\(s\), tolerance 0.0001\)$" "$work/trace.log"
for line in "^trace: .*trace.csv: 10 request\(s\) in [0-9]+ measured step\(s\) \(token budget 64, chunk 32, max batch 6\)" \
  "^  TTFT +[0-9.]+ +[0-9.]+ +[0-9.]+$" "^  TPOT +[0-9.]+ +[0-9.]+ +[0-9.]+$" \
  "^  e2e +[0-9.]+ +[0-9.]+ +[0-9.]+$" "^  tokens: [0-9]+ prefill, [0-9]+ decode; goodput"; do
  grep -Eq "$line" "$work/trace.log" || { echo "missing line: $line" >&2; exit 1; }
done
"$bin" validate "$work/trace.h5"
(cd "$repo/scripts" && python3 -m ridgeline_analysis validate "$work/trace.h5")

python3 - "$work/trace.h5" "$work/trace.json" "$work/trace.csv" <<'PY'
import csv, json, sys
import h5py
import numpy as np
path, js, trace = sys.argv[1:4]
rows = [r for r in csv.reader(l for l in open(trace) if not l.startswith("#"))][1:]
with h5py.File(path, "r") as f:
    s = dict(f["/serving"].attrs)
    steps, req = f["/serving/steps"][()], f["/serving/requests"][()]
    config = dict(f["/config"].attrs)
assert int(s["requests"]) == 10 and len(req) == 10, s
assert [int(r[1]) for r in rows] == list(req["prompt_tokens"]), (rows, req["prompt_tokens"])
assert [int(r[2]) for r in rows] == list(req["output_tokens"])
# The scheduler's rules: the budget, the batch, decode first, every token once.
tokens = steps["prefill_tokens"] + steps["decode_tokens"]
assert tokens.min() >= 1 and tokens.max() <= 64, tokens
assert (steps["prefill_sequences"] + steps["decode_sequences"]).max() <= 6
assert steps["prefill_tokens"].sum() == req["prompt_tokens"].sum()
assert steps["decode_tokens"].sum() == (req["output_tokens"] - 1).sum()
assert (req["first_token_s"] >= req["arrival_s"]).all() and (req["finish_s"] >= req["first_token_s"]).all()
assert np.isnan(req["tpot_s"][req["output_tokens"] == 1]).all()
# Every step held against the TP=1 model running the same steps.
assert s["check"] == "passed" and int(s["check_steps"]) == int(s["steps"]), s
errors = steps["check_rel_error"]
assert np.isfinite(errors).all() and errors.max() <= s["check_tolerance"], errors
assert errors.max() == s["check_max_rel_error"]
assert config["token_budget"] == 64 and config["max_batch"] == 6 and config["chunk"] == 32
assert config["trace"].endswith("trace.csv") and config["trace_gen"] == ""
d = json.load(open(js))
assert d["serving"]["requests"] == 10 and len(d["serving requests"]) == 10, d.keys()
assert len(d["serving steps"]) == int(s["steps"])
PY

# The same trace generated in place: the same requests; --duration keeps the early ones.
mpiexec -n 1 "$bin" run --config "$repo/models/tiny.toml" --phase mixed --seq 128 \
  --trace-gen "$gen" "${sched[@]}" --duration 0.01 --warmup 1 --iters 2 \
  --out "$work/gen.h5" | tee "$work/gen.log"
# With roofs (the short version measured for the run), each step's time by ceiling.
grep -Eq "^  ceiling \(each step split by its ops' bounds under the roofs\): steps bound by compute [0-9]+, hbm [0-9]+" "$work/gen.log"
python3 - "$work/trace.h5" "$work/gen.h5" <<'PY'
import sys
import h5py
import numpy as np
with h5py.File(sys.argv[1], "r") as a, h5py.File(sys.argv[2], "r") as b:
    ra, rb = a["/serving/requests"][()], b["/serving/requests"][()]
    early = ra["arrival_s"] < 0.01
    assert 1 <= len(rb) < len(ra) and len(rb) == early.sum(), (len(ra), len(rb))
    for k in ("arrival_s", "prompt_tokens", "output_tokens"):
        assert (ra[k][early] == rb[k]).all(), k
    assert b["/serving"].attrs["duration_s"] == 0.01
    # TP 1: the run is itself the reference, no step compared.
    assert b["/serving"].attrs["check"].startswith("skipped: tp=1"), b["/serving"].attrs["check"]
    assert b["/serving"].attrs["check_steps"] == 0
    assert np.isnan(b["/serving/steps"]["check_rel_error"]).all()
    # Without roofs no step has a ceiling; with them every step has one, its classes summing to
    # its time.
    assert set(a["/serving/steps"]["ceiling"]) == {b"none"}
    sb = b["/serving/steps"][()]
    assert set(sb["ceiling"]) <= {b"compute", b"hbm", b"interconnect", b"launch"}, set(sb["ceiling"])
    total = sb["compute_ns"] + sb["hbm_ns"] + sb["interconnect_ns"] + sb["launch_ns"]
    assert (abs(total - sb["step_ns"]) <= 1e-6 * sb["step_ns"]).all()
PY

# The model makes the measured steps again and predicts the trace; a file whose steps are not
# its scheduler's is refused.
"$bin" model --validate "$work/trace.h5" --hardware "$repo/models/hardware/h200-sxm.toml" \
  --json "$work/validate.json" >"$work/validate.log"
grep -Eq "^measured steps against their mixes' predictions: error median" "$work/validate.log"
grep -Eq "^  tpot_p95_ms +[0-9.]+ +[0-9.]+ +[-+][0-9.]+%$" "$work/validate.log"
python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['trace_validation']; assert [r['figure'] for r in t][:2] == ['ttft_p50_ms', 'ttft_p95_ms'], t" "$work/validate.json"
cp "$work/trace.h5" "$work/moved.h5"
python3 - "$work/moved.h5" <<'PY'
import sys
import h5py
import numpy as np
# Two requests' prompts swapped: every total, order and latency the validators check holds, but
# the scheduler chunks the prompts into other steps.
with h5py.File(sys.argv[1], "r+") as f:
    req = f["/serving/requests"][()]
    i, j = int(np.argmin(req["prompt_tokens"])), int(np.argmax(req["prompt_tokens"]))
    req["prompt_tokens"][[i, j]] = req["prompt_tokens"][[j, i]]
    del f["/serving/requests"]
    f["/serving/requests"] = req
PY
if "$bin" model --validate "$work/moved.h5" --hardware "$repo/models/hardware/h200-sxm.toml" \
  >"$work/moved.log" 2>&1; then
  echo "a file whose steps are not its scheduler's was not refused" >&2
  exit 1
fi
grep -Eq "the scheduler makes [0-9]+ steps of the file's requests|of the file is not the one the scheduler makes" "$work/moved.log"
echo "e2e trace run ok"
