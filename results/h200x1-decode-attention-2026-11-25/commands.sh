#!/usr/bin/env bash
# The second job of this directory, on one H200, from the repository root. Three builds packed
# with scripts/bundle.sh into one bundle: bin/ridgeline the chained-combine variant ("new"),
# bin/bench_new1 the kept code ("new1", the combine an ordinary launch), bin/bench_base the decode
# path of 8083372 ("base"); the GPU test binaries of the chained-combine build.
# Usage: commands.sh OUT bundle.tar.xz
# The first job (job1/) ran the same script with two builds, base and new1 (then called "new"),
# without batch 256, and timed the kernels of three steps (Nsight Compute) instead of one.
out=$1; mkdir -p $out/h5 $out/logs
root=/tmp/ridgeline-bundle; rm -rf $root && mkdir -p $root/sys && tar -C $root -xJf "$2"
for deb in $root/debs/*.deb; do dpkg -x $deb $root/sys; done
usr=$root/sys/usr
export OPAL_PREFIX=$usr PATH=$usr/bin:$PATH PMIX_INSTALL_PREFIX=$usr/lib/x86_64-linux-gnu/pmix2
export PMIX_MCA_mca_base_component_path=$usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
export LD_LIBRARY_PATH=$root/lib:$usr/lib/x86_64-linux-gnu:$usr/lib/x86_64-linux-gnu/openmpi/lib:$LD_LIBRARY_PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
M="$usr/bin/orterun --bind-to none -np 1"
nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv
for t in test_decode_cuda test_attention_cuda; do
  timeout 150 $root/bin/$t > $out/logs/$t.log 2>&1; echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $out/logs/$t.log | tr '\n' ' ')" | tee -a $out/summary.txt
done
timeout 120 $M $root/bin/ridgeline roofs --dtypes bf16 --memory-max-bytes 4G --out $out/h5/roofs.h5 > $out/logs/roofs.log 2>&1; echo roofs rc=$?
for turn in 1 2; do
 for v in base new1 new; do
  R=$root/bin/ridgeline; [ $v = base ] && R=$root/bin/bench_base; [ $v = new1 ] && R=$root/bin/bench_new1
  for cfg in llama3-8b:skinny:1:1024,8192,32768 llama3-8b:heuristic:16,64,256:1024,8192 llama3-70b:skinny:1:1024,32768 llama3-70b:heuristic:16:1024 gpt-h8192:skinny:1:1024; do
   IFS=: read model algo b c <<< "$cfg"
   n=${model}_${algo}_${v}_$turn
   timeout 150 $M $R sweep --roofs $out/h5/roofs.h5 --timeout 120 --config models/$model.toml --layers 1 --phase decode --graphs --gemm-algo $algo --tp 1 --batch $b --context $c --warmup 5 --iters 50 --out $out/h5/$n.h5 > $out/logs/$n.log 2>&1
   echo "$n rc=$? $(python3 scripts/decode_roof_table.py $out/h5/$n.h5 | awk '$3 ~ /^[0-9]+$/ {printf "b%s c%s %s us %s; ", $3,$4, $9, $12}')" | tee -a $out/summary.txt
  done
 done
done
# The chained-combine build's kernels one by one at llama3-8b batch 1, context 1024 (job 1: the
# kept build's, at batch 1 context 1024 and 8192 and batch 16 context 1024).
R=$root/bin/ridgeline
for cfg in llama3-8b:1:1024; do
 IFS=: read model b c <<< "$cfg"
 n=${model}_b${b}_c$c
 args=(run --config models/$model.toml --layers 1 --phase decode --batch $b --context $c --graphs --gemm-algo $([ $b = 1 ] && echo skinny || echo heuristic) --roofs none --timeout 120)
 timeout 100 $M ncu --clock-control none --cache-control none --graph-profiling node --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv --log-file $out/logs/${n}_ncu.csv $R "${args[@]}" --warmup 2 --iters 3 --out $out/h5/${n}_ncu.h5 > $out/logs/${n}_ncu.log 2>&1
 echo "== $n"; python3 scripts/ncu_step_kernels.py $out/logs/${n}_ncu.csv 2>&1 | tail -16
done
