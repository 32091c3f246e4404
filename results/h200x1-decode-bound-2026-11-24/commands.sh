#!/usr/bin/env bash
# The job that made this directory, on one H200, from the repository root of commit 21d99a7 with
# omit_ops.diff applied (the files record 21d99a75252f-dirty), built and packed with
# scripts/bundle.sh BUILD bundle.tar.xz. Usage: commands.sh OUT bundle.tar.xz
# The decode step of each preset layer with some ops' kernels left out (RIDGELINE_SKIP, see
# omit_ops.diff): base leaves nothing out, smalls the six small kernels, all those and the
# attention. The variants take turns, twice. Only summary.txt and 8 of the HDF5 files were kept.
out=$1; mkdir -p $out/h5 $out/logs
root=/tmp/ridgeline-bundle; rm -rf $root && mkdir -p $root/sys && tar -C $root -xJf "$2"
for deb in $root/debs/*.deb; do dpkg -x $deb $root/sys; done
usr=$root/sys/usr
export OPAL_PREFIX=$usr PATH=$usr/bin:$PATH PMIX_INSTALL_PREFIX=$usr/lib/x86_64-linux-gnu/pmix2
export PMIX_MCA_mca_base_component_path=$usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
export LD_LIBRARY_PATH=$root/lib:$usr/lib/x86_64-linux-gnu:$usr/lib/x86_64-linux-gnu/openmpi/lib:$LD_LIBRARY_PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
R=$root/bin/ridgeline; M="$usr/bin/orterun --bind-to none -np 1 -x RIDGELINE_SKIP"
nvidia-smi -L
timeout 120 $M $R roofs --dtypes bf16 --memory-max-bytes 4G --out $out/h5/roofs.h5 > $out/logs/roofs.log 2>&1; echo roofs rc=$?
for turn in 1 2; do
 for v in base smalls all; do
  case $v in base) export RIDGELINE_SKIP="";; smalls) export RIDGELINE_SKIP=",norm1,rotary,append,norm2,act,res2,";; all) export RIDGELINE_SKIP=",norm1,rotary,append,attention,norm2,act,res2,";; esac
  for cfg in llama3-8b:skinny:1 llama3-8b:heuristic:16,64,256 llama3-70b:skinny:1 llama3-70b:heuristic:16,256; do
   IFS=: read model algo b <<< "$cfg"
   n=${model}_${algo}_${v}_$turn
   timeout 150 $M $R sweep --roofs $out/h5/roofs.h5 --timeout 120 --config models/$model.toml --layers 1 --phase decode --graphs --gemm-algo $algo --tp 1 --batch $b --context 1024,8192 --warmup 5 --iters 50 --out $out/h5/$n.h5 > $out/logs/$n.log 2>&1
   echo "$n rc=$? $(python3 scripts/decode_roof_table.py $out/h5/$n.h5 | awk '$3 ~ /^[0-9]+$/ {printf "b%s c%s %s us %s; ", $3,$4, $9, $12}')" | tee -a $out/summary.txt
  done
 done
done
