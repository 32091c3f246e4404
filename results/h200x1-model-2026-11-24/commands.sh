#!/usr/bin/env bash
# Every file of this directory, from the repository's top: predictions of `ridgeline model` from
# the roofs measured on one H200 (measured/roofs_nvlink.h5, this directory) and the link
# presets of models/hardware/h200-sxm.toml, with each op kind's efficiency calibrated on the
# two attributed single-GPU files of the same day (not on the sweeps validated below).
set -euo pipefail
bin=${RIDGELINE_BIN:-build/src/ridgeline}
src=results/h200x1-model-2026-11-24/measured
out=results/h200x1-model-2026-11-24
common=(--roofs "$src/roofs_nvlink.h5" --hardware models/hardware/h200-sxm.toml
        --calibrate "$src/attributed_decode_tp1.h5" --calibrate "$src/attributed_prefill_tp1.h5"
        --dtype bf16)

# The measured sweeps predicted again: the error table of README.md (without and with the
# calibration).
for f in "$src"/sweep_*_nvlink.h5; do
  name=$(basename "$f" .h5)
  "$bin" model --validate "$f" --out "$out/h5/validate_${name}_uncalibrated.h5" \
    >"$out/logs/validate_${name}_uncalibrated.txt"
  "$bin" model --validate "$f" --calibrate "$src/attributed_decode_tp1.h5" \
    --calibrate "$src/attributed_prefill_tp1.h5" --out "$out/h5/validate_${name}.h5" \
    >"$out/logs/validate_${name}.txt"
done

for model in gpt-h8192 llama3-70b; do
  # One node of 8 H200s over NVLink: TP 4 and 8.
  "$bin" model --config "models/$model.toml" "${common[@]}" --phase decode --layers 1 --tp 4,8 \
    --batch 1,16,64,256 --context 1024,8192,32768 \
    --out "$out/h5/${model}_decode_tp4-8_nvlink.h5" >"$out/logs/${model}_decode_tp4-8_nvlink.txt"
  "$bin" model --config "models/$model.toml" "${common[@]}" --phase prefill --layers 1 --tp 4,8 \
    --seq 512,2048,8192,16384 \
    --out "$out/h5/${model}_prefill_tp4-8_nvlink.h5" >"$out/logs/${model}_prefill_tp4-8_nvlink.txt"
  # Two nodes over InfiniBand NDR: TP 16 (the TP group crosses the nodes) and TP 8 x PP 2 (the
  # pipeline crosses them; 2 layers, 4 microbatches, so batches of 4 and more).
  for phase in decode prefill; do
    shape=(--batch 1,16,64 --context 1024,8192)
    pipelined=(--batch 16,64 --context 1024,8192)
    if [ "$phase" = prefill ]; then
      shape=(--seq 512,2048,8192)
      pipelined=(--batch 4 --seq 512,2048,8192)
    fi
    "$bin" model --config "models/$model.toml" "${common[@]}" --phase "$phase" --nodes 2 \
      --layers 1 --tp 16 "${shape[@]}" \
      --out "$out/h5/${model}_${phase}_tp16_2nodes_ib.h5" >"$out/logs/${model}_${phase}_tp16_2nodes_ib.txt"
    "$bin" model --config "models/$model.toml" "${common[@]}" --phase "$phase" --nodes 2 \
      --tp 8 --pp 2 --layers 2 --microbatches 4 "${pipelined[@]}" \
      --out "$out/h5/${model}_${phase}_tp8-pp2_2nodes_ib.h5" >"$out/logs/${model}_${phase}_tp8-pp2_2nodes_ib.txt"
  done
done

# The measured scaling curves with the calibrated predictions dashed beside them.
mkdir -p "$out/plots"
for pair in gpt-h8192_decode:context llama3-70b_decode:context gpt-h8192_prefill:seq \
            llama3-70b_prefill:seq; do
  name=${pair%%:*} axis=${pair##*:}
  (cd scripts && python3 -m ridgeline_analysis scaling "../$src/sweep_${name}_nvlink.h5" \
    --axis "$axis" --predicted "../$out/h5/validate_sweep_${name}_nvlink.h5" \
    -o "../$out/plots/scaling_${name}_${axis}.png" >/dev/null)
done
