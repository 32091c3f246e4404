#!/usr/bin/env bash
# 4 x H200, three jobs of one session: (1) mixed steps of llama3-8b (2 layers) at TP 1 beside the
# same prefill chunk and decode tokens run as steps of their own, taking turns, then TP 2 and 4;
# (2) MoE layers expert-parallel at EP 4 (DeepSeek-V3- and Mixtral-shaped, one layer), prefill of
# 4096 tokens and decode of 128 tokens per rank, uniform routing in two turns, then Zipf 1.2, and
# the DeepSeek-V3 layer's 64 experts of one rank on one GPU (EP 1).
export NCCL_NVLS_ENABLE=0
R=build-gpu/src/ridgeline; M="mpirun --bind-to none --map-by slot"
run() { local name=$1 np=$2; shift 2
  $M -np "$np" $R run --roofs none --warmup 3 --iters 20 --out "$name.h5" "$@" >"logs/$name.log"; }
L8="--config models/llama3-8b.toml --layers 2 --phase mixed --seq 8192"
MIX="--prefill-seqs 1 --chunk 2048 --chunk-context 2048 --decode-batch 64 --context-dist uniform:512:8000 --context-seed 1"
for turn in 1 2; do
  run mixed_tp1_$turn 1 $L8 --tp 1 $MIX
  run prefonly_tp1_$turn 1 $L8 --tp 1 --prefill-seqs 1 --chunk 2048 --chunk-context 2048 --decode-batch 0
  run deconly_tp1_$turn 1 $L8 --tp 1 --prefill-seqs 0 --decode-batch 64 --context-dist uniform:512:8000 --context-seed 1
done
run mixed_tp2 2 $L8 --tp 2 $MIX
run mixed_tp4 4 $L8 --tp 4 $MIX
DS="--config models/deepseek-v3.toml --layers 1 --dp 4 --ep 4"
for turn in 1 2; do
  run ds_prefill4096_$turn 4 $DS --routing uniform --seq 4096 --batch 1
  run ds_decode128_$turn 4 $DS --routing uniform --phase decode --batch 128 --context 1024
done
run ds_prefill4096_zipf 4 $DS --routing zipf:1.2 --seq 4096 --batch 1
run ds_decode128_zipf 4 $DS --routing zipf:1.2 --phase decode --batch 128 --context 1024
run ds_prefill4096_ep1 1 --config models/deepseek-v3.toml --layers 1 --experts 64 --routing uniform --seq 4096 --batch 1
run mx_prefill4096 4 --config models/mixtral-8x7b.toml --layers 1 --dp 4 --ep 4 --routing uniform --seq 4096 --batch 1
run mx_decode128 4 --config models/mixtral-8x7b.toml --layers 1 --dp 4 --ep 4 --routing uniform --phase decode --batch 128 --context 1024
# (3) the DeepSeek-V3-shaped layer at EP 4 swept along tokens per rank, NVLink then the host path.
for t in nvlink host; do
  $M -np 4 $R sweep --config models/deepseek-v3.toml --layers 1 --ep 4 --routing uniform \
    --seq 128,256,512,1024,2048,4096 --batch 1 --transport $t --check off --warmup 2 --iters 10 \
    --out "sweep_$t.h5" >"logs/sweep_$t.log"
done
$M -np 4 $R env >env.txt
