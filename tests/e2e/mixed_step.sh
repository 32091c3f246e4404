#!/usr/bin/env bash
# Mixed steps end to end on the host backend: prefill chunks after cached tokens beside decode
# tokens at ragged contexts, under tp 2 with two strategies, every step checked against the
# TP=1 model; the step's mix in the console summary and in /summary of a valid file, its ops
# under the work model's names, which `model --validate` predicts again.
# Usage: mixed_step.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mpiexec -n 2 --oversubscribe "$bin" run --config "$repo/models/tiny.toml" --phase mixed \
  --seq 256 --prefill-seqs 2 --chunk 32 --chunk-context 40 --decode-batch 6 \
  --context-dist uniform:1:200 --context-seed 3 --tp 2 --overlap none,async --warmup 1 \
  --iters 3 --roofs none --check on --out "$work/mixed.h5" --json "$work/mixed.json" |
  tee "$work/mixed.log"
grep -q "^check: passed" "$work/mixed.log"
grep -q "^mix_prefill_tokens: 64" "$work/mixed.log"
grep -q "^mix_decode_tokens: 6" "$work/mixed.log"
grep -q "attention_prefill" "$work/mixed.log"
grep -q "attention_decode" "$work/mixed.log"
grep -q '"mix_context_max": ' "$work/mixed.json"
"$bin" validate "$work/mixed.h5"
"$bin" report "$work/mixed.h5" >"$work/mixed.report"
grep -q "attention_decode" "$work/mixed.report"
# The model predicts the measured step with the ops the run attributed.
"$bin" model --validate "$work/mixed.h5" --hardware "$repo/models/hardware/h200-sxm.toml" \
  >"$work/mixed.model"
grep -q "attention_prefill" "$work/mixed.model"
if command -v h5dump >/dev/null; then
  h5dump -A "$work/mixed.h5" >"$work/mixed.h5dump"
  grep -q 'ATTRIBUTE "mix_decode_sequences"' "$work/mixed.h5dump"
  grep -q 'ATTRIBUTE "context_dist"' "$work/mixed.h5dump"
fi

# Decode tokens alone at listed contexts, at tp 1 (the run is its own reference).
mpiexec -n 1 "$bin" run --config "$repo/models/tiny.toml" --phase mixed --prefill-seqs 0 \
  --contexts 5,50,17 --warmup 1 --iters 2 --roofs none --out "$work/decode.h5" |
  tee "$work/decode.log"
grep -q "^mix_context_min: 5" "$work/decode.log"
grep -q "^mix_context_max: 50" "$work/decode.log"
"$bin" validate "$work/decode.h5"
echo "e2e mixed step ok"
