#!/usr/bin/env bash
# The runs of README.md, on one H200. A and B are the trees at two commits, each built with
# scripts/build.sh build-gpu in a folder of its own; R is either build's ridgeline, run in
# turns (A B, then B A, ...).
export NCCL_NVLS_ENABLE=0
M=models/llama3-8b.toml
L="--config $M --layers 4 --tp 1 --roofs none --quiet"

# The train stage's ring (A = e4177dd, B = e085ea7): four turns.
$R run --config $M --layers 4 --phase train --seq 2048 --batch 4 --microbatches 2 --tp 1 \
  --warmup 3 --iters 20 --roofs none --quiet --out tr.h5

# The one timed loop (A = 6ba9c0d, B = e4177dd): two turns of each, then six of roofs alone.
$R roofs --quick --out roofs.h5
$R run $L --phase prefill --seq 4096 --batch 2 --warmup 3 --iters 20 --out pre.h5
$R run $L --phase decode --context 4096 --batch 64 --graphs --warmup 3 --iters 30 --out dec.h5
$R run $L --phase train --seq 2048 --batch 4 --microbatches 2 --warmup 3 --iters 15 --out tr.h5
$R run --config $M --layers 8 --tp 1 --roofs none --quiet --phase mixed --seq 2048 --warmup 2 \
  --iters 5 --trace-gen rate=32,requests=40,prompt=128:1024,output=32:128,seed=1 \
  --token-budget 2048 --chunk 512 --max-batch 64 --out trace.h5

# The ring's correctness on two ranks sharing the GPU (A = e4177dd).
S="--hidden 2048 --heads 16 --kv-heads 8 --ffn-hidden 5632 --layers 4 --mlp swiglu --norm rmsnorm \
  --rotary on --seq 1024 --batch 4 --microbatches 2 --dtype bf16 --tp 2 --allow-shared-gpu \
  --allreduce oneshot --warmup 1 --iters 3 --check on --roofs none"
mpirun -n 2 $R run $S --phase train --overlap ce-ring,ce-ring:2 --out train_ring.h5
mpirun -n 2 $R run $S --phase train --sequence-parallel --overlap ce-ring,ce-ring:2 \
  --out train_ring_sp.h5
mpirun -n 2 $R run $S --phase prefill --schedule gpipe --overlap ce-ring:2 --out prefill_ring.h5

# One StageLanes for both executors (A = 79d64be, B = 28fd675): two turns of each, the
# gpu tests of A, and every strategy at TP 2 on two ranks sharing the GPU (A).
$R run $L --phase prefill --seq 4096 --batch 2 --warmup 3 --iters 20 --out pre.h5
$R run $L --phase decode --context 4096 --batch 64 --graphs --warmup 3 --iters 30 --out dec.h5
$R run $L --phase train --seq 2048 --batch 4 --microbatches 2 --warmup 3 --iters 15 --out tr.h5
ctest --test-dir build-gpu -L gpu -j 2
T="--hidden 2048 --heads 16 --kv-heads 8 --ffn-hidden 5632 --layers 2 --mlp swiglu --norm rmsnorm \
  --rotary on --dtype bf16 --tp 2 --allow-shared-gpu --allreduce oneshot --roofs none --check on \
  --warmup 1 --iters 2"
O="none,async,chunked:2,split:2,ce-ring,ce-ring:2"
mpirun -n 2 $R run $T --phase train --seq 1024 --batch 4 --microbatches 2 --overlap $O --out train.h5
mpirun -n 2 $R run $T --phase prefill --seq 1024 --batch 2 --overlap $O --out prefill.h5
mpirun -n 2 $R run $T --phase decode --context 1024 --batch 16 --graphs \
  --overlap none,async,chunked:2 --out decode.h5

# One index of a layer's ops (A = 48c9fbf, B = 0b981ad): the same runs as the StageLanes turns.

# One op registry, the executors' records and rows (A = fa164e3, B = 3bf6930): the runs of the
# StageLanes turns, with decode without graphs in each turn too, and the same checks of A.
$R run $L --phase decode --context 4096 --batch 64 --warmup 3 --iters 30 --out decn.h5
# ... and the same job again with A = 49c43cb.
# ... and with A = d33d7eb.
