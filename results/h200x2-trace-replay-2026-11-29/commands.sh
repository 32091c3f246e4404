#!/usr/bin/env bash
# How this directory was made. On 2 x H200 (NV18), from the repository root after
# scripts/build.sh build-gpu, NCCL_NVLS_ENABLE=0 in every process (the device part, job 1):
# calibration points and trace runs at TP 1 and TP 2. Job 2, on the final code, ran
# `commands.sh device2`: a batch-16 decode step three ways at TP 1 and 2, taking turns, and one
# TP 2 trace run again. The model part runs on any machine (the model is analytic): extract
# raw-h5.tar.xz here and run it with BIN, a build of the commit to be shown.
set -u
export NCCL_NVLS_ENABLE=0
L="--config models/llama3-8b.toml"
S="--token-budget 2048 --chunk 512 --max-batch 64 --slo-ttft-ms 500 --slo-tpot-ms 50"
R=build-gpu/src/ridgeline
if [ "${1:-}" = device ]; then
  for tp in 1 2; do
    mp="mpirun -np $tp --bind-to none -x NCCL_NVLS_ENABLE"
    $mp $R run $L --phase decode --batch 16 --context 1024 --tp $tp --warmup 3 --iters 20 \
      --out cal_decode_tp$tp.h5 --quiet
    $mp $R run $L --phase prefill --batch 1 --seq 1024 --tp $tp --warmup 3 --iters 20 \
      --out cal_prefill_tp$tp.h5 --quiet
    for rate in 16 32 48; do
      $mp $R run $L --phase mixed --seq 2048 --tp $tp --warmup 3 --iters 10 \
        --trace-gen rate=$rate,requests=200,prompt=128:1024,output=32:256,seed=1 $S \
        --out trace_tp${tp}_r$rate.h5 --json trace_tp${tp}_r$rate.json --quiet
    done
  done
  exit 0
fi
if [ "${1:-}" = device2 ]; then
  for turn in 1 2; do
    for tp in 1 2; do
      mp="mpirun -np $tp --bind-to none -x NCCL_NVLS_ENABLE"
      C="$L --warmup 3 --iters 20 --quiet --tp $tp"
      $mp $R run $C --phase decode --batch 16 --context 1024 --out dec_tp${tp}_t$turn.h5
      $mp $R run $C --phase mixed --prefill-seqs 0 --decode-batch 16 --context 1024 --seq 2048 \
        --out mixu_tp${tp}_t$turn.h5
      $mp $R run $C --phase mixed --prefill-seqs 0 --decode-batch 16 \
        --context-dist uniform:512:1536 --seq 2048 --out mixr_tp${tp}_t$turn.h5
    done
  done
  mpirun -np 2 --bind-to none -x NCCL_NVLS_ENABLE $R run $L --phase mixed --seq 2048 --tp 2 \
    --warmup 3 --iters 10 --trace-gen rate=32,requests=200,prompt=128:1024,output=32:256,seed=1 \
    $S --out trace_tp2_r32.h5 --json trace_tp2_r32.json --quiet
  exit 0
fi
BIN=${1:?usage: commands.sh BIN (model part), commands.sh device or commands.sh device2}
OUTDIR=${2:-model/after}
mkdir -p "$OUTDIR"
for tp in 1 2; do
  $BIN model --validate h5/job1/cal_decode_tp$tp.h5 --calibrate h5/job1/cal_decode_tp$tp.h5 \
    --calibrate h5/job1/cal_prefill_tp$tp.h5 > "$OUTDIR/cal_decode_tp$tp.txt" 2>&1
  for rate in 16 32 48; do
    $BIN model --validate h5/job1/trace_tp${tp}_r$rate.h5 \
      --calibrate h5/job1/cal_decode_tp$tp.h5 --calibrate h5/job1/cal_prefill_tp$tp.h5 \
      --json "$OUTDIR/validate_cal_tp${tp}_r$rate.json" > "$OUTDIR/validate_cal_tp${tp}_r$rate.txt" 2>&1
  done
done
$BIN model --validate h5/job2/trace_tp2_r32.h5 --calibrate h5/job1/cal_decode_tp2.h5 \
  --calibrate h5/job1/cal_prefill_tp2.h5 > "$OUTDIR/validate_cal_job2_tp2_r32.txt" 2>&1
# The decode steps calibrated from a decode-only mixed step over ragged contexts (job 2, each
# turn's file in turn) with job 1's prefill point.
RAGGED=${3:-model/ragged}
mkdir -p "$RAGGED"
for tp in 1 2; do
  for turn in t1 t2; do
    cal="--calibrate h5/job2/mixr_tp${tp}_$turn.h5 --calibrate h5/job1/cal_prefill_tp$tp.h5"
    # shellcheck disable=SC2086
    $BIN model --validate h5/job2/mixr_tp${tp}_$turn.h5 $cal > "$RAGGED/mixr_tp${tp}_$turn.txt" 2>&1
    for rate in 16 32 48; do
      # shellcheck disable=SC2086
      $BIN model --validate h5/job1/trace_tp${tp}_r$rate.h5 $cal \
        > "$RAGGED/validate_tp${tp}_r${rate}_$turn.txt" 2>&1
    done
  done
done
# Latency against arrival rate, predicted at each TP from the ragged calibration, with the
# measured runs as markers (from this directory, raw files extracted).
for tp in 1 2; do
  $BIN model --config ../../models/llama3-8b.toml --dtype bf16 --tp $tp \
    --trace-gen rate=16,requests=200,prompt=128:1024,output=32:256,seed=1 \
    --rates 8,16,24,32,40,48,56,64 --token-budget 2048 --chunk 512 --max-batch 64 \
    --slo-ttft-ms 500 --slo-tpot-ms 50 --roofs h5/job1/trace_tp${tp}_r32.h5 \
    --calibrate h5/job2/mixr_tp${tp}_t1.h5 --calibrate h5/job1/cal_prefill_tp$tp.h5 \
    --json model/rates_tp$tp.json > model/rates_tp$tp.txt 2>&1
  (cd ../../scripts && python3 -m ridgeline_analysis latency "$OLDPWD/model/rates_tp$tp.json" \
    --measured "$OLDPWD"/h5/job1/trace_tp${tp}_r{16,32,48}.h5 -o "$OLDPWD/latency_tp$tp.png")
done
python3 slow_steps.py > model/slow_steps.txt   # the bursts of slow decode steps
