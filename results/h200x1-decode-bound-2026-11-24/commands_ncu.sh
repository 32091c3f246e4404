#!/usr/bin/env bash
# The second job of this page (another H200 of the same kind), from a bundle of the build of
# commit 7b2fa34 (the decode path as in 21d99a7, no experiment diff): each step plainly for its
# p50, then under Nsight Compute (every kernel of the captured graph alone), summed by
# scripts/ncu_step_kernels.py. Only the printed summaries (ncu_summary.txt) were kept.
# Usage: commands_ncu.sh OUT bundle.tar.xz
out=$1; mkdir -p $out/h5 $out/logs
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
for cfg in llama3-8b:1:8192 llama3-8b:1:32768 llama3-8b:1:1024 llama3-8b:16:1024; do
 IFS=: read model b c <<< "$cfg"
 n=${model}_b${b}_c$c
 args=(run --config models/$model.toml --layers 1 --phase decode --batch $b --context $c --graphs --gemm-algo $([ $b = 1 ] && echo skinny || echo heuristic) --roofs none --timeout 120)
 timeout 120 $M $R "${args[@]}" --warmup 5 --iters 50 --out $out/h5/$n.h5 > $out/logs/$n.log 2>&1
 p50=$(awk '/^step time/ {print $5 * 1000; exit}' $out/logs/$n.log)
 timeout 200 $M ncu --clock-control none --cache-control none --graph-profiling node --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv --log-file $out/logs/${n}_ncu.csv $R "${args[@]}" --warmup 2 --iters 3 --out $out/h5/${n}_ncu.h5 > $out/logs/${n}_ncu.log 2>&1
 echo "== $n p50 $p50"; python3 scripts/ncu_step_kernels.py $out/logs/${n}_ncu.csv ${p50:+--step-us $p50} 2>&1 | tail -25
done
