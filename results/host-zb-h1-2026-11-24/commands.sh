#!/bin/bash
# Two ranks, one per core; each schedule at m = 4 and 8, two rounds, the schedules taking turns.
set -e
BIN=${RIDGELINE:-ridgeline}
OUT=${OUT:-.}
for round in 1 2; do
  for m in 4 8; do
    for S in 1f1b zb-h1 gpipe interleaved:2; do
      name="${S/:/}_m${m}_r${round}"
      mpirun -np 2 "$BIN" run --hidden 512 --heads 8 --ffn-hidden 2048 --layers 4 --seq 128 \
        --batch "$m" --microbatches "$m" --pp 2 --phase train --schedule "$S" --warmup 2 \
        --iters 7 --roofs none --out "$OUT/$name.h5" > "$OUT/logs/$name.txt" 2>&1
    done
  done
done
