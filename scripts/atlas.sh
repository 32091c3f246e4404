#!/usr/bin/env bash
# The crossover atlas of one node: where the interconnect replaces HBM or compute as the
# ceiling of the preset layers, over each transport. Per transport: the node's roofs, then per
# model the prefill, decode (CUDA graphs) and train steps at TP 1, 2, 4, ... (every power of two
# up to the node's ranks), every point measured ATLAS_REPEATS times with the points taking turns;
# the model's predictions past the node over NVLink (TP 8 in one node, 2, 4 and 8 nodes over
# InfiniBand)
# and its error on every measured point. scripts/atlas_report.py OUTDIR then writes the page's
# tables and pictures.
# Usage: scripts/atlas.sh OUTDIR [TRANSPORT...]   (default transports: nvlink host)
# Environment (defaults in brackets):
#   RIDGELINE_BIN [build/src/ridgeline]; MPIRUN [mpirun]; ATLAS_RANKS [the node's GPUs];
#   ATLAS_MODELS [llama3-8b llama3-70b gpt-h8192 llama3-405b]; ATLAS_PHASES [decode prefill train];
#   ATLAS_REPEATS [3]; ATLAS_SEQ [512,2048,8192,16384]; ATLAS_BATCH [1,16,64,256];
#   ATLAS_CONTEXT [1024,8192,32768]; ATLAS_TRAIN_SEQ [4096]; ATLAS_ARGS []: extra options of every
#   sweep; ATLAS_REPRO [1]: the first model's decode and prefill sweeps run a second time in the
#   same job, to show that they name the same crossovers. Decode runs with --graphs on GPUs.
#   ATLAS_HARDWARE [h200-sxm]: the models/hardware file whose link presets the predictions past
#   the node use; ATLAS_STAGES [measure predict]: `predict` alone predicts and validates from the files a
#   `measure` stage left in OUTDIR (on any machine: it needs no GPU). ATLAS_DEADLINE_S []: steps
#   that would start later than this many seconds after the start are skipped (and reported), so
#   that a job with a time limit ends with its files.
#   ATLAS_CUSTOM_AR [llama3-8b llama3-70b]: on GPUs over NVLink, these models' decode steps are
#   also measured with the custom all-reduce where it is the faster one (--allreduce auto, from
#   all-reduce tables of every group size measured first, allreduce_g<G>_nvlink.h5), right after
#   the same grid with NCCL's (TP 2 and up), in customar_<model>_decode_{nccl,auto}_nvlink.h5,
#   after the phases of ATLAS_MODELS; "" for none.
# NVLink multicast stays off in every process (NCCL_NVLS_ENABLE=0).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: atlas.sh OUTDIR [TRANSPORT...]}
shift
transports=("$@")
[ "${#transports[@]}" -gt 0 ] || transports=(nvlink host)
bin=${RIDGELINE_BIN:-$repo/build/src/ridgeline}
read -r -a mpirun <<<"${MPIRUN:-mpirun}"
export NCCL_NVLS_ENABLE=0 OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
gpus=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L | wc -l)
fi
ranks=${ATLAS_RANKS:-$gpus}
[ "$ranks" != 0 ] || ranks=2
[[ $ranks =~ ^[1-9][0-9]*$ ]] || { echo "atlas: ATLAS_RANKS must be a positive integer" >&2; exit 2; }
repeats=${ATLAS_REPEATS:-3}
[[ $repeats =~ ^[1-9][0-9]*$ ]] || { echo "atlas: ATLAS_REPEATS must be a positive integer" >&2; exit 2; }
read -r -a models <<<"${ATLAS_MODELS:-llama3-8b llama3-70b gpt-h8192 llama3-405b}"
read -r -a phases <<<"${ATLAS_PHASES:-decode prefill train}"
read -r -a extra <<<"${ATLAS_ARGS:-}"
transports_measured=("${transports[@]}")
tps=1 t=2
while [ "$t" -le "$ranks" ]; do tps=$tps,$t; t=$((t * 2)); done
mkdir -p "$out/h5" "$out/logs"

failed=0
read -r -a stages <<<"${ATLAS_STAGES:-measure predict}"
deadline=${ATLAS_DEADLINE_S:-}
[ -z "$deadline" ] || [[ $deadline =~ ^[0-9]+$ ]] ||
  { echo "atlas: ATLAS_DEADLINE_S must be a whole number of seconds" >&2; exit 2; }
# step NAME COMMAND...: runs one step of the campaign with its log, and records its status.
step() {
  local name=$1
  shift
  if [ -n "$deadline" ] && [ "$SECONDS" -ge "$deadline" ]; then
    echo "atlas: $name skipped (past ATLAS_DEADLINE_S=$deadline)"
    echo "$name skipped 0" >>"$out/steps.txt"
    failed=$((failed + 1))
    return
  fi
  local start=$SECONDS rc=0
  "$@" >"$out/logs/$name.log" 2>&1 || rc=$?
  echo "atlas: $name rc=$rc ($((SECONDS - start)) s)"
  echo "$name $rc $((SECONDS - start))" >>"$out/steps.txt"
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
}

# sweep_step NAME MODEL ARGS...: one sweep of MODEL over the current transport and its roofs,
# with ARGS (layers, grid, kernels), written to h5/NAME.h5.
sweep_step() {
  local name=$1 model=$2
  shift 2
  step "$name" "${mpirun[@]}" -np "$ranks" "$bin" sweep --transport "$transport" --roofs "$roofs" \
    --config "$repo/models/$model.toml" "$@" "${extra[@]}" --repeats "$repeats" --timeout 300 \
    --quiet --out "$out/h5/$name.h5"
}

# phase_args PHASE: the grid and options of one phase's sweep.
phase_args() {
  case $1 in
    prefill) echo "--phase prefill --batch 1 --seq ${ATLAS_SEQ:-512,2048,8192,16384} --warmup 2 --iters 10" ;;
    decode) echo "--phase decode --batch ${ATLAS_BATCH:-1,16,64,256} --context ${ATLAS_CONTEXT:-1024,8192,32768} --warmup 5 --iters 30" ;;
    # The global batch is shared by the data-parallel replicas (ranks / tp): one sequence each at
    # TP1, all of them in one replica at the node's largest TP.
    train) echo "--phase train --batch $ranks --seq ${ATLAS_TRAIN_SEQ:-4096} --warmup 2 --iters 5" ;;
  esac
}

touch "$out/steps.txt"
if [[ " ${stages[*]} " == *" measure "* ]]; then
  # The machine and stack the measurements ran on (a predict stage elsewhere leaves them).
  "${mpirun[@]}" -np "$ranks" "$bin" env >"$out/env.txt" 2>&1 || true
  { command -v nvidia-smi >/dev/null && nvidia-smi && nvidia-smi topo -m; } >"$out/nvidia-smi.txt" 2>&1 || true
else
  transports_measured=()
fi
read -r -a custom_ar <<<"${ATLAS_CUSTOM_AR-llama3-8b llama3-70b}"
for transport in "${transports_measured[@]}"; do
  roofs=$out/h5/roofs_$transport.h5
  step "roofs_$transport" "${mpirun[@]}" -np "$ranks" "$bin" roofs --transport "$transport" \
    --timeout 300 --out "$roofs"
  # The custom all-reduce against NCCL's at every group size, timed in CUDA graphs as decode
  # replays them, up to the largest decode all-reduce (256 tokens x 16384 x 2 B = 8 MiB).
  ar_tables=""
  if [ "$transport" = nvlink ] && [ "$gpus" != 0 ] && [ "$ranks" -ge 2 ] &&
    [ "${#custom_ar[@]}" -gt 0 ] && [[ " ${phases[*]} " == *" decode "* ]]; then
    g=2
    while [ "$g" -le "$ranks" ]; do
      table=$out/h5/allreduce_g${g}_$transport.h5
      step "allreduce_g${g}_$transport" "${mpirun[@]}" -np "$ranks" "$bin" collectives \
        --collectives all_reduce --allreduce nccl,oneshot,push,push-ll,twoshot --graph \
        --group-size "$g" -b 1K -e 16M --transport "$transport" --timeout 300 --out "$table"
      [ ! -f "$table" ] || ar_tables=${ar_tables:+$ar_tables,}$table
      g=$((g * 2))
    done
  fi
  # Phase by phase, every model before the next phase: a job cut short keeps whole phases.
  for phase in "${phases[@]}"; do
    for model in "${models[@]}"; do
      read -r -a grid <<<"$(phase_args "$phase")"
      kernels=()
      # Decode's ceiling is often launch overhead: on GPUs it runs as a replayed CUDA graph.
      [ "$phase" != decode ] || [ "$gpus" = 0 ] || kernels=(--graphs)
      name=sweep_${model}_${phase}_$transport
      sweep_step "$name" "$model" --layers 1 --tp "$tps" "${grid[@]}" "${kernels[@]}"
      if [ "${ATLAS_REPRO:-1}" = 1 ] && [ "$model" = "${models[0]}" ] && [ "$phase" != train ]; then
        sweep_step "${name}_again" "$model" --layers 1 --tp "$tps" "${grid[@]}" "${kernels[@]}"
      fi
    done
  done
  # Decode with NCCL's all-reduce, then the same grid with the custom one where it is faster.
  if [ -n "$ar_tables" ]; then
    read -r -a grid <<<"$(phase_args decode)"
    for model in "${custom_ar[@]}"; do
      for ar in nccl auto; do
        with_table=()
        [ "$ar" = nccl ] || with_table=(--allreduce-table "$ar_tables")
        name=customar_${model}_decode_${ar}_$transport
        sweep_step "$name" "$model" --layers 1 --tp "${tps#1,}" "${grid[@]}" --graphs \
          --allreduce "$ar" "${with_table[@]}"
      done
    done
  fi
  # Train with pipeline parallelism beside TP at the same ranks: TP ranks/2 x PP2.
  if [ "$ranks" -ge 4 ] && [[ " ${phases[*]} " == *" train "* ]]; then
    read -r -a grid <<<"$(phase_args train)"
    for model in "${models[@]}"; do
      name=sweep_${model}_train_pp2_$transport
      sweep_step "$name" "$model" --layers 2 --pp 2 --microbatches "$ranks" --tp "$((ranks / 2))" \
        "${grid[@]}"
    done
  fi
done

# The model's error on every measured point, from each file's own roofs.
[[ " ${stages[*]} " == *" predict "* ]] || transports=()
# Calibrated, each model's file by the other models' files of its phase and transport (never by
# itself): every op kind's efficiency and the eager gaps they measured.
for path in "$out"/h5/sweep_*.h5; do
  [ "${#transports[@]}" -gt 0 ] && [ -f "$path" ] || continue
  name=$(basename "$path" .h5)
  step "validate_$name" "$bin" model --validate "$path" --json "$out/h5/validate_$name.json"
  # A layout (_pp2) is calibrated by the other models' files of that layout, a repeated sweep
  # (_again) by the other models' first ones.
  [[ $name =~ ^sweep_(.+)_(prefill|decode|train)(_pp[0-9]+)?_([a-z]+)(_again)?$ ]] || continue
  calibrate=()
  for other in "${models[@]}"; do
    peer=$out/h5/sweep_${other}_${BASH_REMATCH[2]}${BASH_REMATCH[3]}_${BASH_REMATCH[4]}.h5
    [ "$other" = "${BASH_REMATCH[1]}" ] || [ ! -f "$peer" ] || calibrate+=(--calibrate "$peer")
  done
  [ "${#calibrate[@]}" -eq 0 ] ||
    step "calibrated_$name" "$bin" model --validate "$path" "${calibrate[@]}" \
      --json "$out/h5/calibrated_$name.json"
done
# Past the node, from the measured roofs where they hold the group, else the hardware file's
# link presets (models/hardware/$ATLAS_HARDWARE.toml, data-sheet figures, derated as it says):
# TP 2x the node's ranks in one node over NVLink, and TP across 2, 4 and 8 nodes of this node's
# size over InfiniBand NDR. Only for NVLink: no preset stands for the host path beyond the
# groups its roofs measured.
hardware=$repo/models/hardware/${ATLAS_HARDWARE:-h200-sxm}.toml
for transport in "${transports[@]}"; do
  roofs=$out/h5/roofs_$transport.h5
  [ -f "$roofs" ] && [ "$transport" != host ] && [ "$transport" != net ] || continue
  for model in "${models[@]}"; do
    for phase in prefill decode; do
      [[ " ${phases[*]} " == *" $phase "* ]] || continue
      read -r -a grid <<<"$(phase_args "$phase")"
      name=predicted_${model}_${phase}_$transport
      step "${name}_tp$((ranks * 2))" "$bin" model --roofs "$roofs" --hardware "$hardware" \
        --link nvlink --config "$repo/models/$model.toml" --layers 1 "${grid[@]}" \
        --tp "$((ranks * 2))" --gpus-per-node "$((ranks * 2))" --nodes 1 \
        --out "$out/h5/${name}_tp$((ranks * 2)).h5"
      step "${name}_nodes" "$bin" model --roofs "$roofs" --hardware "$hardware" --link nvlink \
        --inter-node ib-ndr --config "$repo/models/$model.toml" --layers 1 "${grid[@]}" \
        --tp "$((ranks * 2)),$((ranks * 4)),$((ranks * 8))" --gpus-per-node "$ranks" --nodes 8 \
        --out "$out/h5/${name}_nodes.h5"
    done
  done
done
echo "atlas: $(wc -l <"$out/steps.txt") steps, $failed failed; files in $out/h5"
[ "$failed" -eq 0 ]
