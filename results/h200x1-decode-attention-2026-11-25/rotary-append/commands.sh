#!/usr/bin/env bash
# Job 8, on one H200: the build of 2ddc44a (bin/bench_head) and a build of it with
# rotary_kv_append.diff applied (bin/ridgeline, "fused"), three turns; first the GPU tests of the
# fused build. Usage: commands.sh OUT bundle.tar.xz
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
for t in test_cuda_backend test_decode_cuda; do
  timeout 150 $root/bin/$t > $out/logs/$t.log 2>&1; echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $out/logs/$t.log | tr '\n' ' ')" | tee -a $out/summary.txt
done
timeout 120 $M $root/bin/ridgeline roofs --dtypes bf16 --memory-max-bytes 4G --out $out/h5/roofs.h5 > $out/logs/roofs.log 2>&1; echo roofs rc=$?
for turn in 1 2 3; do
 for v in head fused; do
  R=$root/bin/ridgeline; [ $v = head ] && R=$root/bin/bench_head
  for cfg in llama3-8b:skinny:1:1024,8192,32768 llama3-8b:heuristic:16,64:1024 llama3-70b:skinny:1:1024 llama3-70b:heuristic:16:1024 gpt-h8192:skinny:1:1024; do
   IFS=: read model algo b c <<< "$cfg"
   n=${model}_${algo}_b${b//,/-}_${v}_$turn
   timeout 150 $M $R sweep --roofs $out/h5/roofs.h5 --timeout 120 --config models/$model.toml --layers 1 --phase decode --graphs --gemm-algo $algo --tp 1 --batch $b --context $c --warmup 5 --iters 50 --out $out/h5/$n.h5 > $out/logs/$n.log 2>&1
   echo "$n rc=$? $(python3 scripts/decode_roof_table.py $out/h5/$n.h5 | awk '$3 ~ /^[0-9]+$/ {printf "b%s c%s %s us %s; ", $3,$4, $9, $12}')" | tee -a $out/summary.txt
  done
 done
done
