#!/usr/bin/env bash
# A growing KV cache end to end on the host backend: --decode-steps N under tp 2 and pp 2, each
# step's output checked against the TP=1 model at the same position, the per-token table in the
# console summary and the JSON one, and /summary/decode_context and decode_bins in a valid file.
# Usage: decode_steps.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run NAME NP EXPECTED_CONTEXTS [options...]
run() {
  local name=$1 np=$2 expected=$3
  shift 3
  mpiexec -n "$np" --oversubscribe "$bin" run --config "$repo/models/tiny.toml" --phase decode \
    --context 20 --decode-steps 6 --warmup 2 --roofs none --check on --out "$work/$name.h5" "$@" \
    | tee "$work/$name.log"
  grep -q "^check: passed" "$work/$name.log"
  grep -q "^check_steps: 6" "$work/$name.log"
  grep -q "^per token (ms): p50" "$work/$name.log"
  # The context column spans the keys of the first to the last step: 21 to 26.
  grep -q "context 21 to 26 keys" "$work/$name.log"
  "$bin" validate "$work/$name.h5"
  "$bin" report "$work/$name.h5" >"$work/$name.report"
  grep -q "^per token (ms): p50" "$work/$name.report"
  if command -v h5dump >/dev/null; then
    local ctx
    ctx=$(h5dump -d /summary/decode_context -y -w 0 "$work/$name.h5" | tr -s ' ,\n' ' ' |
      grep -oE '[0-9]+( [0-9]+)*' | tail -1)
    [ "$ctx" = "$expected" ] || { echo "decode_context: '$ctx', expected '$expected'" >&2; exit 1; }
    h5dump -H "$work/$name.h5" >"$work/$name.h5dump"
    grep -q 'DATASET "decode_bins"' "$work/$name.h5dump"
  fi
}

run tp2 2 "21 22 23 24 25 26 21 22 23 24 25 26" --tp 2 --iters 12 --json "$work/tp2.json"
# The JSON summary carries the same per-context table.
grep -q '"decode none": \[' "$work/tp2.json"
run pp2 2 "21 22 23 24 25 26" --pp 2 --microbatches 2 --overlap none,async
echo "e2e decode steps ok"
