#!/usr/bin/env bash
# 4 x H200, jobs of one session, from the repository root after `scripts/build.sh build-gpu`:
# (1) the MoE layers at EP 4 with --a2a nccl and ipc taking turns, twice; (2) the all-to-all-v
# alone, NCCL then IPC in turns, over 4 and 2 ranks; (3) llama3-8b mixed steps swept along the
# prefill share: 2112 tokens at TP 1, 2, 4, then 512 tokens at TP 1, 2, 4 over NVLink and at
# TP 2, 4 over the host path. Each sweep measured its own quick roofs first.
export NCCL_NVLS_ENABLE=0 OMPI_MCA_btl=self,vader
R=build-gpu/src/ridgeline; M="mpirun --bind-to none --map-by slot"
C="--layers 1 --routing uniform --roofs none --warmup 3 --iters 20 --dp 4 --ep 4"
DS="--config models/deepseek-v3.toml $C"; MX="--config models/mixtral-8x7b.toml $C"
for turn in 1 2; do
  for a in nccl ipc; do
    $M -np 4 $R run $DS --phase decode --batch 128 --context 1024 --a2a $a \
      --out ds_decode_${a}_$turn.h5 >logs/ds_decode_${a}_$turn.log
    $M -np 4 $R run $DS --seq 4096 --batch 1 --a2a $a --out ds_prefill_${a}_$turn.h5 \
      >logs/ds_prefill_${a}_$turn.log
    $M -np 4 $R run $MX --phase decode --batch 128 --context 1024 --a2a $a \
      --out mx_decode_${a}_$turn.h5 >logs/mx_decode_${a}_$turn.log
  done
done
$M -np 4 build-gpu/tests/gpu/bench_alltoall --turns 3 >logs/bench_alltoall_np4.log
$M -np 2 build-gpu/tests/gpu/bench_alltoall --turns 2 >logs/bench_alltoall_np2.log
L8="--config models/llama3-8b.toml --layers 2 --phase mixed --seq 8192 --chunk-context 2048 --context-seed 1 --warmup 3 --iters 10"
for tp in 1 2 4; do
  $M -np $tp $R sweep $L8 --tp $tp --prefill-seqs 4 --chunk 512 --decode-batch 64 \
    --context-dist uniform:512:8000 --prefill-share 0,0.1,0.25,0.5,0.75,1 \
    --out mix_tp$tp.h5 >logs/mix_tp$tp.log
done
S512="--prefill-seqs 1 --chunk 448 --decode-batch 64 --context-dist uniform:512:4000 --prefill-share 0,0.5,0.75,0.875,0.95,1"
for tp in 1 2 4; do
  $M -np $tp $R sweep $L8 $S512 --tp $tp --out mix512_tp$tp.h5 >logs/mix512_tp$tp.log
done
for tp in 2 4; do
  $M -np $tp $R sweep $L8 $S512 --tp $tp --transport host --out mix512host_tp$tp.h5 \
    >logs/mix512host_tp$tp.log
done
$M -np 4 $R env >env.txt
