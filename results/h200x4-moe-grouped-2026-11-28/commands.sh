#!/usr/bin/env bash
# 4 x H200, two jobs of one session, from the repository root after `scripts/build.sh build-gpu`:
# (1) the expert GEMMs alone under each grouped-GEMM choice beside the dense GEMM of the same rows,
# two turns; (2) the DeepSeek-V3-shaped layer at EP 4 (prefill 4096 and decode 128 tokens per
# rank, uniform routing) under each choice, taking turns, twice, then EP 1 with 64 experts.
export NCCL_NVLS_ENABLE=0 OMPI_MCA_btl=self,vader
B=build-gpu/tests/gpu/bench_grouped_gemm
for turn in 1 2; do
  $B --experts 64 --sources 4 --rows 32768,1024 >logs/bench_ep4_$turn.log
  $B --experts 256 --sources 1 --rows 32768 >logs/bench_ep1_$turn.log
done
R=build-gpu/src/ridgeline; M="mpirun --bind-to none --map-by slot"
DS="--config models/deepseek-v3.toml --layers 1 --routing uniform --roofs none --warmup 3 --iters 20"
for turn in 1 2; do
  for g in loop streams cublas; do
    $M -np 4 $R run $DS --dp 4 --ep 4 --seq 4096 --batch 1 --grouped-gemm $g \
      --out ds_prefill_${g}_$turn.h5 >logs/ds_prefill_${g}_$turn.log
    $M -np 4 $R run $DS --dp 4 --ep 4 --phase decode --batch 128 --context 1024 --grouped-gemm $g \
      --out ds_decode_${g}_$turn.h5 >logs/ds_decode_${g}_$turn.log
  done
done
for g in loop streams; do
  $M -np 1 $R run $DS --experts 64 --seq 4096 --batch 1 --grouped-gemm $g \
    --out ds_prefill_ep1_$g.h5 >logs/ds_prefill_ep1_$g.log
done

# Later, on one H200 (2026-11-29): the expert GEMMs under cuBLASLt's heuristic and its search,
# in turns (heuristic, search, search, heuristic).
for a in heuristic search search heuristic; do
  build-gpu/tests/gpu/bench_grouped_gemm --gemm-algo $a --rows 32768,16384 --modes loop,streams \
    --warmup 3 --reps 20
done
