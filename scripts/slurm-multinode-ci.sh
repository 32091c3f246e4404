#!/bin/bash
# A real three-node Slurm cluster on this one machine, built from network namespaces this script
# creates and removes: a bridge in a namespace of its own, one namespace per host (the
# controller and three compute nodes) joined to it by veth pairs, addresses that exist only inside
# those namespaces and no route out. Each daemon runs with its own host name (UTS namespace) and
# its own /tmp, /dev/shm and /etc/hosts (mount namespace), as on separate machines; one munged
# serves them all through its socket. The slurm/ recipes are submitted with --nodes=3 and each
# job is checked: exit code, files in the submit directory, `ridgeline validate`, TP groups
# inside a node and PP stages on the file's three nodes, a sweep as a job array joined by
# `ridgeline report` and the Python join, roofs (rows within a node, one rank per node and over
# all three nodes' ranks) and collectives across nodes, a layout that cannot be placed refused
# once with exit 2, and a node whose link is slowed (tc) named by roofs. One fault: the ranks of
# the third node are killed (SIGKILL) while a run is under way; the job must end non-zero within
# the run's --timeout and a margin, name the node in its log, and leave no file that validates
# as complete.
# Open MPI's TCP paths are held to the namespaces' subnet by variables of the jobs, never by
# global settings. Every wait is bounded (RIDGELINE_SLURM_CI_BUDGET_S in all, default 900 s)
# and everything is torn down on exit.
# Needs root (namespaces, daemons as root, no cgroups).
#   scripts/slurm-multinode-ci.sh BUILD_DIR
set -euo pipefail

ci=slurm-multinode-ci
# shellcheck source=scripts/slurm-ci-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/slurm-ci-common.sh"
ci_setup 900 "network namespaces; slurmd runs jobs as root" "$@"
# Each node gets an empty /tmp of its own; a checkout or build under /tmp is bound back into
# it (start_host), so that every node sees the binary and the presets at the same path.
keep=()
[[ $repo == /tmp/* ]] && keep+=("$repo")
bin_dir=$(dirname "$bin")
[[ $bin_dir == /tmp/* && $bin_dir != "$repo"/* ]] && keep+=("$bin_dir")

fail() {
  echo "slurm-multinode-ci: $*" >&2
  exit 1
}

for tool in ip unshare munged mungekey slurmctld slurmd sbatch sinfo squeue scancel mpirun; do
  command -v "$tool" > /dev/null || { echo "slurm-multinode-ci: $tool is missing" >&2; exit 2; }
done

# The cluster: names unique to this run, so that two runs (or a system Slurm) never meet.
tag=rl$$
hub=$tag-hub
subnet=10.199.77
hosts=(rlctl rlnode1 rlnode2 rlnode3)
addrs=("$subnet.1" "$subnet.2" "$subnet.3" "$subnet.4")
nodes=("${hosts[@]:1}")
made_ns=()
state=""
pids=()
jobs_started=()

in_ns() { # in_ns HOST CMD...: CMD in HOST's network namespace (clients: sbatch, squeue, ...)
  local host=$1
  shift
  ip netns exec "$tag-$host" "$@"
}

cleanup() {
  local rc=$?
  trap - EXIT
  local job
  for job in "${jobs_started[@]}"; do
    in_ns rlctl timeout 10 scancel "$job" 2> /dev/null || true
  done
  # slurmd ends the jobs' processes: stopping it before the jobs are gone would leave them.
  local deadline_s=$((SECONDS + 20))
  while (( ${#jobs_started[@]} )) && (( SECONDS < deadline_s )) &&
    [[ -n $(in_ns rlctl timeout 5 squeue -h 2> /dev/null) ]]; do
    sleep 1
  done
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  for pid in "${pids[@]}"; do
    timeout 10 tail --pid="$pid" -f /dev/null 2> /dev/null || kill -KILL "$pid" 2> /dev/null || true
  done
  # Whatever still runs in a namespace of ours (a rank a failed job left) ends with it.
  local ns
  for ns in "${made_ns[@]}"; do
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -KILL "$pid" 2> /dev/null || true; done
  done
  for ns in "${made_ns[@]}"; do ip netns del "$ns" 2> /dev/null || true; done
  if [[ -n $state ]]; then
    if (( rc == 0 )); then
      rm -rf "$state"
    else
      local f
      for f in "$state"/log/*; do
        echo "---- $f (last 30 lines)"
        tail -n 30 "$f"
      done
      echo "slurm-multinode-ci: kept $state for inspection"
    fi
  fi
  log "$( (( rc == 0 )) && echo PASSED || echo "FAILED (exit $rc)")"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# /tmp is replaced on every node, so the shared state lives elsewhere.
state=$(mktemp -d /var/tmp/ridgeline-slurm-nodes.XXXXXX)
mkdir -p "$state"/{munge,log,ctld,spool,submit}
chmod 755 "$state" "$state/munge"

# The network: a bridge in a namespace of its own and a veth pair from it to each host's
# namespace. Nothing is created in this machine's own namespace and no host has a route beyond
# the subnet.
if ! ip netns add "$hub"; then
  echo "slurm-multinode-ci: cannot create a network namespace here (a container without" \
    "CAP_SYS_ADMIN, or a kernel without network namespaces): the three-node cluster cannot be built" >&2
  exit 2
fi
made_ns+=("$hub")
ip -n "$hub" link set lo up
ip -n "$hub" link add br0 type bridge
ip -n "$hub" link set br0 up
{
  echo "127.0.0.1 localhost"
  for i in "${!hosts[@]}"; do echo "${addrs[$i]} ${hosts[$i]}"; done
} > "$state/hosts"
for i in "${!hosts[@]}"; do
  ns=$tag-${hosts[$i]}
  ip netns add "$ns"
  made_ns+=("$ns")
  ip -n "$hub" link add "v$i-$tag" type veth peer name eth0 netns "$ns"
  ip -n "$hub" link set "v$i-$tag" master br0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "${addrs[$i]}/24" dev eth0
  ip -n "$ns" link set eth0 up
done
for host in "${hosts[@]}"; do
  [[ -z $(ip -n "$tag-$host" route show default) ]] || fail "$host has a default route"
done
log "network: ${hosts[*]} on $subnet.0/24 in namespaces $tag-*"

# munged in this machine's namespace: its socket is a file, reached from every node.
start_munged "$state/munge" "$state/log/munged.out"

mem_mib=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
export SLURM_CONF=$state/slurm.conf
{
  cat <<CONF
ClusterName=rlmulti
SlurmctldHost=rlctl(${addrs[0]})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$state/ctld
# One spool and pid file per node: the nodes share this machine's filesystem.
SlurmdSpoolDir=$state/spool/%n
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd-%n.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=5
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=300
CONF
  # The nodes share the machine's memory: each claims a quarter, below what slurmd reports.
  for i in 1 2 3; do
    echo "NodeName=${hosts[$i]} NodeAddr=${addrs[$i]} CPUs=$(nproc) RealMemory=$((mem_mib / 4)) State=UNKNOWN"
  done
  echo "PartitionName=ci Nodes=$(IFS=,; echo "${nodes[*]}") Default=YES MaxTime=INFINITE State=UP"
} > "$SLURM_CONF"

# start_host HOST NAME CMD...: CMD as HOST, in the background, logging to log/NAME.out.
start_host() {
  local host=$1 name=$2
  shift 2
  # nsenter, not `ip netns exec`: that remounts /sys, hiding the cgroup tree slurmd reads.
  mkdir -p "$state/machine-tmp-$name"
  nsenter --net="/run/netns/$tag-$host" unshare --uts --mount --propagation private bash -c '
    set -e
    hostname "$1"
    mount --bind "$2" /etc/hosts
    # The machine'"'"'s /tmp stays reachable here (this mount namespace only), for the paths
    # in $4 (colon-separated) to be bound back into the node'"'"'s own /tmp.
    mount --rbind /tmp "$3"
    mount -t tmpfs -o size=1g,mode=1777 tmpfs /tmp
    IFS=: read -r -a keep <<< "$4"
    for path in "${keep[@]}"; do
      mkdir -p "$path"
      mount --bind "$3/${path#/tmp/}" "$path"
    done
    mount -t tmpfs -o mode=1777 tmpfs /dev/shm
    shift 4
    exec "$@"' start_host "$host" "$state/hosts" "$state/machine-tmp-$name" \
    "$(IFS=:; echo "${keep[*]}")" "$@" > "$state/log/$name.out" 2>&1 &
  pids+=($!)
}
start_host rlctl slurmctld slurmctld -D -i -f "$SLURM_CONF"
for host in "${nodes[@]}"; do
  mkdir -p "$state/spool/$host"
  start_host "$host" "slurmd-$host" slurmd -D -N "$host" -f "$SLURM_CONF"
done
wait_until "the three nodes idle in sinfo" 60 \
  bash -c "[[ \$(ip netns exec '$tag-rlctl' sinfo -h -N -o %T | sort -u) == idle ]] &&
           (( \$(ip netns exec '$tag-rlctl' sinfo -h -N -o %N | wc -l) == 3 ))"
log "slurmctld and three slurmd up: $(in_ns rlctl sinfo -h -N -o '%N %T %c CPUs' | tr '\n' ';')"

# The jobs' environment: the binary, a tiny model, and Open MPI held to the cluster's subnet
# (its TCP paths, and the daemons' out-of-band channel), given to sbatch for these jobs only.
submit_dir=$state/submit
unset RIDGELINE_REPO RIDGELINE_RESULTS RIDGELINE_OUT RIDGELINE_TP_LIST RIDGELINE_LAUNCHER
export RIDGELINE_BIN=$bin
export RIDGELINE_CONFIG=models/tiny.toml
export RIDGELINE_MPIRUN_FLAGS="--allow-run-as-root"
export OPENBLAS_NUM_THREADS=1
job_env=(OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1 OMPI_MCA_btl_tcp_if_include="$subnet.0/24"
  OMPI_MCA_oob_tcp_if_include="$subnet.0/24")
sbatch_overrides=(--nodes=3 --ntasks-per-node=2 --gpus-per-task=0 --oversubscribe --time=00:05:00)
# A rank that crashes leaves its core in the submit directory (sbatch passes this limit on).
ulimit -c unlimited 2> /dev/null || true

# submit_once NAME SCRIPT [SBATCH OPTIONS...]: sbatch --wait from the submit directory; prints
# the job's logs and sets $job; returns the job's exit code (an array's: the largest).
submit_once() {
  local name=$1 script=$2 rc=0 f
  shift 2
  (cd "$submit_dir" && bounded 200 ip netns exec "$tag-rlctl" env "${job_env[@]}" \
    sbatch --parsable --wait "${sbatch_overrides[@]}" "$@" "$script") > "$state/sbatch.out" || rc=$?
  job=$(head -n 1 "$state/sbatch.out" | cut -d ';' -f 1)
  [[ -n $job ]] && jobs_started+=("$job")
  log "$name: job ${job:-?} finished with exit code $rc"
  for f in "$submit_dir"/*"-${job:-none}"*.out; do
    [[ -f $f ]] || continue
    echo "---- $(basename "$f")"
    cat "$f"
  done
  echo "----"
  return "$rc"
}

# startup_crash JOB: whether JOB's log shows the crash below: a rank's segmentation fault at
# address 0 whose backtrace has no frame past the signal handler's ([ 0]), the mark of a jump
# to a null function pointer (where that jump is does not show; the two seen came before
# ridgeline printed anything). Each core file the ranks left in the submit directory is shown
# with gdb's backtrace, where gdb exists.
startup_crash() {
  local logs=("$submit_dir"/*"-$1"*.out) core
  grep -qs "Failing at address: (nil)" "${logs[@]}" || return 1
  ! grep -qs "\] \[ 1\] " "${logs[@]}" || return 1
  for core in "$submit_dir"/core*; do
    [[ -f $core ]] || continue
    echo "---- $(basename "$core"): backtrace"
    if command -v gdb > /dev/null; then
      bounded 60 gdb -batch -q -ex "thread apply all bt" "$bin" "$core" 2>&1 | tail -n 60 || true
    fi
    rm -f "$core"
  done
  return 0
}

# submit NAME SCRIPT [SBATCH OPTIONS...]: submit_once, and once more (named in the log) after
# the crash startup_crash() recognises, seen in 2 of 11 full runs of this test (the ranks of one
# namespace node in one srun/PMIx step, before ridgeline printed anything) and in none of 120
# srun steps run alone. Its cause is not known; the log shows the cores. Once only: a crash
# that comes back fails the test.
submit() {
  local rc=0
  submit_once "$@" || rc=$?
  if (( rc != 0 )) && [[ -n $job ]] && startup_crash "$job"; then
    log "$1: job $job's ranks crashed at address 0 with no frame past the signal handler; submitting it once more"
    # What is left of it (an array's other task) leaves the nodes first.
    in_ns rlctl timeout 10 scancel "$job" 2> /dev/null || true
    wait_until "job $job gone from the queue" 60 \
      bash -c "[[ -z \$(ip netns exec '$tag-rlctl' squeue -h -j '$job' -o %i 2> /dev/null) ]]" || true
    rc=0
    submit_once "$@" || rc=$?
  fi
  return "$rc"
}

# check_file FILE KIND: valid, and what a job across the three nodes must record.
check_file() {
  [[ -f $1 ]] || fail "no $1 in the submit directory"
  bounded 60 "$bin" validate "$1" > /dev/null || fail "ridgeline validate refused $1"
  PYTHONPATH=$repo/scripts bounded 60 python3 - "$1" "$2" <<'PY' || fail "$1: $2 checks failed"
import sys
import h5py
path, kind = sys.argv[1], sys.argv[2]
with h5py.File(path, "r") as f:
    nodes = int(f.attrs["nodes"])
    hosts = [h.decode() if isinstance(h, bytes) else str(h) for h in f["topology/host"][()]]
    assert nodes == 3, f"root nodes = {nodes}, expected 3"
    assert sorted(set(hosts)) == ["rlnode1", "rlnode2", "rlnode3"], f"hosts {hosts}"
    layout = f.attrs.get("file_layout", b"single")
    layout = layout.decode() if isinstance(layout, bytes) else str(layout)
    if kind in ("run", "sweep"):
        assert layout == "per-node", f"file_layout {layout}, expected per-node across nodes"
    if kind == "run":
        tp, pp, dp = (int(f["config"].attrs[k]) for k in ("tp", "pp", "dp"))
        assert (tp, pp, dp) == (2, 3, 1), f"tp, pp, dp = {tp}, {pp}, {dp}"
        for g in range(0, len(hosts), tp):
            assert len(set(hosts[g:g + tp])) == 1, f"TP group {g}..{g + tp - 1} spans {hosts[g:g + tp]}"
        stages = [hosts[s * tp] for s in range(pp)]
        assert len(set(stages)) == pp, f"the pipeline stages share a node: {stages}"
        check = f["summary"].attrs["check"]
        check = check.decode() if isinstance(check, bytes) else str(check)
        assert check.startswith("passed"), f"the check against the reference: {check!r}"
    if kind == "roofs":
        # Three nodes of 2 ranks: each collective within a node, one rank on each of the three
        # nodes, and all six ranks.
        rows = f["roofs/interconnect"][()]
        text = lambda v: v.decode() if isinstance(v, bytes) else str(v)
        got = {(text(r["collective"]), int(r["group_size"]), text(r["scope"]),
                int(r["group_nodes"])) for r in rows}
        for want in (("all_reduce", 2, "intra", 1), ("all_reduce", 3, "inter", 3),
                     ("all_reduce", 6, "hier", 3)):
            assert want in got, f"no {want} row in /roofs/interconnect: {sorted(got)}"
        # Every GPU's own figures, with its node's link: one figure per node, measured on each.
        gpus = f["roofs/gpus"][()]
        links = {}
        for g in gpus:
            links.setdefault(text(g["node"]), set()).add(float(g["node_busbw_gbps"]))
        assert len(links) == 3, f"/roofs/gpus names {sorted(links)}, expected three nodes"
        assert all(len(v) == 1 and min(v) > 0 for v in links.values()), f"node links: {links}"
print(f"{path}: {kind}, {nodes} nodes, hosts {hosts}, layout {layout}")
PY
}


# 1. A train run: TP inside each node (--tp auto: the node's 2 ranks) x PP 3 across the nodes,
#    one stage per node, launched by mpirun, checked against the TP=1 reference.
export RIDGELINE_ARGS="--tp auto --pp 3 --layers 3 --phase train --batch 3 --microbatches 3 --warmup 1 --iters 2 --roofs none"
submit run "$repo/slurm/run.sbatch" || fail "the run job failed"
run_job=$job
check_file "$submit_dir/ridgeline-$run_job.h5" run

# 2. A layout that cannot be placed: TP 6 over three nodes of 2 ranks (a model whose sizes TP 6
#    divides, so that the span is the only problem). Refused before anything runs, printed once,
#    exit 2 from every rank, no file.
export RIDGELINE_ARGS="--tp 6 --hidden 384 --heads 6 --kv-heads 6 --ffn-hidden 768 --warmup 1 --iters 2 --roofs none"
refused_rc=0
submit refused "$repo/slurm/run.sbatch" || refused_rc=$?
(( refused_rc == 2 )) || fail "a TP group across nodes: the job exited $refused_rc, not 2"
refused_log=$submit_dir/ridgeline-$job.out
(( $(grep -c "spans nodes" "$refused_log") == 1 )) ||
  fail "the refusal is not printed exactly once in $refused_log"
[[ ! -e $submit_dir/ridgeline-$job.h5 ]] || fail "the refused job left ridgeline-$job.h5"

# 3. A sweep as a job array of two slices through srun (PMIx), each over the three nodes (TP inside a
#    node, the replicas across) with its timelines in the per-node layout, joined afterwards by
#    `ridgeline report` and the Python join.
export RIDGELINE_LAUNCHER=srun RIDGELINE_SRUN_FLAGS="--mpi=pmix"
export RIDGELINE_ARGS="--tp 1,2 --batch 1,2 --warmup 1 --iters 2 --repeats 1 --roofs none --keep-timelines"
submit sweep "$repo/slurm/sweep.sbatch" --array=1-2 --output=ridgeline-sweep-%A-%a.out || fail "the sweep array failed"
sweep_job=$job
slices=("$submit_dir/ridgeline-sweep-$sweep_job-1.h5" "$submit_dir/ridgeline-sweep-$sweep_job-2.h5")
for f in "${slices[@]}"; do check_file "$f" sweep; done
bounded 60 "$bin" report "${slices[@]}" > "$state/report.out" || fail "ridgeline report refused the slices"
grep -q "== joined: 2 files, 4 points" "$state/report.out" ||
  { cat "$state/report.out"; fail "the report did not join the two slices into 4 points"; }
PYTHONPATH=$repo/scripts bounded 60 python3 - "${slices[@]}" <<'PY' || fail "the Python join failed"
import sys
from ridgeline_analysis import reader, sweeps
joined = sweeps.join_sweeps([reader.load(p) for p in sys.argv[1:]])
labels = sorted(str(x) for x in joined.points["label"])
assert joined.axes == ["tp", "batch"], joined.axes
assert labels == ["tp=1 batch=1", "tp=1 batch=2", "tp=2 batch=1", "tp=2 batch=2"], labels
assert all(str(s) == "ok" for s in joined.points["status"]), list(joined.points["status"])
print("python join:", ", ".join(labels))
PY

# 4. Roofs (srun) and collectives (mpirun) over the six ranks of the three nodes: the roofs hold
#    each collective within a node, one rank on each node and over all six ranks.
export RIDGELINE_ARGS="--quick"
submit roofs "$repo/slurm/roofs.sbatch" || fail "the roofs job failed"
check_file "$submit_dir/ridgeline-roofs-$job.h5" roofs
export RIDGELINE_LAUNCHER=mpirun
export RIDGELINE_ARGS="--max-bytes 64K --iters 2 --warmup 1"
submit collectives "$repo/slurm/collectives.sbatch" || fail "the collectives job failed"
check_file "$submit_dir/ridgeline-collectives-$job.h5" collectives

# 5. A slow link: the third node's veth pair slowed to 10 Mbit/s each way (a token bucket), roofs
#    (mpirun, sendrecv only) must name the third node's ranks, and only them, for their link to
#    the other nodes (each rank's fastest exchange with its best partner node; the limit 80 %, far
#    beyond the healthy ranks' spread on two shared cores, far within the slowed link's drop).
slow_link() { # slow_link add|del: the token bucket on both ends of rlnode3's veth pair
  local qdisc=(root tbf rate 10mbit burst 16kb latency 400ms)
  [[ $1 == add ]] || qdisc=(root)
  ip netns exec "$tag-rlnode3" tc qdisc "$1" dev eth0 "${qdisc[@]}" &&
    ip netns exec "$hub" tc qdisc "$1" dev "v3-$tag" "${qdisc[@]}"
}
if ! command -v tc > /dev/null || ! slow_link add; then
  # A kernel without the token bucket (sch_tbf) cannot slow a link: said, not hidden.
  slow_link del 2> /dev/null || true
  log "slow-link: SKIPPED: tc could not put a token bucket on rlnode3's veth pair here"
else
  export RIDGELINE_ARGS="--quick --collectives sendrecv --outlier-pct 80"
  slow_rc=0
  submit slow-link "$repo/slurm/roofs.sbatch" || slow_rc=$?
  slow_link del || fail "could not restore rlnode3's link"
  (( slow_rc == 0 )) || fail "the roofs job over the slowed link failed"
  bounded 60 python3 - "$submit_dir/ridgeline-roofs-$job.h5" <<'PY' || fail "the slowed link of rlnode3 was not named"
import sys
import h5py
text = lambda v: v.decode() if isinstance(v, bytes) else str(v)
with h5py.File(sys.argv[1], "r") as f:
    gpus = f["roofs/gpus"][()]
for g in gpus:
    node, link, why = text(g["node"]), float(g["inter_node_gbps"]), text(g["outlier"])
    print(f"rank {int(g['rank'])} {node}: inter-node link {link:.4f} GB/s, {why or '-'}")
    assert link > 0, f"rank {int(g['rank'])} measured no inter-node link"
    assert ("inter-node link" in why) == (node == "rlnode3"), (node, why)
PY
fi

# 6. A fault: a long run over the three nodes (TP 2 in each x DP 3, mpirun) whose two ranks on
#    the third node are killed (SIGKILL, inside that node's namespace) once the run is under way.
#    The job must end within the run's --timeout and a margin, non-zero, name the third node in
#    its log, leave no file that validates as complete and no rank running on any node.
fault_timeout_s=30
fault_margin_s=45
export RIDGELINE_ARGS="--tp auto --dp 3 --warmup 1 --iters 100000 --roofs none --timeout $fault_timeout_s"
fault_rc=0
(cd "$submit_dir" && bounded 240 ip netns exec "$tag-rlctl" env "${job_env[@]}" \
  sbatch --parsable --wait "${sbatch_overrides[@]}" --job-name=ridgeline-fault \
  "$repo/slurm/run.sbatch") > "$state/fault-sbatch.out" 2>&1 &
fault_sbatch=$!
# node_ranks HOST: the pids of the ridgeline processes running in HOST's namespace.
node_ranks() {
  local pid
  for pid in $(ip netns pids "$tag-$1" 2> /dev/null); do
    [[ $(cat "/proc/$pid/comm" 2> /dev/null) == ridgeline ]] && echo "$pid"
  done
  return 0
}
fault_started=0
wait_until "the fault job's two ranks on rlnode3" 90 \
  bash -c "(( \$(for p in \$(ip netns pids '$tag-rlnode3'); do cat /proc/\$p/comm 2> /dev/null; done |
             grep -cx ridgeline) == 2 ))" || fault_started=$?
fault_job=$(in_ns rlctl squeue -h -n ridgeline-fault -o %i | head -n 1)
[[ -n $fault_job ]] && jobs_started+=("$fault_job")
[[ -n $fault_job ]] || fail "the fault job is not in the queue"
(( fault_started == 0 )) || fail "the fault job's ranks never started on rlnode3"
# The ranks are measuring when they are killed: rank 0's progress line (every 5 s) counts
# iterations in the job's log.
wait_until "the fault job's first iterations" 60 \
  grep -q "^run: [0-9]* of [0-9]* iterations" "$submit_dir/ridgeline-$fault_job.out" ||
  fail "the fault job never reported its iterations"
victims=$(node_ranks rlnode3 | tr '\n' ' ')
[[ -n $victims ]] || fail "the fault job's ranks on rlnode3 ended before they were killed"
# shellcheck disable=SC2086 # one pid per word
kill -KILL $victims
killed_s=$SECONDS
log "fault: killed the ranks of job ${fault_job:-?} on rlnode3 (pids $victims)"
# The job's end is polled once a second here (sbatch --wait polls ever more slowly).
wait_until "the fault job's end" $((fault_timeout_s + fault_margin_s)) \
  bash -c "[[ -z \$(ip netns exec '$tag-rlctl' squeue -h -j '$fault_job' \
             -t pending,running,completing,configuring,suspended -o %i) ]]" || true
took_s=$((SECONDS - killed_s))
# A job still running is cancelled here, so that its log is complete below.
(( took_s <= fault_timeout_s + fault_margin_s )) || in_ns rlctl timeout 10 scancel "$fault_job" || true
wait "$fault_sbatch" || fault_rc=$?
log "fault: job ${fault_job:-?} finished with exit code $fault_rc, ${took_s}s after the kill"
fault_log=$submit_dir/ridgeline-$fault_job.out
echo "---- $(basename "$fault_log")"
cat "$fault_log" 2> /dev/null || true
echo "----"
(( fault_rc != 0 )) || fail "the fault job exited 0 after its ranks on rlnode3 were killed"
(( took_s <= fault_timeout_s + fault_margin_s )) ||
  fail "the fault job still ran ${took_s}s after the kill, beyond --timeout ${fault_timeout_s}s + ${fault_margin_s}s"
named=$(grep -E "rlnode3.*(signal 9|[Kk]illed|is gone|not answering)|(signal 9|[Kk]illed|is gone|not answering).*rlnode3" \
  "$fault_log" | head -n 1)
[[ -n $named ]] || fail "the fault job's log does not name rlnode3 as the node whose ranks were killed"
log "fault: the log says: $named"
fault_file=$submit_dir/ridgeline-$fault_job.h5
if [[ -e $fault_file ]]; then
  if bounded 60 "$bin" validate "$fault_file" > "$state/fault-validate.out" 2>&1 &&
    ! grep -qi incomplete "$state/fault-validate.out"; then
    fail "the fault job left $fault_file, which validates as complete"
  fi
fi
wait_until "no rank of the fault job left on any node" 30 \
  bash -c "! for h in ${nodes[*]}; do ip netns pids '$tag-'\$h; done | xargs -r -I{} cat /proc/{}/comm 2> /dev/null | grep -qx ridgeline" ||
  fail "ranks of the fault job still run after it ended"

# Nothing was written into the source tree.
stray=$(git -C "$repo" status --porcelain --untracked-files=all -- '*.h5' '*.out' | head -n 5)
[[ -z $stray ]] || fail "the jobs wrote into the source tree: $stray"
