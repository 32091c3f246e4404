#!/usr/bin/env bash
# Every `ridgeline model --validate` of this directory, run on the host from the committed files
# of results/ with BIN, once with the build of 2f11abe (before/), once with the build of the
# commit that changed the model (after/), and once with the build of the commit that stopped
# capping calibrated efficiencies at 1 (unclamped/). From the repository root: commands.sh BIN OUT
set -u
B=$1 O=$2
H=results/h100x4-2026-11-26
CAL="--calibrate $H/a/h5/attributed_prefill_tp2.h5 --calibrate $H/a/h5/attributed_decode_tp2.h5"
for f in $H/a/h5/sweep_*.h5 $H/b/h5/sweep_*.h5; do n=$(basename $f .h5)
  $B model --validate $f > $O/h100_$n.txt 2>&1
  $B model --validate $f $CAL > $O/h100_${n}_cal.txt 2>&1
done
roofs=results/h200x2-decode-2026-11-24/allreduce/h5/allreduce_llama8b_decode_nccl_1.h5
for m in gpt-h8192 llama3-8b llama3-70b; do
  $B model --validate results/h200x2-decode-2026-11-24/h5/decode_tp2_${m}_heuristic.h5 --roofs $roofs > $O/h200x2_decode_$m.txt 2>&1
done
for f in train_tp2 train_llama3_70b_tp2 train_tp2_sp; do
  $B model --validate results/h200x2-train-2026-11-24/h5/$f.h5 > $O/h200x2_$f.txt 2>&1
  $B model --validate results/h200x2-train-2026-11-24/h5/$f.h5 --calibrate results/h200x1-train-2026-11-24/h5/train_tp1.h5 > $O/h200x2_${f}_cal.txt 2>&1
done
src=results/h200x1-model-2026-11-24/measured
for f in $src/sweep_*_nvlink.h5; do n=$(basename $f .h5)
  $B model --validate $f > $O/h200x1_$n.txt 2>&1
  $B model --validate $f --calibrate $src/attributed_decode_tp1.h5 --calibrate $src/attributed_prefill_tp1.h5 > $O/h200x1_${n}_cal.txt 2>&1
done
