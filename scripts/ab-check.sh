#!/usr/bin/env bash
# Two builds of ridgeline on the same workloads, taking turns (A B, B A, A B, ...), so that a
# change that should move no figure can be shown to move none: prefill, decode with CUDA graphs,
# the train step (one rank, TP 2 under none and async, and two pipeline stages), and the overlap
# strategies at TP 2 (split:2 in cases of its own, in prefill and train, so that the cases above
# stay what earlier tables ran). Every run writes its --json summary; scripts/ab_table.py prints, per
# workload and strategy, each build's median step p50 with the spread of its turns, their ratio,
# and whether the output checksums agree.
#
#   scripts/ab-check.sh OUTDIR A_BINARY B_BINARY
#
# AB_TURNS (default 3) turns per build; AB_MODEL (default llama3-8b) the preset; AB_CASES narrows
# the workloads (space-separated names of the list below); AB_RANKS (default 2) the ranks of the
# multi-rank workloads (skipped where fewer GPUs are visible); MPIRUN the launcher. NVLink
# multicast stays off.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: ab-check.sh OUTDIR A_BINARY B_BINARY}
bin_a=${2:?usage: ab-check.sh OUTDIR A_BINARY B_BINARY}
bin_b=${3:?usage: ab-check.sh OUTDIR A_BINARY B_BINARY}
turns=${AB_TURNS:-3}
model=${AB_MODEL:-llama3-8b}
ranks=${AB_RANKS:-2}
for v in "$turns" "$ranks"; do
  [[ $v =~ ^[1-9][0-9]{0,2}$ ]] || { echo "ab-check: AB_TURNS and AB_RANKS take 1..999" >&2; exit 2; }
done
[[ -f $repo/models/$model.toml ]] || { echo "ab-check: no preset models/$model.toml" >&2; exit 2; }
for b in "$bin_a" "$bin_b"; do
  [[ -x $b ]] || { echo "ab-check: $b is not an executable" >&2; exit 2; }
done
export NCCL_NVLS_ENABLE=0
mkdir -p "$out"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
# MPIRUN: the launcher and its options (default mpirun; scripts/gpu-check.sh passes its own).
read -r -a mpirun <<<"${MPIRUN:-mpirun --bind-to none}"
mpirun+=(--oversubscribe -x NCCL_NVLS_ENABLE)
[[ $(id -u) == 0 && -z ${MPIRUN:-} ]] && mpirun+=(--allow-run-as-root)
cfg=(--config "$repo/models/$model.toml" --roofs none --warmup 5 --iters 30)

# name | ranks | options
cases=(
  "prefill|1|--phase prefill --layers 2 --batch 1 --seq 4096"
  "decode_graphs|1|--phase decode --layers 4 --batch 16 --context 4096 --graphs"
  "train|1|--phase train --layers 2 --batch 1 --seq 4096"
  "train_tp|$ranks|--phase train --layers 2 --tp $ranks --batch 1 --seq 4096 --overlap none,async"
  "train_pp|$ranks|--phase train --layers 2 --pp $ranks --microbatches 4 --schedule 1f1b --batch 4 --seq 2048"
  "overlap_tp|$ranks|--phase prefill --layers 1 --tp $ranks --batch 1 --seq 4096 --overlap none,async,chunked:4,ce-ring,ce-ring:2"
  "overlap_tp_split|$ranks|--phase prefill --layers 1 --tp $ranks --batch 1 --seq 4096 --overlap none,split:2"
  "train_tp_split|$ranks|--phase train --layers 2 --tp $ranks --batch 2 --seq 2048 --overlap none,split:2"
)
wanted=" ${AB_CASES:-prefill decode_graphs train train_tp train_pp overlap_tp overlap_tp_split train_tp_split} "
status=0
for ((t = 1; t <= turns; t++)); do
  # A first on odd turns, B first on even ones.
  order=(a b)
  ((t % 2 == 0)) && order=(b a)
  for c in "${cases[@]}"; do
    IFS='|' read -r name np opts <<<"$c"
    [[ $wanted == *" $name "* ]] || continue
    if ((np > 1 && gpus < np)); then
      echo "ab-check: $name skipped: $np ranks, $gpus GPUs visible" >>"$out/skipped.txt"
      continue
    fi
    for who in "${order[@]}"; do
      b=$bin_a
      [[ $who == b ]] && b=$bin_b
      stem="$out/${name}.${who}.t${t}"
      # shellcheck disable=SC2086
      if ! "${mpirun[@]}" -np "$np" "$b" run "${cfg[@]}" $opts --out "$stem.h5" --json "$stem.json" \
        >"$stem.log" 2>&1; then
        echo "ab-check: $name ($who, turn $t) failed: $stem.log" >&2
        status=1
      fi
      rm -f "$stem".*h5 # the file and, in the per-node layout, its node files
    done
  done
done
python3 "$repo/scripts/ab_table.py" "$out" | tee "$out/table.md"
exit $status
