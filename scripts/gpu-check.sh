#!/usr/bin/env bash
# GPU checks and benchmarks on one GPU node, everything collected in OUTDIR:
#   - build natively (MPI, HDF5, CLI11, GTest development files needed), or unpack a bundle
#     made by scripts/bundle.sh (--bundle FILE) on nodes without them;
#   - the `gpu` tests (GPU_CHECK_TESTS="test_a test_b" runs only those binaries);
#   - layers: prefill and decode of the h=8192 reference layer at TP = 1, 2, 4 (decode eager
#     and with --graphs), each beside the PyTorch-eager reference measured in the same job;
#   - collectives: nccl-tests-style sweeps on 2 and 4 GPUs, NVLink and host transports, and the
#     small all-reduces of NCCL beside the custom ones;
#   - overlap: the overlap strategies side by side;
#   - extras: naive attention and a Llama 3 70B decode slice;
#   - graphs: the decode layer captured as CUDA graphs at TP = 2, 4 (part of layers);
#   - attention: each attention implementation alone (bench_attention: fused, fused with its
#     sm80 kernel forced, naive, cudnn, forward and backward) taking turns with PyTorch's SDPA backends on the same shapes, the
#     layer at s = 4k, 16k, 32k with every implementation side by side, and attention_bwd;
#   - prefill: the attention and train GPU tests, then the fused forward's sm90 and sm80
#     kernels beside cuDNN, forward only (the quick A/B of the prefill kernels);
#   - attention_bwd (also alone): the fused backward at s = 4k, d = 128, 32 heads, causal, b = 1
#     beside PyTorch's flash backward, taking turns, with the TFLOP/s ratio;
#   - roofs: `ridgeline roofs` per transport beside PyTorch's matmul and copy, attributed layers;
#   - sweeps: decode and prefill sweeps of the reference layers per transport (after roofs), at
#     TP 1, 2, 4, 8 as far as the node's GPUs go;
#   - compare: layers under stack changes (PyTorch's cuBLASLt, a cuBLASLt workspace limit, naive
#     attention), each compared with its baseline by `ridgeline compare`;
#   - train: forward + backward of one layer beside PyTorch-eager autograd, the pipeline
#     schedules at PP2 and data parallelism at DP2 (two GPUs);
#   - decode: the decode step of every preset layer at TP 1 with --graphs (batch 1-256, context
#     1k-32k, GEMMs by cuBLASLt's heuristic, by search and by the project's skinny kernel),
#     bytes per step against the copy roof (scripts/decode_roof_table.py), and a growing KV
#     cache (--decode-steps); DECODE_ATTENTION=fused,cudnn runs each sweep with each
#     implementation, taking turns; DECODE_MODELS and DECODE_GEMM_ALGOS narrow them;
#   - decode_gemm (also alone): decode steps with each GEMM choice (heuristic, search, the skinny
#     kernel), each with its programmatic launches as built, with the skinny GEMM's alone
#     (RIDGELINE_PDL=gemm) and without any (RIDGELINE_PDL=0), taking turns, and eager per-op runs;
#   - decode_kernels (alone; needs Nsight Compute): each kernel of llama3-8b's decode step at
#     batch 1 and 16 timed alone by ncu from the captured graph, beside the step's p50;
#   - schedules (also alone; two GPUs): the pipeline schedules on the preset layer at PP2;
#   - schedules4 (alone; four GPUs): the same at PP4 and at TP2 x PP2;
#   - dp (also alone; two GPUs): data-parallel replicas with and without overlapped buckets;
#   - decode_tp2 (also alone; two GPUs): the decode sweeps at TP2 against the copy roof;
#   - allreduce: the TP2 layer with the custom all-reduce (run --allreduce) beside NCCL's, or on
#     one GPU two ranks sharing it, each layer checked against TP1;
#   - custom_allreduce (also alone; two GPUs): NCCL's small all-reduces beside the custom
#     one-shot, push, push-ll and two-shot at every rank count of COLLECTIVE_NPS, timed as
#     nccl-tests times eager launches (--batch) and inside CUDA graphs, each beside PyTorch's NCCL
#     and symmetric-memory one-shot timed the same way, taking turns (scripts/allreduce_table.py);
#   - decode_graphs (also alone): the TP layer's decode step with --graphs at the node's largest
#     TP (up to 4; DECODE_GRAPHS_TP) under every all-reduce and GEMM choice, beside PyTorch
#     eager, taking turns;
#   - ce_ring (also alone): the copy-engine ring and the symm: strategies (NCCL symmetric
#     memory, under each CTA policy) beside the SM collectives at TP2 (CE_RING_TP) prefill,
#     each GEMM + collective pair beside PyTorch's fused async-TP op (scripts/async_tp_table.py), and the
#     collectives on ordinary and symmetric buffers; or on one GPU two ranks sharing it, checked
#     against TP1;
#   - pipeline (also alone; two GPUs): every schedule at PP2 checked against one rank on the
#     small model, and the preset layer's GPipe and zb-h1 under --timeout;
#   - epilogues (alone): decode with the small ops folded into the skinny GEMM beside other
#     RIDGELINE_EPILOGUES lists, taking turns;
#   - atlas (alone): the crossover atlas, scripts/atlas.sh over ATLAS_TRANSPORTS (default
#     "nvlink host"; its other ATLAS_* variables pass through), files in OUTDIR/atlas;
#   - ab (alone): this build beside another commit's, taking turns (scripts/ab-check.sh; its
#     AB_* variables pass through): AB_BASE names a source archive of the other commit (`git
#     archive --format=tar.gz -o base.tar.gz COMMIT -- . ':(exclude)results'`), built beside
#     this one; files in OUTDIR/ab;
# and prints a summary table last. Sections run in the order of --only (default:
# tests,layers,collectives,overlap,extras). GPU_CHECK_TURNS (default "1 2") narrows the turns of
# the sections that take turns; CE_RING_POLICIES, TRAIN_MICROBATCHES and SYMM_MAX_BYTES narrow
# ce_ring's CTA policies, train's pipeline microbatch counts and the symmetric collectives'
# largest size; LAYER_TPS, COLLECTIVE_NPS and ROOFS_TURNS narrow the layers' TP degrees, the
# collectives' rank counts and the PyTorch roofs turns; TRAIN_MICROBATCHES_4 and EPILOGUE_VARIANTS
# those of schedules4 and epilogues.
# NVLink multicast stays off in every process (NCCL_NVLS_ENABLE=0).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: gpu-check.sh OUTDIR [--bundle FILE] [--only SECTIONS]}
shift
bundle=""
only="tests,layers,collectives,overlap,extras"
while [ $# -gt 0 ]; do
  case $1 in
    --bundle) bundle=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"/{logs,h5,ref}
out=$(cd "$out" && pwd)

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# One node: MPI only bootstraps and carries small control messages (NCCL moves the data), so
# use shared memory and loopback and skip network probing (UCX, other interfaces).
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_osc=^ucx \
  OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
if ! grep -q 'libnccl.so.2' <<<"$(ldconfig -p)" && ! ls /usr/local/cuda/lib*/libnccl.so.2 >/dev/null 2>&1; then
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
  [ -n "$nccl" ] && export LD_LIBRARY_PATH="$nccl:$LD_LIBRARY_PATH"
fi

# cuDNN (--attention cudnn) is loaded at run time. Where PyTorch's wheel nvidia-cudnn-cu13 is
# installed, its library goes first, so that ridgeline and the PyTorch reference time the same
# cuDNN (a node's system cuDNN may be another version); GPU_CHECK_CUDNN=system keeps the system's.
cudnn=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null)
if [ -n "$cudnn" ] && [ "${GPU_CHECK_CUDNN:-wheel}" != system ]; then
  export LD_LIBRARY_PATH="$cudnn:$LD_LIBRARY_PATH"
fi

if [ -n "$bundle" ]; then
  root=/tmp/ridgeline-bundle
  rm -rf "$root" && mkdir -p "$root/sys"
  tar -C "$root" -xJf "$bundle"
  for deb in "$root"/debs/*.deb; do dpkg -x "$deb" "$root/sys"; done
  usr=$root/sys/usr
  export OPAL_PREFIX=$usr PATH=$usr/bin:$PATH
  export PMIX_INSTALL_PREFIX=$usr/lib/x86_64-linux-gnu/pmix2
  export PMIX_MCA_mca_base_component_path=$usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
  export LD_LIBRARY_PATH=$root/lib:$usr/lib/x86_64-linux-gnu:$usr/lib/x86_64-linux-gnu/openmpi/lib:$LD_LIBRARY_PATH
  bin=$root/bin
  ridgeline=$bin/ridgeline
  launcher=$usr/bin/orterun
  echo "gpu-check: using the prebuilt bundle $bundle" | tee "$out/logs/build.log"
else
  build=$repo/build-gpu
  # ab: the other commit builds beside this one.
  if [[ ",$only," == *,ab,* ]]; then
    [ -f "${AB_BASE:-}" ] ||
      { echo "gpu-check: ab needs AB_BASE=ARCHIVE, a source archive of the other commit" >&2; exit 2; }
    ab_root=/tmp/ridgeline-ab-base
    rm -rf "$ab_root" && mkdir -p "$ab_root" && tar -C "$ab_root" -xzf "$AB_BASE" ||
      { echo "gpu-check: cannot unpack $AB_BASE" >&2; exit 2; }
    "$ab_root/scripts/build.sh" "$ab_root/build" -DCMAKE_CUDA_ARCHITECTURES=90 \
      >"$out/logs/build_ab_base.log" 2>&1 &
    ab_build=$!
  fi
  "$repo/scripts/build.sh" "$build" -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/logs/build.log" 2>&1 ||
    { tail -50 "$out/logs/build.log"; exit 1; }
  bin=$build/tests/gpu
  ridgeline=$build/src/ridgeline
  launcher=mpirun
fi
mpirun=("$launcher" --bind-to none --map-by slot)
# The custom all-reduces (collectives --allreduce, run --allreduce).
custom_ars=oneshot,push,push-ll,twoshot
# Every step is bounded so that one hang cannot take the whole job's time.
step_timeout=${GPU_CHECK_STEP_TIMEOUT:-150}
# Numbers from the environment are checked as text before any use.
for number in "GPU_CHECK_STEP_TIMEOUT=$step_timeout" "DECODE_GRAPHS_TP=${DECODE_GRAPHS_TP:-1}"; do
  [[ ${number#*=} =~ ^[1-9][0-9]{0,5}$ ]] ||
    { echo "gpu-check.sh: ${number%%=*} must be a positive integer, not '${number#*=}'" >&2; exit 2; }
done
start_s=$(date +%s)
log() { echo "[gpu-check +$(( $(date +%s) - start_s ))s] $*"; }
ngpu=$(nvidia-smi -L | wc -l)
summary=$out/summary.txt
: >"$summary"
note() { log "$*"; echo "$*" >>"$summary"; }

{ nvidia-smi; nvidia-smi topo -m; } >"$out/logs/nvidia-smi.txt" 2>&1
timeout 60 "${mpirun[@]}" -np "$ngpu" "$ridgeline" env >"$out/logs/env.txt" 2>&1
note "env: rc=$? ($ngpu GPUs, launcher $launcher)"

section_tests() {
  # GPU_CHECK_TESTS: a space-separated list of test binaries to run instead of all of them;
  # GPU_CHECK_TEST_NPS: from a bundle, the rank counts of the MPI tests (default 2; more where
  # the GPUs are).
  local only=${GPU_CHECK_TESTS:-}
  if [ -n "${build:-}" ]; then
    (cd "$build" && ctest -L gpu ${only:+-R "^(${only// /|})\$"} --output-on-failure \
      --timeout "$step_timeout") >"$out/logs/gpu-tests.log" 2>&1
  else
    for t in "$bin"/test_*; do
      [ -z "$only" ] || [[ " $only " == *" $(basename "$t") "* ]] || continue
      case $(basename "$t") in
        test_cuda_backend | test_attention_cuda | test_train_cuda) timeout "$step_timeout" "$t" ;;
        *)
          for np in ${GPU_CHECK_TEST_NPS:-2}; do
            [ "$np" -le "$ngpu" ] || [ "$np" -eq 2 ] || continue
            echo "== $(basename "$t") on $np ranks"
            timeout "$step_timeout" "${mpirun[@]}" -np "$np" "$t"
          done ;;
      esac
    done >"$out/logs/gpu-tests.log" 2>&1
  fi
  note "gpu tests: rc=$? ($(grep -cE '\[  PASSED  \]|tests passed' "$out/logs/gpu-tests.log") passing summaries, $(grep -c '\[  FAILED  \]' "$out/logs/gpu-tests.log") failures)"
}

# run NAME NP ARGS...: one ridgeline run, log + HDF5 under OUTDIR.
run() {
  local name=$1 np=$2
  shift 2
  [ "$np" -le "$ngpu" ] || { note "$name: skipped (needs $np GPUs, $ngpu here)"; return; }
  timeout "$step_timeout" "${mpirun[@]}" -np "$np" "$ridgeline" run "$@" --timeout 120 \
    --out "$out/h5/$name.h5" >"$out/logs/$name.log" 2>&1
  local rc=$?
  note "$name: rc=$rc $(grep -E '^step time' "$out/logs/$name.log" | head -1)"
}
# torch NAME NP ARGS...: the PyTorch-eager reference layer.
torch_ref() {
  local name=$1 np=$2
  shift 2
  [ "$np" -le "$ngpu" ] || { note "$name: skipped (needs $np GPUs, $ngpu here)"; return; }
  timeout "$step_timeout" torchrun --standalone --nproc-per-node "$np" \
    "$repo/scripts/reference/torch_tp_layer.py" "$@" \
    --json "$out/ref/$name.json" >"$out/logs/$name.log" 2>&1
  note "$name: rc=$? $(grep -E 'p50' "$out/logs/$name.log" | tail -1)"
}

section_layers() {
  for tp in ${LAYER_TPS:-1 2 4}; do
    [ "$tp" -le "$ngpu" ] || continue
    run "prefill_tp$tp" "$tp" --config "$repo/models/gpt-h8192.toml" --seq 4096 --batch 1 \
      --tp "$tp" --warmup 5 --iters 20
    torch_ref "torch_prefill_tp$tp" "$tp" --phase prefill --hidden 8192 --heads 64 --seq 4096 --batch 1
    run "decode_tp$tp" "$tp" --config "$repo/models/gpt-h8192.toml" --phase decode --batch 64 \
      --context 0 --tp "$tp" --warmup 10 --iters 100
    run "decode_graphs_tp$tp" "$tp" --config "$repo/models/gpt-h8192.toml" --phase decode \
      --batch 64 --context 0 --tp "$tp" --warmup 10 --iters 100 --graphs
    torch_ref "torch_decode_tp$tp" "$tp" --phase decode --hidden 8192 --heads 64 --batch 64
  done
}

section_collectives() {
  for np in ${COLLECTIVE_NPS:-2 4}; do
    [ "$np" -le "$ngpu" ] || continue
    for transport in nvlink host; do
      name="collectives_np${np}_$transport"
      max=2G
      [ "$transport" = host ] && max=256M
      timeout "$step_timeout" "${mpirun[@]}" -np "$np" "$ridgeline" collectives --transport "$transport" --min-bytes 8 \
        --max-bytes "$max" --warmup 5 --iters 20 --batch --out "$out/h5/$name.h5" \
        >"$out/logs/$name.log" 2>&1
      note "$name: rc=$? $(grep -E 'Avg bus bandwidth' "$out/logs/$name.log" | tr '\n' ' ')"
    done
    # Small all-reduces: NCCL's beside the custom ones (CUDA IPC).
    name="collectives_np${np}_custom_allreduce"
    timeout "$step_timeout" "${mpirun[@]}" -np "$np" "$ridgeline" collectives --collectives all_reduce \
      --allreduce nccl,$custom_ars --min-bytes 8K --max-bytes 256K --warmup 20 --iters 100 \
      --batch --out "$out/h5/$name.h5" >"$out/logs/$name.log" 2>&1
    note "$name: rc=$? $(grep -E '^#  +all_reduce' "$out/logs/$name.log" | tr -s ' ' | tr '\n' ';')"
    # The same collectives through PyTorch's NCCL, timed as nccl-tests times them.
    timeout "$step_timeout" torchrun --standalone --nproc-per-node "$np" \
      "$repo/scripts/reference/torch_collectives.py" --json "$out/ref/torch_collectives_np$np.json" \
      >"$out/logs/torch_collectives_np$np.log" 2>&1
    note "torch_collectives_np$np: rc=$?"
  done
}

section_extras() {
  local tp=$(( ngpu < 4 ? ngpu : 4 ))
  run "prefill_naive_tp$tp" "$tp" --config "$repo/models/gpt-h8192.toml" --seq 4096 --tp "$tp" \
    --attention naive --warmup 3 --iters 10
  run "llama3_70b_decode_tp$tp" "$tp" --config "$repo/models/llama3-70b.toml" --layers 4 \
    --phase decode --batch 64 --context 4096 --tp "$tp" --warmup 10 --iters 50 --graphs
}

section_overlap() {
  for tp in 4 2; do
    [ "$tp" -le "$ngpu" ] || continue
    run "overlap_prefill_b1_tp$tp" "$tp" --config "$repo/models/gpt-h8192.toml" --seq 4096 \
      --batch 1 --tp "$tp" --warmup 5 --iters 30 \
      --overlap none,async,chunked:2,chunked:4,split:2,split:4
    # GEMMs beside a collective that leave SMs to NCCL's CTAs (132 SMs on H200).
    for ctas in 16 8; do
      run "overlap_prefill_b1_sms$((132 - ctas))_tp$tp" "$tp" --config "$repo/models/gpt-h8192.toml" \
        --seq 4096 --batch 1 --tp "$tp" --warmup 5 --iters 30 --overlap none,chunked:4,split:2,split:4 \
        --nccl-max-ctas "$ctas" --overlap-gemm-sms $((132 - ctas))
    done
    run "overlap_decode_tp$tp" "$tp" --config "$repo/models/gpt-h8192.toml" --phase decode \
      --batch 64 --context 0 --tp "$tp" --warmup 10 --iters 50 --overlap none,async,chunked:2,split:2
  done
  run "overlap_prefill_b1_sp_tp4" 4 --config "$repo/models/gpt-h8192.toml" --seq 4096 --batch 1 \
    --tp 4 --sequence-parallel --warmup 3 --iters 15 --overlap none,async,chunked:2,chunked:4
  for tp in 4 2; do
    [ "$tp" -le "$ngpu" ] || continue
    run "overlap_prefill_b4_tp$tp" "$tp" --config "$repo/models/gpt-h8192.toml" --seq 4096 \
      --batch 4 --tp "$tp" --warmup 2 --iters 8 --overlap none,async,chunked:2,chunked:4,split:2
  done
}

# ce_ring: the copy-engine ring (--overlap ce-ring) and NCCL's symmetric memory (symm:) beside
# the SM collectives. Two GPUs or more: prefill of the gpt-h8192 layer at s4096, b1 and b4, with
# and without sequence parallelism, at TP CE_RING_TP (default 2; files of another TP carry
# _tpN), every strategy (split:2 too where the tokens allow it) taking turns, twice; the symm:
# strategies again under NCCL's efficiency and zero CTA policies; the collectives of the layer's
# sizes on ordinary and symmetric buffers under each policy. One GPU: two ranks share it (no
# NCCL; the TP group's other all-reduces through the custom one), so only correctness means
# anything: prefill and decode at TP2 checked against TP1.
section_ce_ring() {
  local tp=${CE_RING_TP:-2}
  if [ "$ngpu" -ge 2 ]; then
    [ "$tp" -le "$ngpu" ] || { note "ce_ring: skipped (TP $tp needs $tp GPUs, $ngpu here)"; return; }
    local tag=""
    [ "$tp" = 2 ] || tag=_tp$tp
    for turn in ${GPU_CHECK_TURNS:-1 2}; do
      for b in 1 4; do
        for sp in off on; do
          local spflag=() split=""
          [ "$sp" = on ] && spflag=(--sequence-parallel)
          [ "$b" = 4 ] && [ "$sp" = off ] && split=,split:2
          run "ce_ring${tag}_prefill_b${b}_sp${sp}_$turn" "$tp" --config "$repo/models/gpt-h8192.toml" \
            --seq 4096 --batch "$b" --tp "$tp" "${spflag[@]}" --warmup 3 --iters 15 \
            --overlap none,async,chunked:2,chunked:4$split,ce-ring,ce-ring:2,symm:none,symm:chunked:2,symm:chunked:4
          [ "$turn" = 1 ] || continue
          for policy in ${CE_RING_POLICIES:-efficiency zero}; do
            run "symm${tag}_${policy}_prefill_b${b}_sp${sp}" "$tp" --config "$repo/models/gpt-h8192.toml" \
              --seq 4096 --batch "$b" --tp "$tp" "${spflag[@]}" --warmup 3 --iters 15 \
              --nccl-cta-policy "$policy" --overlap none,chunked:4,symm:none,symm:chunked:2,symm:chunked:4
          done
        done
      done
    done
    # PyTorch's async tensor parallelism on the same layer's pairs (fused symmetric-memory ops
    # beside NCCL + matmul), in the same job.
    for b in 1 4; do
      local ref=torch_async_tp${tag}_b$b
      timeout "$step_timeout" torchrun --standalone --nproc-per-node "$tp" \
        "$repo/scripts/reference/torch_async_tp.py" --hidden 8192 --heads 64 --ffn 32768 \
        --seq 4096 --batch "$b" --json "$out/ref/$ref.json" >"$out/logs/$ref.log" 2>&1
      note "$ref: rc=$? $(grep -E '^(qkv|proj|fc1|fc2)' "$out/logs/$ref.log" | tr -s ' ' | tr '\n' ';')"
      # Each pair under every strategy of the sequence-parallel runs beside PyTorch's fused op.
      for turn in ${GPU_CHECK_TURNS:-1 2}; do
        local pairs=$out/logs/async_tp${tag}_b${b}_$turn
        python3 "$repo/scripts/async_tp_table.py" "$out/h5/ce_ring${tag}_prefill_b${b}_spon_$turn.h5" \
          "$out/ref/$ref.json" --markdown "$pairs.md" >"$pairs.txt" 2>&1
        note "async_tp${tag}_b${b} turn $turn: rc=$? $(tail -1 "$pairs.txt")"
      done
    done
    symm_collectives "$tp" 1M "${SYMM_MAX_BYTES:-512M}" 20
    return
  fi
  local small=(--config "$repo/models/llama3-8b.toml" --layers 2 --tp 2 --allow-shared-gpu --check on
    --allreduce oneshot --overlap none,ce-ring --warmup 1 --iters 3 --roofs none)
  local i=0
  for phase in "prefill --seq 256 --batch 2" "decode --batch 4 --context 128"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    timeout "$step_timeout" "${mpirun[@]}" -np 2 "$ridgeline" run "${small[@]}" --phase $phase \
      --timeout 120 --out "$out/h5/ce_ring_shared_$i.h5" >"$out/logs/ce_ring_shared_$i.log" 2>&1
    note "ce_ring_shared_$i ($phase): rc=$? $(grep -c '^check: passed' "$out/logs/ce_ring_shared_$i.log") of 2 checks passed"
  done
  # Symmetric windows through the real binary: one rank (its collectives move nothing between
  # GPUs, so no figure here means anything), each CTA policy, #wrong checked.
  symm_collectives 1 1K 64M 10
}

# symm_collectives NP MIN MAX ITERS: the TP collectives on ordinary and symmetric buffers under
# each NCCL CTA policy, one job per policy.
symm_collectives() {
  local np=$1 min=$2 max=$3 iters=$4
  for policy in default efficiency zero; do
    local name="collectives_np${np}_symm_$policy"
    timeout "$step_timeout" "${mpirun[@]}" -np "$np" "$ridgeline" collectives \
      --collectives all_gather,reduce_scatter,all_reduce --buffers ordinary,symmetric \
      --nccl-cta-policy "$policy" --min-bytes "$min" --max-bytes "$max" --warmup 5 \
      --iters "$iters" --out "$out/h5/$name.h5" >"$out/logs/$name.log" 2>&1
    note "$name: rc=$? ($(grep -c '_symm' "$out/logs/$name.log") lines name a _symm sweep)"
  done
}

# roofs: the node's roofs per transport (full plan), the PyTorch matmul and copy they are held
# to, and a layer attributed against them.
section_roofs() {
  for transport in nvlink host; do
    [ "$ngpu" -ge 2 ] || [ "$transport" = nvlink ] || continue
    timeout "$step_timeout" "${mpirun[@]}" -np "$ngpu" "$ridgeline" roofs --transport "$transport" \
      --gemm-shapes 4096x24576x8192,4096x8192x8192,4096x32768x8192,4096x8192x32768 \
      --out "$out/h5/roofs_$transport.h5" >"$out/logs/roofs_$transport.log" 2>&1
    note "roofs_$transport: rc=$? $(grep -E 'gemm +bf16 +square +8192' "$out/logs/roofs_$transport.log" | head -1)"
  done
  # The GEMM and copy roofs beside PyTorch's matmul and copy, taking turns over 3 rounds: the
  # clocks drift under the power cap, and a comparison holds only within turns.
  for turn in ${ROOFS_TURNS-1 2 3}; do
    timeout "$step_timeout" python3 "$repo/scripts/reference/torch_roofs.py" --sizes 4096,8192,16384 \
      --json "$out/ref/torch_roofs_$turn.json" >>"$out/logs/torch_roofs.log" 2>&1
    timeout "$step_timeout" "${mpirun[@]}" -np 1 "$ridgeline" roofs --dtypes bf16 --gemm-sizes 4096,8192,16384 \
      --memory-max-bytes 4G --out "$out/h5/roofs_turn_$turn.h5" >>"$out/logs/roofs_turns.log" 2>&1
  done
  note "roofs turns: rc=$?"
  local tp=$(( ngpu < 2 ? 1 : 2 ))
  run "attributed_prefill_tp$tp" "$tp" --config "$repo/models/gpt-h8192.toml" --seq 4096 --tp "$tp" \
    --warmup 3 --iters 10 --roofs "$out/h5/roofs_nvlink.h5"
  run "attributed_decode_tp$tp" "$tp" --config "$repo/models/gpt-h8192.toml" --phase decode --batch 64 \
    --context 1024 --tp "$tp" --warmup 5 --iters 30 --roofs "$out/h5/roofs_nvlink.h5"
}

# sweep NAME TRANSPORT ARGS...: one sweep over every GPU of the node.
sweep() {
  local name=$1 transport=$2
  shift 2
  timeout "${GPU_CHECK_SWEEP_TIMEOUT:-420}" "${mpirun[@]}" -np "$ngpu" "$ridgeline" sweep --transport "$transport" \
    --roofs "$out/h5/roofs_$transport.h5" --timeout 120 "$@" --out "$out/h5/$name.h5" >"$out/logs/$name.log" 2>&1
  note "$name: rc=$? $(grep -cE '^ +[0-9]+ ' "$out/logs/$name.log") rows; $(grep -E 'becomes the ceiling' "$out/logs/$name.log" | head -2 | tr -s ' ' | tr '\n' ';')"
}

# sweeps: decode and prefill of the reference layers over TP, batch, context and sequence, one
# job per transport (NCCL reads its environment once). SWEEP_MODELS and SWEEP_TRANSPORTS narrow them.
section_sweeps() {
  # TP 1, 2, 4, 8: every power of two the node's GPUs hold.
  local tps=1 t=2
  while [ "$t" -le "$ngpu" ]; do tps=$tps,$t; t=$((t * 2)); done
  for transport in ${SWEEP_TRANSPORTS:-nvlink host}; do
    for model in ${SWEEP_MODELS:-gpt-h8192 llama3-70b}; do
      sweep "sweep_${model}_decode_$transport" "$transport" --config "$repo/models/$model.toml" --layers 1 \
        --phase decode --tp "$tps" --batch 1,16,64,256 --context 1024,8192,32768 --warmup 5 --iters 20
      sweep "sweep_${model}_prefill_$transport" "$transport" --config "$repo/models/$model.toml" --layers 1 \
        --phase prefill --tp "$tps" --batch 1 --seq 512,2048,8192,16384 --warmup 2 --iters 5
    done
  done
  local turns=() turn
  for turn in ${ROOFS_TURNS-1 2 3}; do
    turns+=(--turn "$out/h5/roofs_turn_$turn.h5" "$out/ref/torch_roofs_$turn.json")
  done
  python3 "$repo/scripts/roofs_check.py" "${turns[@]}" "$out"/h5/attributed_*.h5 "$out"/h5/sweep_*.h5 |
    tee "$out/logs/roofs_check.txt"
}

# pipeline (also alone; two GPUs): every schedule at PP2 on the small model (head dim 32: naive
# attention), train and prefill,
# each checked against one rank (--check on), under ridgeline's own --timeout so that a hang
# ends with its message.
section_pipeline() {
  [ "$ngpu" -ge 2 ] || { note "pipeline: skipped (needs 2 GPUs, $ngpu here)"; return; }
  for phase in train prefill; do
    for schedule in gpipe 1f1b interleaved:2 zb-h1; do
      [ "$phase" = prefill ] && [ "$schedule" = zb-h1 ] && continue
      local name=pipeline_small_${phase}_${schedule%%:*}
      timeout 45 "${mpirun[@]}" -np 2 "$ridgeline" run --config "$repo/models/tiny.toml" \
        --layers 4 --seq 128 --batch 4 --microbatches 4 --pp 2 --schedule "$schedule" \
        --phase "$phase" --attention naive --check on --warmup 1 --iters 3 --roofs none --timeout 30 \
        --out "$out/h5/$name.h5" >"$out/logs/$name.log" 2>&1
      note "$name: rc=$? $(grep -E '^check:|timed out|timeout' "$out/logs/$name.log" | head -1)"
    done
  done
  # The preset layer's GPipe and zb-h1 at m = 4 (transfers of 16 MiB, past NCCL's buffers).
  for schedule in gpipe zb-h1; do
    for seq in 1024; do
      local name=pipeline_gpt_${schedule}_s$seq
      timeout 45 "${mpirun[@]}" -np 2 "$ridgeline" run --config "$repo/models/gpt-h8192.toml" \
        --layers 4 --phase train --seq "$seq" --batch 4 --microbatches 4 --pp 2 \
        --schedule "$schedule" --attention cudnn --check off --warmup 1 --iters 3 --timeout 35 \
        --out "$out/h5/$name.h5" >"$out/logs/$name.log" 2>&1
      note "$name: rc=$? $(grep -E '^step time|timed out|timeout' "$out/logs/$name.log" | head -1)"
    done
  done
}

section_graphs() {
  for tp in 2 4; do
    [ "$tp" -le "$ngpu" ] || continue
    run "decode_graphs_tp$tp" "$tp" --config "$repo/models/gpt-h8192.toml" --phase decode \
      --batch 64 --context 0 --tp "$tp" --warmup 10 --iters 100 --graphs
  done
}

# compare: one layer under real stack changes, each alone, and `ridgeline compare` naming what
# differs: (1) cuBLASLt: the node's CUDA toolkit library against the copy PyTorch's wheels ship
# (LD_LIBRARY_PATH); (2) a cuBLASLt workspace limit (CUBLASLT_WORKSPACE_SIZE=0, as PyTorch reads
# it) on the decode layer, whose skinny GEMMs are where split-K matters; (3) the attention
# kernel: fused against naive. Runs take turns, twice; a second base run shows the runs' noise.
torch_cublas_dir() {
  python3 - <<'PY' 2>/dev/null
import glob, os, site
for root in site.getsitepackages():
    for hit in sorted(glob.glob(os.path.join(root, "nvidia", "**", "libcublasLt.so.*"), recursive=True)):
        print(os.path.dirname(hit)); raise SystemExit
PY
}
section_compare() {
  local prefill=(--config "$repo/models/gpt-h8192.toml" --seq 4096 --batch 1 --tp 1 --warmup 5 --iters 30)
  local decode=(--config "$repo/models/gpt-h8192.toml" --phase decode --batch 64 --context 1024 --tp 1
    --warmup 10 --iters 100)
  local torch_lib
  torch_lib=$(torch_cublas_dir)
  echo "PyTorch wheel cuBLASLt: ${torch_lib:-none found}" >"$out/logs/compare_stack.txt"
  for turn in ${GPU_CHECK_TURNS:-1 2}; do
    run "cmp_base_$turn" 1 "${prefill[@]}"
    [ -z "$torch_lib" ] || LD_LIBRARY_PATH="$torch_lib:$LD_LIBRARY_PATH" run "cmp_cublas_torch_$turn" 1 "${prefill[@]}"
    run "cmp_naive_$turn" 1 "${prefill[@]}" --attention naive
    run "cmp_decode_$turn" 1 "${decode[@]}"
    CUBLASLT_WORKSPACE_SIZE=0 run "cmp_decode_ws0_$turn" 1 "${decode[@]}"
  done
  local pair a b
  for pair in base_1:base_2 base_1:cublas_torch_1 base_2:cublas_torch_2 base_1:naive_1 base_2:naive_2 \
    decode_1:decode_2 decode_1:decode_ws0_1 decode_2:decode_ws0_2; do
    a=${pair%%:*} b=${pair##*:}
    [ -f "$out/h5/cmp_$b.h5" ] || continue
    timeout "$step_timeout" "$ridgeline" compare "$out/h5/cmp_$a.h5" "$out/h5/cmp_$b.h5" \
      --json "$out/logs/compare_${a}_vs_$b.json" --markdown "$out/logs/compare_${a}_vs_$b.md" \
      >"$out/logs/compare_${a}_vs_$b.txt" 2>&1
    note "compare $a vs $b: rc=$? $(grep -E '^moved' "$out/logs/compare_${a}_vs_$b.txt" | cut -c1-150); $(tail -1 "$out/logs/compare_${a}_vs_$b.txt")"
  done
}

# attention: bench_attention and PyTorch's SDPA backends (cudnn, flash, efficient, math where it
# fits) on the same shapes (bf16, d = 128, causal, 32 query heads, 32 and 4 KV heads), taking
# turns over 2 rounds; then the layer with every implementation side by side.
section_attention() {
  local bench=$bin/bench_attention
  [ -n "${build:-}" ] && bench=$build/tests/gpu/bench_attention
  local shapes=(--seq 4096,16384,32768 --kv-heads 32,4 --heads 32 --head-dim 128 --batch 1)
  for turn in ${GPU_CHECK_TURNS:-1 2}; do
    timeout "$step_timeout" "$bench" "${shapes[@]}" --impl fused,fused-sm80,cudnn,naive \
      --json "$out/ref/ridgeline_attention_$turn.json" >>"$out/logs/bench_attention.log" 2>&1
    note "bench_attention turn $turn: rc=$?"
    timeout "$step_timeout" python3 "$repo/scripts/reference/torch_attention.py" "${shapes[@]}" \
      --json "$out/ref/torch_attention_$turn.json" >>"$out/logs/torch_attention.log" 2>&1
    note "torch_attention turn $turn: rc=$?"
  done
  # The naive scores of s = 16k and 32k (heads x s x s fp32) do not fit in memory.
  run "attention_layer_s4096" 1 --config "$repo/models/gpt-h8192.toml" --layers 1 --seq 4096 \
    --batch 1 --warmup 3 --iters 10 --attention fused,cudnn,naive
  for seq in 16384 32768; do
    run "attention_layer_s$seq" 1 --config "$repo/models/gpt-h8192.toml" --layers 1 --seq "$seq" \
      --batch 1 --warmup 2 --iters 5 --attention fused,cudnn
  done
  section_attention_bwd
}

# prefill: the attention and train GPU tests, then the fused forward alone under each of its
# kernels (sm90 where the device takes it, and sm80 forced) beside cuDNN, forward only, taking
# turns over 2 rounds: the quick A/B of the prefill kernels.
section_prefill() {
  local bench=$bin/bench_attention test=$bin/test_attention_cuda
  [ -n "${build:-}" ] && bench=$build/tests/gpu/bench_attention test=$build/tests/gpu/test_attention_cuda
  for t in test_attention_cuda test_train_cuda; do
    timeout "$step_timeout" "$(dirname "$test")/$t" >"$out/logs/$t.log" 2>&1
    note "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/logs/$t.log" | head -1)"
  done
  for turn in ${GPU_CHECK_TURNS:-1 2}; do
    timeout "$step_timeout" "$bench" --seq 4096,16384,32768 --kv-heads 32,4 --heads 32 \
      --head-dim 128 --batch 1 --impl fused,fused-sm80,cudnn --no-backward \
      --json "$out/ref/prefill_$turn.json" >>"$out/logs/prefill.log" 2>&1
    note "prefill turn $turn: rc=$?"
  done
}

# attention_bwd: the fused attention backward alone against PyTorch's flash backward (the same
# shape, layout and FLOP convention: 2.5 x the causal forward), 3 turns; the ratio of their
# TFLOP/s per turn.
section_attention_bwd() {
  local bench=$bin/bench_attention
  [ -n "${build:-}" ] && bench=$build/tests/gpu/bench_attention
  local shape=(--seq 4096 --kv-heads 32 --heads 32 --head-dim 128 --batch 1 --warmup 5 --reps 20)
  for turn in 1 2 3; do
    timeout "$step_timeout" "$bench" "${shape[@]}" --impl fused \
      --json "$out/ref/attention_bwd_ridgeline_$turn.json" >>"$out/logs/attention_bwd.log" 2>&1
    local rc_ours=$?
    timeout "$step_timeout" python3 "$repo/scripts/reference/torch_attention.py" "${shape[@]}" \
      --backends flash --json "$out/ref/attention_bwd_torch_$turn.json" \
      >>"$out/logs/attention_bwd.log" 2>&1
    local rc_torch=$?
    note "attention_bwd turn $turn: rc=$rc_ours/$rc_torch $(python3 "$repo/scripts/gpu_summary.py" \
      --attention-bwd "$out/ref/attention_bwd_ridgeline_$turn.json" \
      "$out/ref/attention_bwd_torch_$turn.json" 2>&1)"
  done
}

# Train: forward + backward of one layer (gpt-h8192 and llama3-70b, s4096, b1) with each
# attention implementation beside PyTorch-eager autograd of the same layer, then the pipeline
# schedules at PP2 (M = 4, 8, 16) and data parallelism at DP2, where two GPUs are present.
section_train() {
  local gpt=(--config "$repo/models/gpt-h8192.toml" --layers 1 --phase train --seq 4096 --batch 1)
  for tp in 1 2; do
    [ "$tp" -le "$ngpu" ] || continue
    for turn in ${GPU_CHECK_TURNS:-1 2}; do
      run "train_tp$tp" "$tp" "${gpt[@]}" --tp "$tp" --warmup 3 --iters 10
      run "train_cudnn_tp$tp" "$tp" "${gpt[@]}" --tp "$tp" --warmup 3 --iters 10 --attention cudnn
      torch_ref "torch_train_tp$tp" "$tp" --phase train --hidden 8192 --heads 64 --seq 4096 \
        --batch 1 --warmup 3 --iters 10
    done
    run "train_llama3_70b_tp$tp" "$tp" --config "$repo/models/llama3-70b.toml" --layers 1 \
      --phase train --seq 4096 --batch 1 --tp "$tp" --warmup 3 --iters 10 --attention cudnn
  done
  [ "$ngpu" -ge 2 ] || return 0
  # Sequence parallelism at TP2, checked against one rank's gradients (the rows of a 4096-token
  # sequence split between the two GPUs), with each overlap the train phase runs.
  run "train_tp2_sp" 2 "${gpt[@]}" --tp 2 --sequence-parallel --overlap none,async \
    --attention cudnn --warmup 3 --iters 10
  section_schedules
  section_dp
}

# schedules (also alone; two GPUs): every pipeline schedule at PP2 on four gpt-h8192 layers,
# s 4096, for each microbatch count of TRAIN_MICROBATCHES (default 4 8 16).
section_schedules() {
  [ "$ngpu" -ge 2 ] || { note "schedules: skipped (needs 2 GPUs, $ngpu here)"; return; }
  for schedule in gpipe 1f1b interleaved:2 zb-h1; do
    for m in ${TRAIN_MICROBATCHES:-4 8 16}; do
      run "pipeline_${schedule%%:*}_m$m" 2 --config "$repo/models/gpt-h8192.toml" --layers 4 \
        --phase train --seq 4096 --batch "$m" --microbatches "$m" --pp 2 --schedule "$schedule" \
        --attention cudnn --warmup 2 --iters 5 --check off
    done
  done
}

# schedules4 (alone; four GPUs): every pipeline schedule on the gpt-h8192 layer, s 4096, train,
# at PP4 (eight layers, two a stage) and at TP2 x PP2 (four layers), for each microbatch count
# of TRAIN_MICROBATCHES_4 (default 8): the bubble of each stage beside the theory.
section_schedules4() {
  [ "$ngpu" -ge 4 ] || { note "schedules4: skipped (needs 4 GPUs, $ngpu here)"; return; }
  for layout in "pp4:8:--pp 4" "tp2pp2:4:--tp 2 --pp 2"; do
    local tag=${layout%%:*} rest=${layout#*:}
    local layers=${rest%%:*} grid=${rest#*:}
    for schedule in gpipe 1f1b interleaved:2 zb-h1; do
      for m in ${TRAIN_MICROBATCHES_4:-8}; do
        # shellcheck disable=SC2086
        run "pipeline_${tag}_${schedule%%:*}_m$m" 4 --config "$repo/models/gpt-h8192.toml" \
          --layers "$layers" $grid --phase train --seq 4096 --batch "$m" --microbatches "$m" \
          --schedule "$schedule" --attention cudnn --warmup 2 --iters 5 --check off
      done
    done
  done
}

# dp (also alone; two GPUs): two data-parallel replicas of a two-layer gpt-h8192 train step,
# with the gradient buckets' all-reduce beside the backward and after it.
section_dp() {
  [ "$ngpu" -ge 2 ] || { note "dp: skipped (needs 2 GPUs, $ngpu here)"; return; }
  for overlap in on off; do
    run "dp2_overlap_$overlap" 2 --config "$repo/models/gpt-h8192.toml" --layers 2 --phase train \
      --seq 4096 --batch 2 --microbatches 1 --dp 2 --dp-overlap "$overlap" --attention cudnn \
      --warmup 3 --iters 10
  done
}

# decode_tp2 (also alone; two GPUs): the decode sweeps of every preset layer at TP2 (the
# all-reduces in the step), --graphs, against the copy roof (target 0.80), with the GEMM choice
# DECODE_TP2_ALGO (default heuristic) and the all-reduce DECODE_TP2_ALLREDUCE (default nccl).
section_decode_tp2() {
  [ "$ngpu" -ge 2 ] || { note "decode_tp2: skipped (needs 2 GPUs, $ngpu here)"; return; }
  local roofs=$out/h5/roofs_decode.h5 algo=${DECODE_TP2_ALGO:-heuristic} ar=${DECODE_TP2_ALLREDUCE:-nccl}
  decode_roofs
  for model in ${DECODE_MODELS:-gpt-h8192 llama3-8b llama3-70b}; do
    local name=decode_tp2_${model}_$algo
    [ "$ar" = nccl ] || name=${name}_$ar
    timeout "${GPU_CHECK_SWEEP_TIMEOUT:-420}" "${mpirun[@]}" -np 2 "$ridgeline" sweep \
      --roofs "$roofs" --timeout 120 --config "$repo/models/$model.toml" --layers 1 \
      --phase decode --graphs --gemm-algo "$algo" --allreduce "$ar" --tp 2 --batch 1,16,64,256 \
      --context 1024,8192,32768 --warmup 5 --iters 20 --out "$out/h5/$name.h5" \
      >"$out/logs/$name.log" 2>&1
    note "$name: rc=$? $(grep -cE '^ +[0-9]+ ' "$out/logs/$name.log") rows"
  done
  python3 "$repo/scripts/decode_roof_table.py" --target 0.80 --markdown "$out/decode_tp2_table.md" \
    "$out"/h5/decode_tp2_*.h5 | tee "$out/logs/decode_tp2_table.txt"
  note "decode tp2 table: $(tail -1 "$out/logs/decode_tp2_table.txt")"
}

# atlas (alone): the crossover atlas of the node (scripts/atlas.sh; scripts/atlas_report.py
# makes its page from OUTDIR/atlas).
section_atlas() {
  RIDGELINE_BIN=$ridgeline MPIRUN="${mpirun[*]}" "$repo/scripts/atlas.sh" "$out/atlas" \
    ${ATLAS_TRANSPORTS:-nvlink host} 2>&1 | tee "$out/logs/atlas.log"
  note "atlas: rc=${PIPESTATUS[0]} $(tail -1 "$out/logs/atlas.log")"
}

# ab (alone): this build beside the one of AB_BASE, taking turns (scripts/ab-check.sh).
section_ab() {
  [ -n "${ab_build:-}" ] || { note "ab: needs the native build (no --bundle)"; return; }
  wait "$ab_build" || { note "ab: the other commit did not build (logs/build_ab_base.log)"; return; }
  MPIRUN="${mpirun[*]}" "$repo/scripts/ab-check.sh" "$out/ab" "$ab_root/build/src/ridgeline" \
    "$ridgeline" >"$out/logs/ab.log" 2>&1
  note "ab: rc=$? $(tail -1 "$out/ab/table.md" 2>/dev/null)"
}

# The decode sections (decode, decode_gemm, epilogues, decode_kernels, allreduce,
# custom_allreduce, decode_graphs) and the roofs file they share.
# shellcheck source=scripts/gpu-check-decode.sh
source "$repo/scripts/gpu-check-decode.sh"

# Sections run in the order --only lists them.
for section in ${only//,/ }; do
  declare -F "section_$section" >/dev/null || { echo "gpu-check: unknown section $section" >&2; exit 2; }
  "section_$section"
done
python3 "$repo/scripts/gpu_summary.py" "$out" | tee -a "$summary"
