#!/usr/bin/env bash
# One H200, the second job: the kernel tests, then llama3-8b mixed steps at TP 1 with the rotary
# of every row in one call and the decode tokens' appends in one row scatter (after: commit
# "Mixed step: the rotary of every row in one call ...") beside the same tree with the previous
# parallel/tp_layer_mixed.cpp (before: one rotary and one append per run of equal contexts),
# built in before/, taking turns.
export NCCL_NVLS_ENABLE=0
scripts/build.sh build-gpu
(cd before && scripts/build.sh build-gpu)
(cd build-gpu && ctest -R "test_cuda_backend|test_decode_cuda|bench_attention|test_nccl_symmetric_cuda$|bench_alltoall" --output-on-failure) >logs/rows/ctest_gpu.log 2>&1
L8="--config models/llama3-8b.toml --layers 2 --phase mixed --seq 8192"
MIX="--prefill-seqs 1 --chunk 2048 --chunk-context 2048 --decode-batch 64 --context-dist uniform:512:8000 --context-seed 1"
DEC="--prefill-seqs 0 --decode-batch 64 --context-dist uniform:512:8000 --context-seed 1"
for turn in 1 2 3; do
  for v in before after; do
    R=build-gpu/src/ridgeline; [ $v = before ] && R=before/build-gpu/src/ridgeline
    $R run --roofs none --warmup 3 --iters 20 --out mixed_${v}_$turn.h5 $L8 --tp 1 $MIX >logs/rows/mixed_${v}_$turn.log
    $R run --roofs none --warmup 3 --iters 20 --out deconly_${v}_$turn.h5 $L8 --tp 1 $DEC >logs/rows/deconly_${v}_$turn.log
  done
done
build-gpu/src/ridgeline env >env-rows.txt
