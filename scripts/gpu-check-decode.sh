# shellcheck shell=bash disable=SC2154
# Sourced by scripts/gpu-check.sh, never run: its decode sections, which read the variables and
# helpers gpu-check.sh sets up (out, ridgeline, mpirun, ngpu, step_timeout, repo, log, note, run,
# sweep, torch_ref) and which its header describes.

# decode_roofs: the one-GPU roofs file the decode sections hold their steps to
# (h5/roofs_decode.h5), measured once per job.
decode_roofs() {
  [ -f "$out/h5/roofs_decode.h5" ] && return
  timeout "$step_timeout" "${mpirun[@]}" -np 1 "$ridgeline" roofs --dtypes bf16 \
    --memory-max-bytes 4G --out "$out/h5/roofs_decode.h5" >"$out/logs/roofs_decode.log" 2>&1
  note "roofs_decode: rc=$?"
}

# decode: one sweep per preset layer on one GPU (TP 1) under --graphs, per GEMM algorithm choice,
# against the roofs file of `roofs` when it ran (else a one-GPU roofs measurement); the table of
# bytes per step over step time against the copy roof; and a growing cache of 256 tokens.
# DECODE_MODELS and DECODE_GEMM_ALGOS narrow them.
section_decode() {
  local roofs=$out/h5/roofs_nvlink.h5 DECODE_ATTENTION=${DECODE_ATTENTION:-fused}
  [ -f "$roofs" ] || { roofs=$out/h5/roofs_decode.h5; decode_roofs; }
  # The attention implementations take turns within each model, so that their sweeps of one
  # model run minutes apart, not a whole job apart.
  for model in ${DECODE_MODELS:-gpt-h8192 llama3-8b llama3-70b}; do
    for algo in ${DECODE_GEMM_ALGOS:-heuristic search skinny}; do
      for attention in ${DECODE_ATTENTION//,/ }; do
        local name=decode_sweep_${model}_$algo
        [ "$attention" = fused ] || name=${name}_$attention
        timeout "${GPU_CHECK_SWEEP_TIMEOUT:-420}" "${mpirun[@]}" -np 1 "$ridgeline" sweep \
          --roofs "$roofs" --timeout 120 --config "$repo/models/$model.toml" --layers 1 \
          --phase decode --graphs --gemm-algo "$algo" --attention "$attention" --tp 1 \
          --batch 1,16,64,256 --context 1024,8192,32768 --warmup 5 --iters 20 \
          --out "$out/h5/$name.h5" >"$out/logs/$name.log" 2>&1
        note "$name: rc=$? $(grep -cE '^ +[0-9]+ ' "$out/logs/$name.log") rows"
      done
    done
  done
  python3 "$repo/scripts/decode_roof_table.py" --markdown "$out/decode_roof_table.md" \
    "$out"/h5/decode_sweep_*.h5 | tee "$out/logs/decode_roof_table.txt"
  note "decode roof table: $(tail -1 "$out/logs/decode_roof_table.txt")"
  run "decode_steps_llama3-8b" 1 --config "$repo/models/llama3-8b.toml" --layers 1 --phase decode \
    --graphs --batch 16 --context 1024 --decode-steps 256 --warmup 5 --roofs "$roofs"
  # Every generated token checked against the TP=1 model at its position (eager, then graphs).
  run "decode_steps_tp2" 2 --config "$repo/models/llama3-8b.toml" --layers 2 --phase decode \
    --tp 2 --batch 16 --context 1000 --decode-steps 65 --warmup 2 --check on --roofs none
  run "decode_steps_tp2_graphs" 2 --config "$repo/models/llama3-8b.toml" --layers 2 --phase decode \
    --tp 2 --batch 16 --context 1000 --decode-steps 65 --warmup 2 --check on --roofs none --graphs
}

# decode_gemm (also alone): the decode step of every preset layer at batch 1 and 16, context
# 1024, --graphs, with each GEMM choice (heuristic, search, the skinny kernel), the heuristic and
# the skinny kernel each also with only the skinny GEMM as a programmatic dependent launch
# (-gemm: RIDGELINE_PDL=gemm, no chain of the step's kernels) and the skinny kernel with none
# (-nopdl), taking turns twice; and llama3-8b at batch 1 eager with each choice, for the time of
# each op. DECODE_GEMM_MODELS narrows the layers.
section_decode_gemm() {
  local roofs=$out/h5/roofs_decode.h5
  decode_roofs
  for turn in ${GPU_CHECK_TURNS:-1 2}; do
    for model in ${DECODE_GEMM_MODELS:-llama3-8b llama3-70b gpt-h8192}; do
      for variant in heuristic heuristic-gemm search skinny skinny-gemm skinny-nopdl; do
        local name=decode_gemm_${model}_${variant}_$turn pdl=chain
        case $variant in
        *-gemm) pdl=gemm ;;
        *-nopdl) pdl=0 ;;
        esac
        RIDGELINE_PDL=$pdl timeout "$step_timeout" "${mpirun[@]}" -np 1 -x RIDGELINE_PDL \
          "$ridgeline" sweep --roofs "$roofs" --timeout 120 --config "$repo/models/$model.toml" \
          --layers 1 --phase decode --graphs --gemm-algo "${variant%-*}" --tp 1 --batch 1,16 \
          --context 1024 --warmup 5 --iters 50 --out "$out/h5/$name.h5" >"$out/logs/$name.log" 2>&1
        note "$name: rc=$? $(python3 "$repo/scripts/decode_roof_table.py" "$out/h5/$name.h5" |
          awk '$3 ~ /^[0-9]+$/ {printf "b%s %s us %s; ", $3, $9, $12}')"
      done
    done
    # Eager, for each op's time (each carries its events' overhead, the same for every choice;
    # with the chain an op's kernel may start before the event that opens it).
    for variant in heuristic search skinny; do
      run "decode_eager_llama3-8b_${variant}_$turn" 1 --config "$repo/models/llama3-8b.toml" \
        --layers 1 --phase decode --batch 1 --context 1024 --gemm-algo "$variant" --warmup 5 \
        --iters 50 --roofs "$roofs"
    done
  done
}

# epilogues (alone): the decode ops folded into the skinny GEMM at one and two rows
# (RIDGELINE_EPILOGUES) against each other on one GPU: the build's default (unset) beside each
# list of EPILOGUE_VARIANTS (default "rotary,act 0"), every preset layer at batch 1 and 2,
# context 1024 and 8192, --graphs, the variants taking turns (GPU_CHECK_TURNS).
section_epilogues() {
  local roofs=$out/h5/roofs_decode.h5
  decode_roofs
  for turn in ${GPU_CHECK_TURNS:-1 2}; do
    for model in ${DECODE_MODELS:-llama3-8b llama3-70b gpt-h8192}; do
      for variant in default ${EPILOGUE_VARIANTS:-rotary,act 0}; do
        local name=epilogues_${model}_${variant//,/+}_$turn env=(env -u RIDGELINE_EPILOGUES) x=()
        [ "$variant" = default ] || { env=(env RIDGELINE_EPILOGUES="$variant"); x=(-x RIDGELINE_EPILOGUES); }
        "${env[@]}" timeout "$step_timeout" "${mpirun[@]}" -np 1 "${x[@]}" \
          "$ridgeline" sweep --roofs "$roofs" --timeout 120 --config "$repo/models/$model.toml" \
          --layers 1 --phase decode --graphs --gemm-algo skinny --tp 1 --batch 1,2 \
          --context 1024,8192 --warmup 5 --iters 50 --out "$out/h5/$name.h5" >"$out/logs/$name.log" 2>&1
        note "$name: rc=$? $(python3 "$repo/scripts/decode_roof_table.py" "$out/h5/$name.h5" |
          awk '$3 ~ /^[0-9]+$/ {printf "b%s c%s %s us %s; ", $3, $4, $9, $12}')"
      done
    done
  done
}

# decode_kernels (alone): llama3-8b's decode step (one layer, context 1024, --graphs) at batch
# 1 (the skinny GEMMs) and 16 (cuBLASLt's heuristic): its p50 from a plain run, then every
# kernel of the captured step timed alone by Nsight Compute (--graph-profiling node; clocks and
# caches left alone), so that the step's time outside its kernels shows (ncu_step_kernels.py).
section_decode_kernels() {
  command -v ncu >/dev/null || { note "decode_kernels: skipped (no ncu on PATH)"; return; }
  for cfg in 1:skinny 16:heuristic; do
    local b=${cfg%%:*} algo=${cfg#*:} name=decode_kernels_llama3-8b_b${cfg%%:*}
    local args=(run --config "$repo/models/llama3-8b.toml" --layers 1 --phase decode --batch "$b"
      --context 1024 --graphs --gemm-algo "$algo" --roofs none --timeout 120)
    timeout "$step_timeout" "${mpirun[@]}" -np 1 "$ridgeline" "${args[@]}" --warmup 5 --iters 50 \
      --out "$out/h5/$name.h5" >"$out/logs/$name.log" 2>&1
    local rc=$? p50
    p50=$(awk '/^step time/ {print $5 * 1000; exit}' "$out/logs/$name.log")
    timeout "$step_timeout" "${mpirun[@]}" -np 1 ncu --clock-control none --cache-control none \
      --graph-profiling node --metrics gpu__time_duration.sum --csv \
      --log-file "$out/logs/${name}_ncu.csv" "$ridgeline" "${args[@]}" --warmup 2 --iters 3 \
      --out "$out/h5/${name}_ncu.h5" >"$out/logs/${name}_ncu.log" 2>&1
    local rc_ncu=$?
    python3 "$repo/scripts/ncu_step_kernels.py" "$out/logs/${name}_ncu.csv" ${p50:+--step-us "$p50"} \
      >"$out/logs/$name.txt" 2>&1
    note "$name: rc=$rc/$rc_ncu $(tail -1 "$out/logs/$name.txt")"
  done
}

# allreduce: the tensor-parallel layer with the custom all-reduce (run --allreduce). First a
# table of the all-reduces of this machine (collectives --allreduce, 8K-4M, timed inside CUDA
# graphs as the decode steps below run them) for --allreduce auto.
# Two GPUs or more: TP2 decode under --graphs (gpt-h8192 batch 16 and llama3-8b batch 1, context
# 1024) with nccl, every custom all-reduce and auto taking turns, twice. One GPU: two ranks share it
# (NCCL refuses that; the custom all-reduce does not), so only correctness means anything:
# prefill, decode (graphs, a growing cache) and train at TP2, each checked against TP1.
section_allreduce() {
  local table=$out/h5/allreduce_table.h5 impls=nccl,$custom_ars extra=(--graph)
  if [ "$ngpu" -lt 2 ]; then
    impls=$custom_ars
    extra=(--allow-shared-gpu)
  fi
  timeout "$step_timeout" "${mpirun[@]}" -np 2 "$ridgeline" collectives --collectives all_reduce \
    --allreduce "$impls" "${extra[@]}" --min-bytes 8K --max-bytes 4M --warmup 5 --iters 20 \
    --out "$table" >"$out/logs/allreduce_table.log" 2>&1
  note "allreduce_table ($impls): rc=$?"
  if [ "$ngpu" -ge 2 ]; then
    # PyTorch's symmetric-memory one-shot all-reduce and its NCCL one on the same sizes, timed
    # as nccl-tests times them, right after the table above.
    timeout "$step_timeout" torchrun --standalone --nproc-per-node 2 \
      "$repo/scripts/reference/torch_collectives.py" --collectives all_reduce,all_reduce_symm_oneshot \
      --sizes 8K,16K,32K,64K,128K,256K,512K,1M,2M,4M --warmup 5 --iters 20 \
      --json "$out/ref/torch_allreduce_symm.json" >"$out/logs/torch_allreduce_symm.log" 2>&1
    note "torch_allreduce_symm: rc=$?"
    for turn in ${GPU_CHECK_TURNS:-1 2}; do
      for ar in nccl ${custom_ars//,/ } auto; do
        local with_table=()
        [ "$ar" = auto ] && with_table=(--allreduce-table "$table")
        run "allreduce_gpt_decode_${ar}_$turn" 2 --config "$repo/models/gpt-h8192.toml" --layers 1 \
          --phase decode --batch 16 --context 1024 --tp 2 --graphs --allreduce "$ar" \
          "${with_table[@]}" --warmup 10 --iters 100
        run "allreduce_llama8b_decode_${ar}_$turn" 2 --config "$repo/models/llama3-8b.toml" \
          --layers 1 --phase decode --batch 1 --context 1024 --tp 2 --graphs --allreduce "$ar" \
          "${with_table[@]}" --warmup 10 --iters 100
      done
    done
    return
  fi
  local small=(--config "$repo/models/llama3-8b.toml" --layers 2 --tp 2 --allow-shared-gpu --check on
    --warmup 1 --iters 3 --roofs none)
  for ar in ${custom_ars//,/ } auto; do
    local i=0
    for phase in "prefill --seq 256 --batch 2" "decode --batch 4 --context 128 --graphs" \
      "decode --batch 4 --context 128 --decode-steps 3" "train --seq 256 --batch 2"; do
      i=$((i + 1))
      local name="allreduce_shared_${ar}_$i" with_table=()
      [ "$ar" = auto ] && with_table=(--allreduce-table "$table")
      # shellcheck disable=SC2086
      timeout "$step_timeout" "${mpirun[@]}" -np 2 "$ridgeline" run "${small[@]}" --allreduce "$ar" \
        "${with_table[@]}" --phase $phase --timeout 120 --out "$out/h5/$name.h5" \
        >"$out/logs/$name.log" 2>&1
      note "$name ($phase): rc=$? $(grep -E '^check:' "$out/logs/$name.log" | head -1)"
    done
  done
}

# custom_allreduce (also alone; two GPUs or more): NCCL's all-reduce beside the custom one-shot,
# push, push-ll and two-shot, 8 KiB-4 MiB, at every rank count of COLLECTIVE_NPS: timed as
# nccl-tests times eager launches (--batch: back to back, stamps around each batch) and inside
# one CUDA graph of --iters launches (as nccl-tests -G), each right after PyTorch's NCCL
# all-reduce and symmetric-memory one-shot timed the same way; GPU_CHECK_TURNS turns.
section_custom_allreduce() {
  [ "$ngpu" -ge 2 ] || { note "custom_allreduce: skipped (needs 2 GPUs, $ngpu here)"; return; }
  local sizes=8K,16K,32K,64K,128K,256K,512K,1M,2M,4M
  for turn in ${GPU_CHECK_TURNS:-1 2}; do
    for np in ${COLLECTIVE_NPS:-2 4}; do
      [ "$np" -le "$ngpu" ] || continue
      for mode in batch graph; do
        # The reference times batches unless told --graph; ridgeline needs --batch for them.
        local name=custom_allreduce_np${np}_${mode}_$turn graph=() timing=(--batch)
        [ "$mode" = graph ] && graph=(--graph) timing=(--graph)
        timeout "$step_timeout" torchrun --standalone --nproc-per-node "$np" \
          "$repo/scripts/reference/torch_collectives.py" --collectives all_reduce,all_reduce_symm_oneshot \
          --sizes "$sizes" --warmup 20 --iters 100 "${graph[@]}" --json "$out/ref/torch_$name.json" \
          >"$out/logs/torch_$name.log" 2>&1
        note "torch_$name: rc=$?"
        timeout "$step_timeout" "${mpirun[@]}" -np "$np" "$ridgeline" collectives \
          --collectives all_reduce --allreduce nccl,$custom_ars --min-bytes 8K \
          --max-bytes 4M --warmup 20 --iters 100 "${timing[@]}" --out "$out/h5/$name.h5" \
          >"$out/logs/$name.log" 2>&1
        note "$name: rc=$?"
        python3 "$repo/scripts/allreduce_table.py" "$out/h5/$name.h5" "$out/ref/torch_$name.json" \
          --markdown "$out/$name.md" >"$out/logs/${name}_table.txt" 2>&1
        note "$name table: $(tail -1 "$out/logs/${name}_table.txt")"
      done
    done
  done
}

# decode_graphs (also alone): gpt-h8192's decode step at batch 64 (context 0, as in layers) with
# --graphs at TP DECODE_GRAPHS_TP (default the node's GPUs, at most 4) under every all-reduce
# (nccl, every custom one, and auto from a graph-timed table) and GEMM choice (heuristic,
# search; DECODE_GRAPHS_ALGOS), taking turns with PyTorch eager, GPU_CHECK_TURNS turns.
section_decode_graphs() {
  local tp=${DECODE_GRAPHS_TP:-$(( ngpu < 4 ? ngpu : 4 ))}
  [ "$tp" -ge 2 ] && [ "$tp" -le "$ngpu" ] || { note "decode_graphs: skipped (tp $tp, $ngpu GPUs)"; return; }
  local table=$out/h5/decode_graphs_allreduce_tp$tp.h5
  timeout "$step_timeout" "${mpirun[@]}" -np "$tp" "$ridgeline" collectives --collectives all_reduce \
    --allreduce nccl,$custom_ars --min-bytes 8K --max-bytes 4M --warmup 5 --iters 20 \
    --graph --out "$table" >"$out/logs/decode_graphs_allreduce_tp$tp.log" 2>&1
  note "decode_graphs_allreduce_tp$tp: rc=$?"
  for turn in ${GPU_CHECK_TURNS:-1 2}; do
    torch_ref "torch_decode_graphs_tp${tp}_$turn" "$tp" --phase decode --hidden 8192 --heads 64 --batch 64
    for algo in ${DECODE_GRAPHS_ALGOS:-heuristic search}; do
      for ar in nccl ${custom_ars//,/ } auto; do
        local with_table=()
        [ "$ar" = auto ] && with_table=(--allreduce-table "$table")
        run "decode_graphs_tp${tp}_${algo}_${ar}_$turn" "$tp" --config "$repo/models/gpt-h8192.toml" \
          --phase decode --batch 64 --context 0 --tp "$tp" --warmup 10 --iters 100 --graphs \
          --gemm-algo "$algo" --allreduce "$ar" "${with_table[@]}"
      done
    done
  done
}
