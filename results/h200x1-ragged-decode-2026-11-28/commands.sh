#!/usr/bin/env bash
# One H200, one job: the gpu tests; ragged decode (one fused call over sequences of different
# contexts) beside the loop it replaces (one call per run of equal contexts), five shapes in three
# turns; then llama3-8b mixed steps at TP 1 (a 2048-token chunk beside 64 decode tokens, the chunk
# alone, the decode tokens alone), two turns.
export NCCL_NVLS_ENABLE=0
scripts/build.sh build-gpu
(cd build-gpu && ctest -L gpu -j3 --output-on-failure) >logs/ctest_gpu.log 2>&1
B=build-gpu/tests/gpu/bench_attention
for turn in 1 2 3; do
  $B --ragged 512:8000:64 --heads 32 --kv-heads 8 --warmup 10 --reps 100 >logs/b_tp1_512-8000x64_$turn.log
  $B --ragged 512:8000:64 --heads 8 --kv-heads 2 --warmup 10 --reps 100 >logs/b_tp4_512-8000x64_$turn.log
  $B --ragged 128:2048:256 --heads 32 --kv-heads 8 --warmup 10 --reps 100 >logs/b_tp1_128-2048x256_$turn.log
  $B --ragged 1:32768:16 --heads 32 --kv-heads 8 --warmup 10 --reps 100 >logs/b_tp1_1-32768x16_$turn.log
  $B --ragged 4096:4096:64 --heads 32 --kv-heads 8 --warmup 10 --reps 100 >logs/b_tp1_4096x64_$turn.log
done
R=build-gpu/src/ridgeline; M="mpirun --bind-to none --map-by slot"
L8="--config models/llama3-8b.toml --layers 2 --phase mixed --seq 8192"
MIX="--prefill-seqs 1 --chunk 2048 --chunk-context 2048 --decode-batch 64 --context-dist uniform:512:8000 --context-seed 1"
run() { local name=$1 np=$2; shift 2
  $M -np "$np" $R run --roofs none --warmup 3 --iters 20 --out "$name.h5" "$@" >"logs/$name.log"; }
for turn in 1 2; do
  run mixed_tp1_$turn 1 $L8 --tp 1 $MIX
  run prefonly_tp1_$turn 1 $L8 --tp 1 --prefill-seqs 1 --chunk 2048 --chunk-context 2048 --decode-batch 0
  run deconly_tp1_$turn 1 $L8 --tp 1 --prefill-seqs 0 --decode-batch 64 --context-dist uniform:512:8000 --context-seed 1
done
$R env >env.txt
