#!/usr/bin/env bash
# How this directory was made. On 2 x H200 (NV18), from the repository root after
# scripts/build.sh build-gpu -DCMAKE_CUDA_ARCHITECTURES=90, NCCL_NVLS_ENABLE=0 in every process.
# Job 3 (the tables of README.md): the quick roofs, then per model a prefill and a decode sweep
# whose points take turns five times. Job 1 (earlier, same code): the same Mixtral sweeps at three
# repeats (the prefill log kept as logs/job1_mixtral-8x7b_prefill.log), one sequence-parallel run
# and the gpu tests of the all-to-all paths.
set -u
export NCCL_NVLS_ENABLE=0
R=build-gpu/src/ridgeline
mp="mpirun -np 2 --bind-to none -x NCCL_NVLS_ENABLE"
$mp $R roofs --quick --out roofs.h5
# Job 4, on the final code: `commands.sh job4` (its own quick roofs, as above).
if [ "${1:-}" = job4 ]; then
  for m in mixtral-8x7b qwen3-moe deepseek-v3; do
    M="--config models/$m.toml --layers 1 --ep 2 --warmup 3 --iters 20 --check on --roofs roofs.h5"
    r=5
    [ $m = deepseek-v3 ] && r=3
    $mp $R sweep $M --tp 1,2 --batch 1,2 --seq 4096 --repeats $r --out ${m}_prefill.h5
    [ $m = deepseek-v3 ] && continue
    $mp $R sweep $M --phase decode --tp 1,2 --batch 64,128 --context 4096 --repeats 5 \
      --out ${m}_decode.h5
  done
  exit 0
fi
for m in mixtral-8x7b qwen3-moe; do
  M="--config models/$m.toml --layers 1 --ep 2 --warmup 3 --iters 20 --check on --roofs roofs.h5"
  # tp 1: two data-parallel replicas of --batch B, one EP group of both; tp 2: one TP group of
  # --batch 2B, which is the EP group. tp 1 batch 1 and tp 2 batch 2 hold the same tokens.
  $mp $R sweep $M --tp 1,2 --batch 1,2 --seq 4096 --repeats 5 --out ${m}_prefill.h5
  $mp $R sweep $M --phase decode --tp 1,2 --batch 64,128 --context 4096 --repeats 5 \
    --out ${m}_decode.h5
done
# Job 1: the sequence-parallel form of the tp 2 point (its own job: not in turns with the above).
$mp $R run --config models/mixtral-8x7b.toml --layers 1 --ep 2 --warmup 3 --iters 20 --check on \
  --roofs roofs.h5 --tp 2 --batch 2 --seq 4096 --sequence-parallel --repeats 3 \
  --out prefill_sp.h5 # kept as job1_mixtral-8x7b_prefill_sp.h5
(cd build-gpu && ctest -L gpu -R "alltoall|nccl|moe|grouped" --output-on-failure)
