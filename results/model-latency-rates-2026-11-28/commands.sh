#!/usr/bin/env bash
# Predicted, not measured: a generated llama3-8b serving trace on the H200 description at five
# arrival rates, then the picture. Run from the repository root (a host build; no GPU needed).
B=${RIDGELINE:-build/src/ridgeline}
D=results/model-latency-rates-2026-11-28
$B model --config models/llama3-8b.toml --hardware models/hardware/h200-sxm.toml --dtype bf16 \
  --trace-gen rate=20,requests=200,prompt=128:2048,output=32:256,seed=1 \
  --rates 2,5,8,12,16,20,25,30,40,80 --slo-ttft-ms 200 --slo-tpot-ms 20 \
  --json $D/rates.json >$D/rates.log
(cd scripts && python3 -m ridgeline_analysis latency ../$D/rates.json -o ../$D/latency.png)
