#!/usr/bin/env bash
# `ridgeline model --trace` end to end on a tiny model and a hardware description: a CSV trace
# and a generated one predicted (exit 0, the latency, goodput, mix and ceiling lines, the JSON
# tables), the generated one written and read back to the same predictions, then bad traces
# refused on two ranks (exit 2, the message printed once); the generated trace at several arrival
# rates (--rates), each row what the trace generated at that rate alone predicts, drawn by
# `ridgeline_analysis latency`, and --rates refused where it has no generated trace to set.
# Nothing measured is asserted: every figure is a prediction.
# Usage: serving_trace.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--config "$repo/models/tiny.toml" --hardware "$repo/models/hardware/h200-sxm.toml"
  --dtype bf16 --tp 2 --token-budget 64 --chunk 32 --max-batch 4 --kv-capacity 1024)

cat >"$work/trace.csv" <<'CSV'
# arrival_s,prompt_tokens,output_tokens
arrival_s,prompt_tokens,output_tokens
0,100,8
0.00001,20,1
0.00002,40,4
CSV
"$bin" model "${common[@]}" --trace "$work/trace.csv" --slo-ttft-ms 1 --slo-tpot-ms 1 \
  --json "$work/trace.json" | tee "$work/trace.log"
for line in "^configuration: tiny, 2 layer\(s\), tp 2, bf16" "^ttft +[0-9.]+ +[0-9.]+ +[0-9.]+ +3$" \
  "^tpot +[0-9.]+ +[0-9.]+ +[0-9.]+ +2$" "^e2e +[0-9.]+ +[0-9.]+ +[0-9.]+ +3$" \
  "^goodput: [0-9.]+ request\(s\)/s at TTFT <= 1 ms and TPOT <= 1 ms \([0-3] of 3\)" \
  "^steps: [0-9]+ \(prefill only [0-9]+, decode only [0-9]+, mixed [0-9]+\)" \
  "^ceiling: steps bound by compute [0-9]+, hbm [0-9]+, interconnect [0-9]+, launch [0-9]+" \
  "^every step is predicted"; do
  grep -Eq "$line" "$work/trace.log" || { echo "missing line: $line" >&2; exit 1; }
done
python3 - "$work/trace.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert [r["metric"] for r in d["latency"]] == ["ttft", "tpot", "e2e"], d["latency"]
# The preset's layer as given (its MLP not rescaled by a default hidden size).
assert (d["config"]["hidden"], d["config"]["ffn_hidden"]) == (256, 512), d["config"]
assert len(d["requests"]) == 3 and all(r["e2e_ms"] > 0 for r in d["requests"]), d["requests"]
# The schedule is the scheduler's: 100 + 20 + 40 prompt tokens in chunks of at most 32, 64 a step.
steps = d["steps"]
assert sum(s["prefill_tokens"] for s in steps) == 160, steps
assert sum(s["decode_tokens"] for s in steps) == 7 + 0 + 3, steps
assert all(s["prefill_tokens"] + s["decode_tokens"] <= 64 for s in steps), steps
PY

"$bin" model "${common[@]}" --trace-gen rate=100,requests=20,prompt=16:64,output=2/8,seed=7 \
  --write-trace "$work/gen.jsonl" | tee "$work/gen.log"
grep -Eq "^ridgeline model: 20 request\(s\) of --trace-gen rate=100" "$work/gen.log"
grep -Eq "^goodput: [0-9.]+ request\(s\)/s at no latency target" "$work/gen.log"
# The generated trace written and given back: the same requests, the same predictions.
"$bin" model "${common[@]}" --trace "$work/gen.jsonl" >"$work/back.log"
diff <(sed 1d "$work/gen.log" | grep -v "^wrote") <(sed 1d "$work/back.log")

# Bad traces: every rank exits 2, the message printed once.
refused() {
  local expected=$1 file=$2
  shift 2
  set +e
  timeout 60 mpiexec -n 2 --oversubscribe "$bin" model "${common[@]}" --trace "$file" "$@" \
    >"$work/bad.log" 2>&1
  local rc=$?
  set -e
  cat "$work/bad.log"
  [ "$rc" -eq 2 ] || { echo "expected exit 2, got $rc" >&2; exit 1; }
  [ "$(grep -cF -- "$expected" "$work/bad.log")" -eq 1 ] ||
    { echo "expected '$expected' once" >&2; exit 1; }
}
printf 'arrival_s,prompt_tokens,output_tokens\n1,10,2\n0.5,10,2\n' >"$work/unsorted.csv"
refused "unsorted.csv:3: arrival_s 0.5 is before the previous request's 1" "$work/unsorted.csv"
printf '{"arrival_s": 0, "prompt_tokens": -3, "output_tokens": 2}\n' >"$work/negative.jsonl"
refused "negative.jsonl:1: prompt_tokens -3 is not at least 1" "$work/negative.jsonl"
printf 'arrival_s,prompt_tokens,output_tokens\n0,1000,100\n' >"$work/long.csv"
refused "long.csv:2: prompt_tokens 1000 + output_tokens 100 exceed the KV cache capacity of 1024" \
  "$work/long.csv"
refused "is the same file as the input --trace" "$work/trace.csv" --write-trace "$work/trace.csv"
refused "--trace predicts one configuration: give one value of batch" "$work/trace.csv" --batch 1,4
refused "--rates sets a generated trace's arrival rate: give --trace-gen" "$work/trace.csv" \
  --rates 1,2

# --rates: one row per rate, each the prediction of the trace generated at that rate alone.
gen=rate=100,requests=20,prompt=16:64,output=2/8,seed=7
"$bin" model "${common[@]}" --trace-gen "$gen" --rates 10,100,1000 --slo-ttft-ms 1 \
  --slo-tpot-ms 1 --json "$work/rates.json" | tee "$work/rates.log"
grep -Eq "^ridgeline model: 20 request\(s\) of --trace-gen .* at each of 3 arrival rates" \
  "$work/rates.log"
grep -Eq "^ +1000( +[0-9.]+){8} +[0-9]+$" "$work/rates.log"
"$bin" model "${common[@]}" --trace-gen "${gen/rate=100/rate=1000}" --slo-ttft-ms 1 \
  --slo-tpot-ms 1 --json "$work/at1000.json" >/dev/null
python3 - "$work/rates.json" "$work/at1000.json" <<'PY'
import json, sys
rates = json.load(open(sys.argv[1]))["rates"]
alone = json.load(open(sys.argv[2]))["latency"]
assert [r["rate_per_s"] for r in rates] == [10, 100, 1000], rates
assert all(r["requests"] == 20 for r in rates), rates
row = rates[2]
for metric in alone:
    for q in ("p50", "p95", "p99"):
        assert row[f"{metric['metric']}_{q}_ms"] == metric[f"{q}_ms"], (metric, row)
PY
if python3 -c "import matplotlib" 2>/dev/null; then
  (cd "$repo/scripts" && python3 -m ridgeline_analysis latency "$work/rates.json" \
    -o "$work/latency.png")
  [ -s "$work/latency.png" ]
fi
set +e
"$bin" model "${common[@]}" --rates 10 >"$work/bad.log" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "give --trace-gen" "$work/bad.log"
echo "serving trace ok"
