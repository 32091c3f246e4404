#!/usr/bin/env bash
# The third job (ncu/), on one H200: the kept build alone in the bundle; Nsight Compute's full
# section set on the decode attention's kernels (two launches after four) of four eager steps.
# ncu fixes the SM clock at its base for these, so durations are longer than in a step.
# Usage: commands_ncu.sh OUT bundle.tar.xz
out=$1; mkdir -p $out/h5 $out/logs
root=/tmp/ridgeline-bundle; rm -rf $root && mkdir -p $root/sys && tar -C $root -xJf "$2"
for deb in $root/debs/*.deb; do dpkg -x $deb $root/sys; done
usr=$root/sys/usr
export OPAL_PREFIX=$usr PATH=$usr/bin:$PATH PMIX_INSTALL_PREFIX=$usr/lib/x86_64-linux-gnu/pmix2
export PMIX_MCA_mca_base_component_path=$usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
export LD_LIBRARY_PATH=$root/lib:$usr/lib/x86_64-linux-gnu:$usr/lib/x86_64-linux-gnu/openmpi/lib:$LD_LIBRARY_PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
M="$usr/bin/orterun --bind-to none -np 1"
R=$root/bin/ridgeline
for cfg in llama3-8b:16:1024 llama3-8b:64:1024 llama3-8b:1:8192 llama3-70b:1:32768; do
 IFS=: read model b c <<< "$cfg"
 n=${model}_b${b}_c$c
 args=(run --config models/$model.toml --layers 1 --phase decode --batch $b --context $c --gemm-algo $([ $b = 1 ] && echo skinny || echo heuristic) --roofs none --timeout 120)
 timeout 150 $M ncu --set full -k regex:decode_ --launch-skip 4 --launch-count 2 $R "${args[@]}" --warmup 2 --iters 3 --out $out/h5/${n}_ncu.h5 > $out/logs/${n}_full.txt 2>&1
 echo "== $n rc=$?"
 grep -E "decode_|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Waves Per SM|Grid Size|One or More Eligible|Issued Warp|L2 Hit Rate|Compute \(SM\) Throughput|Theoretical Occupancy|Block Limit" $out/logs/${n}_full.txt | head -60
done
