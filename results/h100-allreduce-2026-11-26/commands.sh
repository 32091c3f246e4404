#!/usr/bin/env bash
# The jobs that made this directory, each run from the repository root on a GPU node with a bundle
# of the build named below (scripts/bundle.sh build-gpu .bundle/bundle.tar.xz), OUT the job's
# output folder. NCCL_NVLS_ENABLE=0 in every process.

# ---- job E ----
# 4 x H100 node; build of 2f11abe plus push (before push-ll; files record 2f11abe2191e-dirty).
# Job E on a 4-GPU node: the custom all-reduce's GPU test at 2 and 4 ranks; the small
# all-reduces (NCCL, one-shot, push, two-shot) beside PyTorch's at 2 and 4 ranks, per launch and
# in CUDA graphs, two turns; gpt-h8192's TP4 decode step with graphs under every all-reduce and
# GEMM choice beside PyTorch eager, two turns.
set -u
out=$1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export GPU_CHECK_STEP_TIMEOUT=90 COLLECTIVE_NPS="2 4" GPU_CHECK_TESTS="test_ipc_allreduce_cuda"
timeout 540 scripts/gpu-check.sh "$out/e" --bundle .bundle/bundle.tar.xz \
  --only tests,custom_allreduce,decode_graphs > "$out/e-gpu-check.log" 2>&1
echo "gpu-check rc=$?" >> "$out/e-gpu-check.log"
# The same test binary at four ranks (gpu-check runs it at two).
(r=/tmp/ridgeline-bundle usr=/tmp/ridgeline-bundle/sys/usr
 export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_osc=^ucx OMPI_MCA_oob_tcp_if_include=lo \
   OMPI_MCA_btl_tcp_if_include=lo OPAL_PREFIX=$usr PATH=$usr/bin:$PATH \
   PMIX_INSTALL_PREFIX=$usr/lib/x86_64-linux-gnu/pmix2 \
   PMIX_MCA_mca_base_component_path=$usr/lib/x86_64-linux-gnu/pmix2/lib/pmix \
   LD_LIBRARY_PATH=$r/lib:$usr/lib/x86_64-linux-gnu:$usr/lib/x86_64-linux-gnu/openmpi/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
 timeout 40 $usr/bin/orterun --bind-to none --map-by slot -np 4 $r/bin/test_ipc_allreduce_cuda \
   > "$out/e/logs/test_ipc_allreduce_np4.log" 2>&1
 echo "test_ipc_allreduce np4 rc=$? $(grep -E 'PASSED|FAILED' "$out/e/logs/test_ipc_allreduce_np4.log" | head -3 | tr '\n' ' ')" >> "$out/e-gpu-check.log")
tar -C "$out" -cJf - e | split -b 15M - "$out/e.tar.xz."
rm -rf "$out/e"
grep -E "rc=|^\[gpu-check" "$out/e-gpu-check.log" | cut -c1-200 | tail -70

# ---- job F ----
# 2 x H100 node (the same node for F, G, H, one after the other); build of 2f11abe plus push and push-ll,
# the code of 0bfced6 before one-shot and push shared one kernel (files record 2f11abe2191e-dirty).
# Job F on a 4-GPU node: the custom all-reduce's GPU test at 2 and 4 ranks; the small
# all-reduces (NCCL and every custom one) beside PyTorch's at 2 and 4 ranks, per launch and in
# CUDA graphs, two turns; gpt-h8192's TP4 decode step with graphs under every all-reduce beside
# PyTorch eager, two turns; then the TP2 decode steps of the allreduce section, one turn.
set -u
out=$1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export GPU_CHECK_STEP_TIMEOUT=90 COLLECTIVE_NPS="2 4" GPU_CHECK_TESTS="test_ipc_allreduce_cuda"
export GPU_CHECK_TEST_NPS="2 4" DECODE_GRAPHS_ALGOS=heuristic
timeout 380 scripts/gpu-check.sh "$out/f" --bundle .bundle/bundle.tar.xz \
  --only tests,custom_allreduce,decode_graphs > "$out/f-gpu-check.log" 2>&1
echo "gpu-check rc=$?" >> "$out/f-gpu-check.log"
GPU_CHECK_TURNS=1 timeout 150 scripts/gpu-check.sh "$out/f2" --bundle .bundle/bundle.tar.xz \
  --only allreduce > "$out/f2-gpu-check.log" 2>&1
echo "gpu-check rc=$?" >> "$out/f2-gpu-check.log"
tar -C "$out" -cJf - f f2 | split -b 15M - "$out/f.tar.xz."
rm -rf "$out/f" "$out/f2"
grep -hE "rc=|^\[gpu-check" "$out/f-gpu-check.log" "$out/f2-gpu-check.log" | cut -c1-180 | tail -75

# ---- job G ----
# 2 x H100 node (the same node for F, G, H, one after the other); build of 2f11abe plus push and push-ll,
# the code of 0bfced6 before one-shot and push shared one kernel (files record 2f11abe2191e-dirty).
# Job G on a 2-GPU node: the decode sweeps of every preset layer at TP2 with --graphs, the skinny
# GEMMs and the push-ll all-reduce, against the copy roof.
set -u
out=$1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export DECODE_TP2_ALGO=skinny DECODE_TP2_ALLREDUCE=push-ll GPU_CHECK_SWEEP_TIMEOUT=150
timeout 520 scripts/gpu-check.sh "$out/g" --bundle .bundle/bundle.tar.xz --only decode_tp2 \
  > "$out/g-gpu-check.log" 2>&1
echo "gpu-check rc=$?" >> "$out/g-gpu-check.log"
tar -C "$out" -cJf - g | split -b 15M - "$out/g.tar.xz."
rm -rf "$out/g"
grep -hE "rc=|^\[gpu-check" "$out/g-gpu-check.log" | cut -c1-200 | tail -20
cat "$out"/g-gpu-check.log | grep -A60 "decode tp2 table" | head -5

# ---- job H ----
# 2 x H100 node (the same node for F, G, H, one after the other); build of 2f11abe plus push and push-ll,
# the code of 0bfced6 before one-shot and push shared one kernel (files record 2f11abe2191e-dirty).
# Job H on a 2-GPU node: the decode sweeps of every preset layer at TP2 with --graphs and the
# skinny GEMMs, the NCCL all-reduce and push-ll taking turns, twice.
set -u
out=$1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export DECODE_TP2_ALGO=skinny GPU_CHECK_SWEEP_TIMEOUT=100
for turn in 1 2; do
  for ar in nccl push-ll; do
    DECODE_TP2_ALLREDUCE=$ar timeout 120 scripts/gpu-check.sh "$out/h/${ar}_$turn" \
      --bundle .bundle/bundle.tar.xz --only decode_tp2 > "$out/h-${ar}_$turn.log" 2>&1
    echo "$ar turn $turn: rc=$? $(grep 'decode tp2 table' "$out/h-${ar}_$turn.log" | tail -1)"
  done
done
tar -C "$out" -cJf - h | split -b 15M - "$out/h.tar.xz."
rm -rf "$out/h"

# ---- job I ----
# 4 x H100 node; build of ccca6c3 (files record ccca6c388eef).
# Job I on a 4-GPU node, the final build: the custom all-reduce's GPU test at 2 and 4 ranks; the
# small all-reduces (NCCL and every custom one) beside PyTorch's at 2 and 4 ranks, per launch and
# in CUDA graphs, two turns; gpt-h8192's TP4 decode step with graphs under every all-reduce
# beside PyTorch eager, two turns.
set -u
out=$1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export GPU_CHECK_STEP_TIMEOUT=90 COLLECTIVE_NPS="2 4" GPU_CHECK_TESTS="test_ipc_allreduce_cuda"
export GPU_CHECK_TEST_NPS="2 4" DECODE_GRAPHS_ALGOS=heuristic
timeout 500 scripts/gpu-check.sh "$out/i" --bundle .bundle/bundle.tar.xz \
  --only tests,decode_graphs,custom_allreduce > "$out/i-gpu-check.log" 2>&1
echo "gpu-check rc=$?" >> "$out/i-gpu-check.log"
tar -C "$out" -cJf - i | split -b 15M - "$out/i.tar.xz."
rm -rf "$out/i"
grep -hE "rc=|^\[gpu-check" "$out/i-gpu-check.log" | cut -c1-180 | tail -45

# ---- job J ----
# 4 x H100 node; build of f59a42d (files record ccca6c388eef-dirty) beside the binary of ccca6c3.
# Job J on a 4-GPU node: the custom all-reduce with up to 128 blocks (this build) against the
# same code with up to 32 (the previous build's binary), taking turns: its GPU test at 2 and 4
# ranks; all-reduces in CUDA graphs at 2 and 4 ranks; gpt-h8192's TP4 decode step with graphs.
set -u
out=$1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export GPU_CHECK_STEP_TIMEOUT=90 GPU_CHECK_TESTS="test_ipc_allreduce_cuda" GPU_CHECK_TEST_NPS="2 4"
timeout 100 scripts/gpu-check.sh "$out/j" --bundle .bundle/bundle.tar.xz --only tests > "$out/j-gpu-check.log" 2>&1
echo "gpu-check rc=$?" >> "$out/j-gpu-check.log"
r=/tmp/ridgeline-bundle usr=/tmp/ridgeline-bundle/sys/usr
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_osc=^ucx OMPI_MCA_oob_tcp_if_include=lo \
  OMPI_MCA_btl_tcp_if_include=lo OPAL_PREFIX=$usr PATH=$usr/bin:$PATH \
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  PMIX_INSTALL_PREFIX=$usr/lib/x86_64-linux-gnu/pmix2 \
  PMIX_MCA_mca_base_component_path=$usr/lib/x86_64-linux-gnu/pmix2/lib/pmix \
  LD_LIBRARY_PATH=$r/lib:$usr/lib/x86_64-linux-gnu:$usr/lib/x86_64-linux-gnu/openmpi/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
xz -dc .bundle/ridgeline-32blocks.xz > /tmp/ridgeline-32blocks && chmod +x /tmp/ridgeline-32blocks
mpirun=("$usr/bin/orterun" --bind-to none --map-by slot)
mkdir -p "$out/j/ab"
for turn in 1 2; do
  for build in blocks32 blocks128; do
    bin=$r/bin/ridgeline
    [ $build = blocks32 ] && bin=/tmp/ridgeline-32blocks
    for np in 2 4; do
      name=ar_np${np}_graph_${build}_$turn
      timeout 60 "${mpirun[@]}" -np $np $bin collectives --collectives all_reduce \
        --allreduce nccl,push,push-ll,twoshot --min-bytes 8K --max-bytes 4M --warmup 20 --iters 100 \
        --graph --out "$out/j/ab/$name.h5" > "$out/j/ab/$name.log" 2>&1
      echo "$name: rc=$?"
    done
    for ar in nccl push-ll twoshot; do
      name=decode_tp4_${ar}_${build}_$turn
      timeout 60 "${mpirun[@]}" -np 4 $bin run --config models/gpt-h8192.toml --phase decode \
        --batch 64 --context 0 --tp 4 --warmup 10 --iters 100 --graphs --allreduce $ar \
        --timeout 60 --out "$out/j/ab/$name.h5" > "$out/j/ab/$name.log" 2>&1
      echo "$name: rc=$? $(grep -E '^step time' "$out/j/ab/$name.log" | cut -c1-60)"
    done
  done
done 2>&1 | tee "$out/j/ab/summary.txt"
tar -C "$out" -cJf - j | split -b 15M - "$out/j.tar.xz."
rm -rf "$out/j"
grep -hE "rc=" "$out/j-gpu-check.log" | cut -c1-180
