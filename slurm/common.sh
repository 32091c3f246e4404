# Sourced by the batch scripts of this folder, never run: the allocation's shape from Slurm,
# the binary, the environment the ranks get, and one way to launch ranks with explicit placement.
# The script that sources it sets `recipe` (its name, for messages) and `repo` (the checkout).

submit_dir=${SLURM_SUBMIT_DIR:-$PWD}
bin=${RIDGELINE_BIN:-$repo/build/src/ridgeline}

# Numbers from the environment are checked as text first: bash arithmetic on an unchecked value
# would run the commands it holds (a[$(...)]).
positive() {
  [[ $2 =~ ^[1-9][0-9]{0,5}$ ]] && return 0
  echo "$recipe: $1 must be a positive integer, not '$2'" >&2
  exit 2
}

# SLURM_NTASKS_PER_NODE is set only when --ntasks-per-node was given; SLURM_TASKS_PER_NODE
# ("2(x3)" or "2,1") always is: its first count is the first node's.
per_node=${SLURM_NTASKS_PER_NODE:-${SLURM_TASKS_PER_NODE:-}}
per_node=${per_node%%[(,]*}
positive "the tasks per node (SLURM_NTASKS_PER_NODE)" "$per_node"
nodes=${SLURM_JOB_NUM_NODES:-1}
positive SLURM_JOB_NUM_NODES "$nodes"
ranks=${SLURM_NTASKS:-$((per_node * nodes))}
positive SLURM_NTASKS "$ranks"
# Each rank gets the cores asked for with --cpus-per-task (one by default) and uses them for the
# host backend's BLAS threads.
threads=${SLURM_CPUS_PER_TASK:-1}
positive SLURM_CPUS_PER_TASK "$threads"
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-$threads}

results=${RIDGELINE_RESULTS:-$submit_dir}
launcher=${RIDGELINE_LAUNCHER:-mpirun}
case $launcher in
  mpirun | srun) ;;
  *)
    echo "$recipe: RIDGELINE_LAUNCHER must be mpirun or srun, not '$launcher'" >&2
    exit 2 ;;
esac
bind_to=${RIDGELINE_BIND_TO:-core}
cpu_bind=${RIDGELINE_CPU_BIND:-cores}
read -r -a mpirun_flags <<< "${RIDGELINE_MPIRUN_FLAGS:-}"
read -r -a srun_flags <<< "${RIDGELINE_SRUN_FLAGS:---mpi=pmix}"
# A preset named relative to the checkout (models/llama3-70b.toml) works from any submit directory.
config_args=()
if [[ -n ${RIDGELINE_CONFIG:-} ]]; then
  config=$RIDGELINE_CONFIG
  [[ $config != /* && ! -e $config && -e $repo/$config ]] && config=$repo/$config
  config_args=(--config "$config")
fi

# NVLink SHARP needs a fabric set-up that not every node has; off keeps runs comparable.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
# Where each rank ran belongs in the job log next to its timings.
export OMPI_MCA_hwloc_base_report_bindings=${OMPI_MCA_hwloc_base_report_bindings:-true}

if [[ ! -x $bin ]]; then
  echo "$recipe: no ridgeline binary at $bin (set RIDGELINE_BIN or RIDGELINE_REPO)" >&2
  exit 2
fi
mkdir -p "$results"

# launch N ARGS...: `ridgeline ARGS...` on N ranks placed node by node (block), the tasks per
# node on each: ranks 0..per_node-1 share the first node, and so on, so that TP (the innermost
# dimension) stays inside a node and PP and DP go across nodes. N up to the tasks per node runs
# on the first node alone; N beyond the allocation's tasks is spread evenly over its nodes.
launch() {
  local n=$1
  shift
  local spanned=$(((n + per_node - 1) / per_node))
  ((spanned <= nodes)) || spanned=$nodes
  local on_node=$(((n + spanned - 1) / spanned))
  case $launcher in
    mpirun)
      mpirun -np "$n" --map-by "${RIDGELINE_MAP_BY:-ppr:$on_node:node:PE=$threads}" \
        --bind-to "$bind_to" "${mpirun_flags[@]}" "$bin" "$@" ;;
    srun)
      srun "${srun_flags[@]}" --nodes="$spanned" --ntasks="$n" --ntasks-per-node="$on_node" \
        --cpus-per-task="$threads" --cpu-bind="$cpu_bind" --distribution=block:block "$bin" "$@" ;;
  esac
}

# finish OUT: `ridgeline validate` (its exit code says whether OUT is valid) and `report` on
# OUT, each on one rank.
finish() {
  launch 1 validate "$1"
  launch 1 report "$1"
}
