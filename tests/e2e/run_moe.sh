#!/usr/bin/env bash
# MoE layers executed end to end on the host backend: Mixtral with the experts over 2 ranks
# (--ep 2, Zipf routing), Qwen3-MoE with two EP groups of 2 in 4 ranks, and DeepSeek-V3 (a
# shared expert, sigmoid gating) decoding with the router's choice; each checked against one
# rank computing every expert, its dispatch and combine timed as ops, the load imbalance in the
# console and the file, and a file both validators accept; EP x TP layouts (TP 2 with EP 2 and
# EP 4); then a sweep of two such points.
# Usage: run_moe.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
small=(--layers 1 --hidden 256 --heads 8 --kv-heads 2 --expert-ffn-hidden 128 --backend host
  --warmup 1 --iters 2 --roofs none --check on)

# run NAME NP PRESET [options...]
run() {
  local name=$1 np=$2 preset=$3
  shift 3
  mpiexec -n "$np" --oversubscribe "$bin" run --config "$repo/models/$preset.toml" "${small[@]}" \
    --out "$work/$name.h5" "$@" | tee "$work/$name.log"
  grep -q "^check: passed" "$work/$name.log"
  grep -Eq "^ridgeline: MoE ep 2, routing [a-z:0-9.]+: rows per EP rank max / mean" "$work/$name.log"
  grep -Eq "^moe_rank_imbalance: [0-9.]+" "$work/$name.log"
  for op in moe_router_gemm moe_dispatch moe_experts_gemm moe_combine; do
    grep -Eq "^$op +(gemm|collective) " "$work/$name.log" || { echo "no $op row" >&2; exit 1; }
  done
  "$bin" validate "$work/$name.h5"
  "$bin" report "$work/$name.h5" >"$work/$name.report"
  grep -q "^moe_dispatch " "$work/$name.report"
  if python3 -c "import h5py, numpy" 2>/dev/null; then
    PYTHONPATH="$repo/scripts" python3 -m ridgeline_analysis validate "$work/$name.h5"
  fi
}

run mixtral 2 mixtral-8x7b --seq 32 --batch 2 --dp 2 --ep 2 --routing zipf:1.2 --routing-seed 3
grep -q "^moe_routing: zipf:1.2" "$work/mixtral.log"
run qwen 4 qwen3-moe --seq 16 --batch 1 --dp 4 --ep 2 --routing uniform
grep -q "^moe_rank_imbalance: 1$" "$work/qwen.log"
run deepseek 2 deepseek-v3 --ffn-hidden 256 --phase decode --context 16 --batch 4 --dp 2 --ep 2
grep -q "^moe_shared_gemm " "$work/deepseek.log"
# EP x TP: the attention at TP 2, each rank routing its half of its TP group's tokens; EP 2 on
# the TP group itself (the blocks all-gathered), and EP 4 over two TP groups under sequence
# parallelism (no gather).
run eptp 2 mixtral-8x7b --seq 32 --batch 2 --tp 2 --ep 2 --routing zipf:1.2 --overlap none,async
grep -Eq "^moe_allgather +collective " "$work/eptp.log"
[ "$(grep -c "^check: passed" "$work/eptp.log")" -eq 2 ]
mpiexec -n 4 --oversubscribe "$bin" run --config "$repo/models/qwen3-moe.toml" "${small[@]}" \
  --seq 16 --batch 2 --tp 2 --dp 2 --ep 4 --sequence-parallel --out "$work/eptp4.h5" |
  tee "$work/eptp4.log"
grep -q "^check: passed" "$work/eptp4.log"
grep -q "^ridgeline: MoE ep 4, routing router" "$work/eptp4.log"
if grep -q "^moe_allgather " "$work/eptp4.log"; then echo "a gather under sequence parallelism" >&2; exit 1; fi
"$bin" validate "$work/eptp4.h5"
# sweep runs each point the same way.
mpiexec -n 2 --oversubscribe "$bin" sweep --config "$repo/models/mixtral-8x7b.toml" "${small[@]}" \
  --seq 16,32 --batch 1 --ep 2 --routing uniform --repeats 1 --out "$work/sweep.h5" | tee "$work/sweep.log"
[ "$(grep -c "^ridgeline: MoE ep 2, routing uniform" "$work/sweep.log")" -eq 2 ]
"$bin" validate "$work/sweep.h5"
echo "run_moe: ok"
