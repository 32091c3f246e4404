#!/usr/bin/env bash
# How this directory was made. On one H200 (one job each, from the repository root, after
# scripts/build.sh build-gpu): the calibration points, then the trace runs, one rate after the
# other (the device part below). Job 4 (each step's ceiling recorded) and job 3 ran it with one
# untimed pass of the trace first (the default --trace-warmup 1); job 2 ran the commit before
# that option, which replayed the trace once, as --trace-warmup 0 does. On any machine (the
# model is analytic): extract raw-h5.tar.xz here (h5/job2, h5/job3, h5/job4) and run the model
# part from this directory with BIN, a build of the same commit.
set -u
if [ "${1:-}" = device ]; then
  export NCCL_NVLS_ENABLE=0
  R=build-gpu/src/ridgeline
  $R run --config models/llama3-8b.toml --phase decode --batch 16 --context 1024 --tp 1 \
    --warmup 3 --iters 20 --out cal_decode.h5 --quiet
  $R run --config models/llama3-8b.toml --phase prefill --batch 1 --seq 1024 --tp 1 \
    --warmup 3 --iters 20 --out cal_prefill.h5 --quiet
  for rate in 4 16 32 48; do
    $R run --config models/llama3-8b.toml --phase mixed --seq 2048 --tp 1 --warmup 3 --iters 10 \
      --trace-gen rate=$rate,requests=200,prompt=128:1024,output=32:256,seed=1 \
      --token-budget 2048 --chunk 512 --max-batch 64 --slo-ttft-ms 500 --slo-tpot-ms 50 \
      --out trace_r$rate.h5 --json trace_r$rate.json --quiet
  done
  exit 0
fi
BIN=${1:?usage: commands.sh BIN (model part) or commands.sh device}
for job in job2 job3 job4; do
  mkdir -p model/$job
  for r in 4 16 32 48; do
    $BIN model --validate h5/$job/trace_r$r.h5 > model/$job/validate_r$r.txt 2>&1
    $BIN model --validate h5/$job/trace_r$r.h5 --calibrate h5/$job/cal_decode.h5 \
      --calibrate h5/$job/cal_prefill.h5 --json model/$job/validate_cal_r$r.json \
      > model/$job/validate_cal_r$r.txt 2>&1
  done
done
$BIN model --config ../../models/llama3-8b.toml --dtype bf16 \
  --trace-gen rate=4,requests=200,prompt=128:1024,output=32:256,seed=1 --rates 4,8,16,24,32,40,48 \
  --token-budget 2048 --chunk 512 --max-batch 64 --slo-ttft-ms 500 --slo-tpot-ms 50 \
  --roofs h5/job4/trace_r16.h5 --calibrate h5/job4/cal_decode.h5 \
  --calibrate h5/job4/cal_prefill.h5 --json model/rates.json > model/rates.txt 2>&1
(cd ../../scripts && python3 -m ridgeline_analysis latency "$OLDPWD/model/rates.json" \
  --measured "$OLDPWD"/h5/job4/trace_r{4,16,32,48}.h5 -o "$OLDPWD/latency.png")
