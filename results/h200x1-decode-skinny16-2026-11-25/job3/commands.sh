#!/usr/bin/env bash
# Job 3, on one H200: the decode attention with its split count forced (decode_splits.diff,
# RIDGELINE_DECODE_SPLITS; 0 = the committed wave rule); test_decode_cuda under four counts first.
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
for n in 0 1 2 5; do
  e=$n; [ $n = 0 ] && e=
  RIDGELINE_DECODE_SPLITS=$e timeout 150 $root/bin/test_decode_cuda > $out/logs/test_decode_$n.log 2>&1
  echo "test_decode splits=$n rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $out/logs/test_decode_$n.log | tr '\n' ' ')" | tee -a $S
done
timeout 120 $M $root/bin/ridgeline roofs --dtypes bf16 --memory-max-bytes 4G --out $out/h5/roofs.h5 > $out/logs/roofs.log 2>&1; echo roofs rc=$? | tee -a $S
run() { # splits model algo batch context tag
  local v=$1 model=$2 algo=$3 b=$4 c=$5 tag=$6 e=$1; [ $v = 0 ] && e=
  local n=${model}_${algo}_b${b}_c${c}_n${v}_$tag
  RIDGELINE_DECODE_SPLITS=$e timeout 100 $M $root/bin/ridgeline sweep --roofs $out/h5/roofs.h5 --timeout 90 --config models/$model.toml --layers 1 --phase decode --graphs --gemm-algo $algo --tp 1 --batch $b --context $c --warmup 5 --iters 50 --out $out/h5/$n.h5 > $out/logs/$n.log 2>&1
  local rc=$?
  local r=$(python3 scripts/decode_roof_table.py $out/h5/$n.h5 2>/dev/null | awk '$3 ~ /^[0-9]+$/ {printf "%s %s", $9, $12}')
  echo "$tag n=$v $model $algo b$b c$c rc=$rc $r" | tee -a $S
}
for turn in 1 2; do
  for n in 0 1 2 4 8; do run $n llama3-8b skinny 1 1024 turn$turn; done
  for n in 0 4 8 16 64; do run $n llama3-8b skinny 1 8192 turn$turn; done
  for n in 0 8 16 64; do run $n llama3-8b skinny 1 32768 turn$turn; done
  for n in 0 1 3 4; do run $n llama3-8b heuristic 16 1024 turn$turn; done
  for n in 0 2 4; do run $n llama3-8b heuristic 64 1024 turn$turn; done
  for n in 0 2 4; do run $n llama3-8b heuristic 256 1024 turn$turn; done
  for n in 0 1 2 4; do run $n llama3-70b skinny 1 1024 turn$turn; done
  for n in 0 1 2 4; do run $n gpt-h8192 skinny 1 1024 turn$turn; done
done
tar -C $out -cJf $out/h5.tar.xz h5 && rm -rf $out/h5
tar -C $out -cJf $out/logs.tar.xz logs && rm -rf $out/logs
echo; grep -E '^(turn|test)' $S | sort -k3,3 -k4,4 -k5,5 -k6,6 -k7,7 -k2,2 | grep -v "^test"; grep ^test $S
