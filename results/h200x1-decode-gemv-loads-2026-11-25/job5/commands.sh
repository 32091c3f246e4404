#!/usr/bin/env bash
# Job 5, on one H200: the kept code (bin/ridgeline, 8 warps a CTA, "W8") beside two builds that
# change only kGemvWarps of models/skinny_gemm_cuda.cu to 4 and 16 (bin/bench_W4, bin/bench_W16;
# the switch of launch_slices then takes kGemvWarps slices as its widest), two turns.
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
nvidia-smi -L
timeout 120 $M $root/bin/ridgeline roofs --dtypes bf16 --memory-max-bytes 4G --out $out/h5/roofs.h5 > $out/logs/roofs.log 2>&1; echo roofs rc=$?
for turn in 1 2; do
 for v in W8 W4 W16; do
  R=$root/bin/ridgeline; [ $v != W8 ] && R=$root/bin/bench_$v
  for cfg in llama3-8b:skinny:1,2,4:1024 llama3-8b:skinny:1:8192 llama3-70b:skinny:1,4:1024 gpt-h8192:skinny:1,4:1024; do
   IFS=: read model algo b c <<< "$cfg"
   n=${model}_${algo}_b${b//,/-}_c${c//,/-}_${v}_$turn
   timeout 150 $M $R sweep --roofs $out/h5/roofs.h5 --timeout 120 --config models/$model.toml --layers 1 --phase decode --graphs --gemm-algo $algo --tp 1 --batch $b --context $c --warmup 5 --iters 50 --out $out/h5/$n.h5 > $out/logs/$n.log 2>&1
   echo "$n rc=$? $(python3 scripts/decode_roof_table.py $out/h5/$n.h5 | awk '$3 ~ /^[0-9]+$/ {printf "b%s c%s %s us %s; ", $3,$4, $9, $12}')" | tee -a $out/summary.txt
  done
 done
done
