#!/usr/bin/env bash
# Bad input on 2 ranks, for every command: a given value an option refuses (never replaced by
# a default), a bad --config file (unknown key or table, a malformed line), a list with an
# empty or repeated item, an unknown option. For each: every rank exits 2 (no hang: within 60
# seconds, however loaded the machine), the ranks print exactly one line in all (on stderr, the
# error, with the expected text), and no output file is written.
# Usage: bad_input.sh RIDGELINE_BIN REPO_DIR
set -uo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"  # a default output path (results/...) would land here

printf '# a preset with a typo\n[run]\nhidden = 256\nheads = 8\nkv_heads = 4\n' >typo.toml
printf '[runn]\nlayers = 2\n' >table.toml
printf '[run]\nlayers = 2\n[[[[\n' >junk.toml
printf '[run]\nlayers = 0\n' >zero.toml

failures=0
# check EXPECTED_TEXT COMMAND ARGS...
check() {
  local expected=$1
  shift
  local case="$*"
  rm -rf "$work/ranks" && mkdir "$work/ranks"
  # Each rank's exit code and output, apart (mpiexec reports one code, and ends the other
  # ranks once one fails).
  timeout 60 mpiexec -n 2 --oversubscribe bash -c \
    'r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-x}}; "$0" "$@" >"ranks/out.$r" 2>"ranks/err.$r"; echo $? >"ranks/rc.$r"' \
    "$bin" "$@" >"$work/mpiexec.log" 2>&1
  local status=$? problem=""
  [ "$status" -ne 124 ] || problem="the job hung"
  for r in 0 1; do
    local rc
    rc=$(cat "$work/ranks/rc.$r" 2>/dev/null || echo none)
    [ "$rc" = 2 ] || problem="${problem:+$problem; }rank $r exited $rc, not 2"
  done
  local lines
  lines=$(cat "$work"/ranks/err.* | grep -c .)
  [ "$lines" -eq 1 ] || problem="${problem:+$problem; }$lines lines on stderr, not 1"
  grep -qF -- "$expected" "$work"/ranks/err.* || problem="${problem:+$problem; }no '$expected' on stderr"
  [ -z "$(cat "$work"/ranks/out.*)" ] || problem="${problem:+$problem; }output on stdout"
  if [ -n "$(find "$work" -name '*.h5*')" ]; then problem="${problem:+$problem; }an output file was written"; fi
  [ ! -e "$work/results" ] || problem="${problem:+$problem; }results/ was created"
  if [ -n "$problem" ]; then
    echo "FAIL [$case]: $problem"
    cat "$work"/ranks/err.* "$work"/ranks/out.* | sed 's/^/    /'
    failures=$((failures + 1))
  else
    echo "ok   [$case]: $(cat "$work"/ranks/err.*)"
  fi
  rm -rf "$work"/*.h5 "$work"/*.h5.tmp.* "$work/results"
}

# Options that make each bad case a job that would otherwise run (and write its file) here.
small=(--dp 2 --hidden 64 --heads 4 --warmup 0 --iters 1 --roofs none --out "$work/x.h5")
# Refused by validation rather than while parsing: the backend named, so that nothing else is said.
steps=(--dp 2 --hidden 64 --heads 4 --warmup 0 --roofs none --backend host --out "$work/x.h5")
tiny=(--config "$repo/models/tiny.toml" --dp 2 --warmup 0 --iters 1 --roofs none --out "$work/x.h5")
sweep=(--hidden 64 --heads 4 --warmup 0 --iters 1 --roofs none --out "$work/x.h5")
coll=(--max-bytes 1K --iters 1 --warmup 0 --out "$work/x.h5")
check "--seq: expected an integer >= 1, got '0'" run "${small[@]}" --seq 0
check "--batch: expected an integer >= 1, got '0'" run "${small[@]}" --batch 0
check "--layers: expected an integer >= 1, got '0'" run "${tiny[@]}" --layers 0
check "--ffn-hidden: expected an integer >= 1" run "${tiny[@]}" --ffn-hidden 0
check "--hidden: expected an integer >= 1, got '-256'" run "${tiny[@]}" --hidden -256
check "--context: expected an integer >= 0, got '-5'" run "${small[@]}" --phase decode --context -5
check "--iters: expected an integer from 1" run "${small[@]}" --iters 0
check "--decode-steps: expected an integer >= 0, got '-3'" run "${small[@]}" --phase decode --decode-steps -3
check "--decode-steps 4 generates tokens: it needs --phase decode" run "${steps[@]}" --decode-steps 4
check "is not a multiple of --decode-steps 4" run "${steps[@]}" --phase decode --decode-steps 4 --iters 6
check "KV cache rows (batch x (context + decode steps))" run "${steps[@]}" --phase decode --batch 64 --decode-steps 100000000
check "--top-k 9 is above --experts 8" run "${steps[@]}" --mlp swiglu --experts 8 --top-k 9 --expert-ffn-hidden 64
check "--experts 8 is not divisible by --ep 3" run "${steps[@]}" --mlp swiglu --experts 8 --top-k 2 --expert-ffn-hidden 64 --ep 3
# sweep --ep: every degree must divide the ranks and the experts, and the model must have experts.
moe=(--backend host --mlp swiglu --top-k 1 --expert-ffn-hidden 64)
check "--ep 4 does not divide the 2 ranks" sweep "${sweep[@]}" "${moe[@]}" --experts 8 --ep 1,4
check "--ep 2 does not divide the 3 experts" sweep "${sweep[@]}" "${moe[@]}" --experts 3 --ep 1,2
check "--ep 1,2: the expert-parallel degree splits an MoE model's experts; this model is dense" sweep "${sweep[@]}" --backend host --ep 1,2
check "--overlap: 'none' given twice" run "${small[@]}" --overlap none,none
check "--overlap: empty item" run "${small[@]}" --overlap async,
check "--model: empty value" run "${small[@]}" --model ""
check "typo.toml:5: unknown key 'kv_heads' in [run]" run --config typo.toml --dp 2 --warmup 0 --iters 1 --roofs none --out "$work/x.h5"
check "table.toml:1: unknown table [runn]" run --config table.toml "${small[@]}"
check "junk.toml:3: malformed line '[[[['" run --config junk.toml "${small[@]}"
check "zero.toml:2: layers = 0: expected an integer >= 1" sweep --config zero.toml "${sweep[@]}"
check "--tp: expected an integer from 1 to 2147483647, got '0'" sweep "${sweep[@]}" --tp 1,0
check "--batch: '1' given twice" sweep "${sweep[@]}" --batch 1,4,1
check "--dp: a sweep runs each point" sweep "${sweep[@]}" --dp 2
check "--attention: a sweep point runs one implementation" sweep "${sweep[@]}" --attention fused,naive
check "--prefill-share moves a mixed step's tokens between prefill chunks and decode tokens: it needs --phase mixed (got --phase prefill)" sweep "${sweep[@]}" --prefill-share 0,0.5
check "--prefill-share: expected a number from 0 to 1 (the prefill share of the step's tokens), got '1.5'" sweep "${sweep[@]}" --phase mixed --prefill-share 0,1.5
check "--prefill-share: expected a number from 0 to 1 (the prefill share of the step's tokens), got '-0.25'" run "${small[@]}" --phase mixed --prefill-share -0.25
check "--group-size: expected an integer from 1" collectives "${coll[@]}" --group-size 0
check "--collectives: empty item" collectives "${coll[@]}" --collectives all_reduce,
check "--nccl-max-ctas: expected -1" collectives "${coll[@]}" --nccl-max-ctas -5
check "--timeout: expected a number > 0" collectives "${coll[@]}" --timeout 0
check "unknown all-reduce 'ring' (expected nccl, oneshot, push, push-ll, twoshot)" collectives "${coll[@]}" --allreduce nccl,ring
check "--allreduce oneshot: the custom all-reduce runs on GPUs (needs the cuda backend)" collectives "${coll[@]}" --allreduce oneshot
check "--buffers symmetric registers NCCL windows: needs the cuda backend" collectives "${coll[@]}" --buffers ordinary,symmetric
check "--nccl-cta-policy needs the cuda backend (NCCL)" collectives "${coll[@]}" --nccl-cta-policy efficiency
check "--dtypes: 'fp32' given twice" roofs --dtypes fp32,fp32 --quick --out "$work/x.h5"
check "--warmup: expected an integer from 0" collectives "${coll[@]}" --warmup -1
check "--fail-above: expected a number > 0, got '-1'" compare a.h5 b.h5 --fail-above -1
check "files: 'a.h5' given twice" report a.h5 a.h5
check "The following argument was not expected: --bogus" run "${small[@]}" --bogus

# mpiexec's own exit code is 2 too.
timeout 60 mpiexec -n 2 --oversubscribe "$bin" run "${small[@]}" --seq 0 >/dev/null 2>&1
status=$?
[ "$status" -eq 2 ] || { echo "FAIL: mpiexec exited $status, not 2"; failures=$((failures + 1)); }

[ "$failures" -eq 0 ] || { echo "$failures case(s) failed" >&2; exit 1; }
echo "e2e bad input ok"
