#!/usr/bin/env bash
# Job 2, on one H200: the split-K kernel over a cluster (skinny_mma_shapes.diff, "s:NT:L:CS")
# beside the committed kernel, the best shape of job 1 (2:4:8) and cuBLASLt; then --gemm-algo
# search, which times every GEMM alone, for the four fastest; then two turns.
# Usage: commands.sh OUT bundle.tar.xz (scripts/bundle.sh of a build with the diff applied)
out=$1; mkdir -p $out/h5 $out/logs
root=/tmp/ridgeline-bundle; rm -rf $root && mkdir -p $root/sys && tar -C $root -xJf "$2"
for deb in $root/debs/*.deb; do dpkg -x $deb $root/sys; done
usr=$root/sys/usr
export OPAL_PREFIX=$usr PATH=$usr/bin:$PATH PMIX_INSTALL_PREFIX=$usr/lib/x86_64-linux-gnu/pmix2
export PMIX_MCA_mca_base_component_path=$usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
export LD_LIBRARY_PATH=$root/lib:$usr/lib/x86_64-linux-gnu:$usr/lib/x86_64-linux-gnu/openmpi/lib:$LD_LIBRARY_PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
M="$usr/bin/orterun --bind-to none -np 1"
S=$out/summary.txt
nvidia-smi -L | tee $S
VARS="base 2:4:8 s:1:8:8 s:1:8:4 s:1:8:2 s:1:4:8 s:2:8:8 s:2:16:8 s:2:8:4 s:1:16:8 s:1:8:8:n s:2:8:8:n s:1:8:1 s:2:8:2"
for v in $VARS; do
  e=$v; [ $v = base ] && e=
  RIDGELINE_SKINNY_MMA=$e timeout 100 $root/bin/test_cuda_backend --gtest_filter='*Skinny*' > $out/logs/test_$v.log 2>&1
  echo "test $v rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $out/logs/test_$v.log | tr '\n' ' ')" | tee -a $S
done
timeout 120 $M $root/bin/ridgeline roofs --dtypes bf16 --memory-max-bytes 4G --out $out/h5/roofs.h5 > $out/logs/roofs.log 2>&1; echo roofs rc=$? | tee -a $S
run() { # variant model algo batch context tag
  local v=$1 model=$2 algo=$3 b=$4 c=$5 tag=$6 e=$1; [ $v = base ] && e=
  local n=${model}_${algo}_b${b}_c${c}_${v//:/-}_$tag
  RIDGELINE_SKINNY_MMA=$e timeout 100 $M $root/bin/ridgeline sweep --roofs $out/h5/roofs.h5 --timeout 90 --config models/$model.toml --layers 1 --phase decode --graphs --gemm-algo $algo --tp 1 --batch $b --context $c --warmup 5 --iters 50 --out $out/h5/$n.h5 > $out/logs/$n.log 2>&1
  local rc=$?
  local r=$(python3 scripts/decode_roof_table.py $out/h5/$n.h5 2>/dev/null | awk '$3 ~ /^[0-9]+$/ {printf "%s %s", $9, $12}')
  echo "$tag $v $model $algo b$b c$c rc=$rc $r" | tee -a $S
  if [ $algo = search ]; then
    python3 - $out/h5/$n.h5 <<'PY' | tee -a $S
import sys, h5py
def walk(name, obj):
    g = obj.attrs.get("gemm_algorithms")
    if g is not None:
        for line in (g.decode() if isinstance(g, bytes) else str(g)).split("; "): print("   ", line)
with h5py.File(sys.argv[1]) as f: f.visititems(walk)
PY
  fi
}
for v in $VARS base; do
  for model in llama3-8b llama3-70b; do run $v $model skinny 16 1024 screen; done
done
run base llama3-8b heuristic 16 1024 screen
best=$(grep '^screen' $S | awk '$3=="llama3-8b" && $4=="skinny" && $2!="base" && $8 != "" {print $8, $2}' | sort -n | head -4 | awk '{print $2}')
echo "best: $best" | tee -a $S
for v in base $best; do run $v llama3-8b search 16 1024 search; done
for turn in 1 2; do
  for v in base $best; do
    for model in llama3-8b llama3-70b gpt-h8192; do run $v $model skinny 16 1024 turn$turn; done
  done
  for model in llama3-8b llama3-70b gpt-h8192; do run base $model heuristic 16 1024 turn$turn; done
  for v in $best; do run $v llama3-8b skinny 16 8192 turn$turn; done
  run base llama3-8b heuristic 16 8192 turn$turn
done
tar -C $out -cJf $out/h5.tar.xz h5 && rm -rf $out/h5
tar -C $out -cJf $out/logs.tar.xz logs && rm -rf $out/logs
echo; grep -E '^(turn|best|search|    )' $S
