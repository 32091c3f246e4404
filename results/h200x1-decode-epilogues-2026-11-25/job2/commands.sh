#!/usr/bin/env bash
# Decode's small ops folded into the skinny GEMM's kernel: none (RIDGELINE_EPILOGUES=0, "split"),
# all three ("fused"), and each alone, one binary, taking turns; the single-GPU tests first.
out=$1; mkdir -p $out/h5 $out/logs
root=/tmp/ridgeline-bundle; rm -rf $root && mkdir -p $root/sys && tar -C $root -xJf "$2"
for deb in $root/debs/*.deb; do dpkg -x $deb $root/sys; done
usr=$root/sys/usr
export OPAL_PREFIX=$usr PATH=$usr/bin:$PATH PMIX_INSTALL_PREFIX=$usr/lib/x86_64-linux-gnu/pmix2
export PMIX_MCA_mca_base_component_path=$usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
export LD_LIBRARY_PATH=$root/lib:$usr/lib/x86_64-linux-gnu:$usr/lib/x86_64-linux-gnu/openmpi/lib:$LD_LIBRARY_PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
M="$usr/bin/orterun --bind-to none -np 1 -x RIDGELINE_EPILOGUES"
S=$out/summary.txt
nvidia-smi -L | tee $S
nvidia-smi --query-gpu=driver_version,power.limit,clocks.max.sm --format=csv | tee -a $S
for t in test_cuda_backend test_decode_cuda; do
  timeout 150 $root/bin/$t > $out/logs/$t.log 2>&1; echo "test $t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $out/logs/$t.log | tr '\n' ' ')" | tee -a $S
done
grep -E 'FAILED|Failure|error' $out/logs/test_*.log | head -20 | tee -a $S
timeout 120 $M $root/bin/ridgeline roofs --dtypes bf16 --memory-max-bytes 4G --out $out/h5/roofs.h5 > $out/logs/roofs.log 2>&1; echo roofs rc=$? | tee -a $S
run() { # variant model algo batch context tag
  local v=$1 model=$2 algo=$3 b=$4 c=$5 tag=$6
  local n=${model}_${algo}_b${b}_c${c}_${v}_$tag
  case $v in split) export RIDGELINE_EPILOGUES=0;; fused) export RIDGELINE_EPILOGUES=rotary,act,residual;; *) export RIDGELINE_EPILOGUES=$v;; esac
  timeout 100 $M $root/bin/ridgeline sweep --roofs $out/h5/roofs.h5 --timeout 90 --config models/$model.toml --layers 1 --phase decode --graphs --gemm-algo $algo --tp 1 --batch $b --context $c --warmup 5 --iters 50 --out $out/h5/$n.h5 > $out/logs/$n.log 2>&1
  local rc=$?
  local r=$(python3 scripts/decode_roof_table.py $out/h5/$n.h5 2>/dev/null | awk '$3 ~ /^[0-9]+$/ {printf "%s %s", $9, $12}')
  echo "$tag $v $model $algo b$b c$c rc=$rc $r" | tee -a $S
}
for turn in 1 2; do
  for v in split fused rotary act residual; do
    for cfg in llama3-8b:skinny:1:1024 llama3-8b:skinny:1:8192 llama3-8b:skinny:4:1024 llama3-70b:skinny:1:1024 gpt-h8192:skinny:1:1024; do
      IFS=: read model algo b c <<< "$cfg"
      run $v $model $algo $b $c turn$turn
    done
  done
done
python3 - $out/h5 <<'PY' | tee -a $S
import sys, glob, h5py
for f in sorted(glob.glob(sys.argv[1] + "/*_fused_turn1.h5")):
    found = []
    def visit(name, obj):
        for k, v in obj.attrs.items():
            if k == "gemm_algorithms": found.append(v.decode() if isinstance(v, bytes) else str(v))
    with h5py.File(f) as h: h.visititems(visit)
    print(f.split("/")[-1], "|", found[0] if found else "-")
PY
tar -C $out -cJf $out/h5.tar.xz h5 && rm -rf $out/h5
tar -C $out -cJf $out/logs.tar.xz logs && rm -rf $out/logs
echo; grep -E '^turn' $S | awk '{k=$3" "$4" "$5" "$6" "$2; v[k]=v[k]" "$8} END {for (x in v) print x":"v[x]}' | sort; grep ^test $S
