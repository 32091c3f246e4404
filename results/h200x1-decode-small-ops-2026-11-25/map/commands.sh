#!/usr/bin/env bash
# On one H200: the element-wise kernels with 32-bit row division ("index", bin/ridgeline) and
# with SwiGLU in fast math too ("fast", the kept change), against the build of ee48680 ("base2").
# Three turns.
# Usage: commands.sh OUT bundle.tar.xz
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
timeout 120 $M $root/bin/ridgeline roofs --dtypes bf16 --memory-max-bytes 4G --out $out/h5/roofs.h5 > $out/logs/roofs.log 2>&1; echo roofs rc=$? | tee -a $S
run() { # build model algo batch context tag
  local v=$1 model=$2 algo=$3 b=$4 c=$5 tag=$6
  local R=$root/bin/ridgeline; [ $v != index ] && R=$root/bin/bench_$v
  local n=${model}_${algo}_b${b}_c${c}_${v}_$tag
  timeout 100 $M $R sweep --roofs $out/h5/roofs.h5 --timeout 90 --config models/$model.toml --layers 1 --phase decode --graphs --gemm-algo $algo --tp 1 --batch $b --context $c --warmup 5 --iters 50 --out $out/h5/$n.h5 > $out/logs/$n.log 2>&1
  local rc=$?
  local r=$(python3 scripts/decode_roof_table.py $out/h5/$n.h5 2>/dev/null | awk '$3 ~ /^[0-9]+$/ {printf "%s %s", $9, $12}')
  echo "$tag $v $model $algo b$b c$c rc=$rc $r" | tee -a $S
}
for turn in 1 2 3; do
  for v in base2 index fast; do
    for cfg in llama3-8b:skinny:1:1024 llama3-8b:heuristic:16:1024 llama3-8b:heuristic:64:1024 llama3-8b:heuristic:256:1024 llama3-70b:heuristic:256:1024 gpt-h8192:heuristic:64:1024; do
      IFS=: read model algo b c <<< "$cfg"
      run $v $model $algo $b $c turn$turn
    done
  done
done
tar -C $out -cJf $out/h5.tar.xz h5 && rm -rf $out/h5
tar -C $out -cJf $out/logs.tar.xz logs && rm -rf $out/logs
echo; grep -E '^turn' $S | awk '{k=$3" "$4" "$5" "$6" "$2; v[k]=v[k]" "$8} END {for (x in v) print x":"v[x]}' | sort; grep ^test $S
