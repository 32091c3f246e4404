#!/usr/bin/env bash
# How this directory was made. On 2 x H200 (NV18), NCCL_NVLS_ENABLE=0 in every process.
# A: the code before the device top-k (commit b428dfc, the router's choice on the host), built
# from its archive; B: commit 3cc6615 (the device top-k). Both built with
# scripts/build.sh DIR -DCMAKE_CUDA_ARCHITECTURES=90. Three turns; in each, every model and
# layout runs A then B.
set -u
export NCCL_NVLS_ENABLE=0
A=base/build/src/ridgeline
B=build-gpu/src/ridgeline
mp="mpirun -np 2 --bind-to none -x NCCL_NVLS_ENABLE"
# Job 1: `commands.sh`; job 2: `commands.sh job2` (A and B rebuilt from its commits).
[ "${1:-}" != job2 ] && (cd build-gpu && ctest -L gpu -R test_cuda_backend --output-on-failure) # holds RouteTopK
[ "${1:-}" != job2 ] && for turn in 1 2 3; do
  for m in qwen3-moe mixtral-8x7b; do
    for lay in "tp1|--tp 1 --dp 2 --batch 1" "tp2|--tp 2 --batch 2"; do
      n=${lay%%|*}
      a=${lay#*|}
      for side in A B; do
        bin=$A
        [ $side = B ] && bin=$B
        # shellcheck disable=SC2086
        $mp $bin run --config models/$m.toml --layers 1 --ep 2 --seq 4096 $a --warmup 3 \
          --iters 20 --check on --roofs none --out ${m}_${n}_${side}_t$turn.h5
      done
    done
  done
done
# Job 2: A = e56c93d (the device top-k), B = c7f255b (the combine's plan by counting sort), the same way:
if [ "${1:-}" = job2 ]; then
  (cd build-gpu && ctest -L gpu -R test_cuda_backend --output-on-failure) # GatherAndScatterAddRows
  for turn in 1 2 3; do
    for m in qwen3-moe deepseek-v3; do
      lays=("tp1|--tp 1 --dp 2 --batch 1" "tp2|--tp 2 --batch 2")
      [ $m = deepseek-v3 ] && lays=("tp1|--tp 1 --dp 2 --batch 1")
      for lay in "${lays[@]}"; do
        n=${lay%%|*}
        a=${lay#*|}
        for side in A B; do
          bin=$A
          [ $side = B ] && bin=$B
          # shellcheck disable=SC2086
          $mp $bin run --config models/$m.toml --layers 1 --ep 2 --seq 4096 $a --warmup 3 \
            --iters 20 --check on --roofs none --out ${m}_${n}_${side}_t$turn.h5
        done
      done
    done
  done
fi
