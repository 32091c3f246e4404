#!/bin/bash
# Submits slurm/run.sbatch and slurm/scaling.sbatch to a real single-node Slurm on localhost
# (munged, slurmctld and slurmd started here from a generated slurm.conf) and checks each job:
# exit code, HDF5 files and logs in the submit directory (none in the source tree), `ridgeline
# validate`, the scaling summary through srun (PMIx) with one failing point kept apart from the
# others. Installs Slurm and munge
# with apt-get when missing. Every wait is bounded (RIDGELINE_SLURM_CI_BUDGET_S in all, default
# 240 s) and the daemons are stopped on exit, so CI never hangs. Needs root: the daemons and
# the jobs run as root, without cgroups.
#   scripts/slurm-ci.sh BUILD_DIR
set -euo pipefail

ci=slurm-ci
# shellcheck source=scripts/slurm-ci-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/slurm-ci-common.sh"
# With at most ~40 s of clean-up after it, the whole script stays under 5 minutes.
ci_setup 240 "slurmd runs jobs as root here; no cgroups" "$@"

install_slurm() {
  local tool missing=0
  for tool in munged mungekey slurmctld slurmd sbatch sinfo scancel; do
    command -v "$tool" > /dev/null || missing=1
  done
  (( missing )) || return 0
  log "installing munge and Slurm with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  bounded 120 apt-get update -qq
  bounded 180 apt-get install -y -qq --no-install-recommends munge slurmctld slurmd slurm-client \
    > /dev/null
}

state=""
pids=()
job=""
cleanup() {
  local rc=$?
  trap - EXIT
  if [[ -n $job ]]; then
    timeout 10 scancel "$job" 2> /dev/null || true
    # slurmd ends the job's processes: stopping it before the job is gone would leave them.
    local deadline_s=$((SECONDS + 20))
    while (( SECONDS < deadline_s )) && [[ -n $(timeout 5 squeue -h -j "$job" 2> /dev/null) ]]; do
      sleep 1
    done
  fi
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  for pid in "${pids[@]}"; do
    timeout 10 tail --pid="$pid" -f /dev/null 2> /dev/null || kill -KILL "$pid" 2> /dev/null || true
  done
  if [[ -n $state ]]; then
    if (( rc == 0 )); then
      rm -rf "$state"
    else
      for f in "$state"/log/*; do
        echo "---- $f (last 30 lines)"
        tail -n 30 "$f"
      done
      echo "slurm-ci: kept $state for inspection"
    fi
  fi
  log "$( (( rc == 0 )) && echo PASSED || echo "FAILED (exit $rc)")"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

install_slurm
state=$(mktemp -d /tmp/ridgeline-slurm.XXXXXX)
mkdir -p "$state"/{munge,log,ctld,spool,results}
# munged wants its socket directory searchable by all; the key itself stays 0600.
chmod 755 "$state" "$state/munge"

start_munged "$state/munge" "$state/log/munged.out"
log "munged up"

# Two free TCP ports on localhost, so a system Slurm or another CI run does not collide.
read -r ctld_port slurmd_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
mem_mib=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
export SLURM_CONF=$state/slurm.conf
cat > "$SLURM_CONF" <<CONF
ClusterName=ridgeline-ci
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
# Containers have no usable cgroups: track job processes through /proc, bind nothing.
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
# A cancelled job (on timeout) is killed 5 s after SIGTERM, not the default 30 s.
KillWait=5
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=300
# The margin keeps slurmd from reporting less memory than configured (which drains the node).
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$((mem_mib - mem_mib / 10)) State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF

# In the foreground (-D) they log to stderr, into log/*.out, and their pids are ours to stop.
slurmctld -D -i -f "$SLURM_CONF" > "$state/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N localhost -f "$SLURM_CONF" > "$state/log/slurmd.out" 2>&1 &
pids+=($!)
wait_until "node localhost idle in sinfo" 60 \
  bash -c '[[ $(sinfo -h -N -n localhost -o %T) == idle ]]'
log "slurmctld and slurmd up; $(sinfo -h -N -o '%N %T %c CPUs %m MiB')"

# The jobs are submitted from a directory of their own: every output must land there (the
# submit directory), none in the source tree. sbatch's command line overrides the scripts' GPU
# and exclusive-node requests, which a Slurm without GPUs (no GRES) cannot grant.
submit_dir=$state/submit
mkdir -p "$submit_dir"
sbatch_overrides=(--gpus-per-task=0 --oversubscribe)

# submit SCRIPT: sbatch --wait on SCRIPT from the submit directory, prints the job's log, sets
# $job and $job_log; returns the job's exit code.
submit() {
  local rc=0 name
  (cd "$submit_dir" && bounded 150 sbatch --parsable --wait "${sbatch_overrides[@]}" "$1") \
    > "$state/sbatch.out" || rc=$?
  job=$(head -n 1 "$state/sbatch.out" | cut -d ';' -f 1)
  log "$(basename "$1"): job ${job:-?} finished with exit code $rc"
  name=$(sed -n 's/^#SBATCH --output=//p' "$1" | sed "s/%j/$job/")
  job_log=$submit_dir/$name
  if [[ -n $job && -f $job_log ]]; then
    echo "---- job $job output ($job_log)"
    cat "$job_log"
    echo "----"
  elif [[ -n $job ]]; then
    echo "slurm-ci: no job log $job_log in the submit directory" >&2
    return 1
  fi
  return "$rc"
}

# not_in_source JOB: the job wrote nothing into the source tree.
not_in_source() {
  local stray
  stray=$(find "$repo" -path "$repo/build" -prune -o \( -name "ridgeline-$1.*" -o -name "ridgeline-$1-*" \
    -o -name "ridgeline-scaling-$1.*" \) -print | head -n 5)
  if [[ -n $stray ]]; then
    echo "slurm-ci: job $1 wrote into the source tree: $stray" >&2
    return 1
  fi
}

# The scripts find the checkout from their own path and the binary from RIDGELINE_BIN.
unset RIDGELINE_REPO RIDGELINE_RESULTS RIDGELINE_OUT
export RIDGELINE_BIN=$bin
export RIDGELINE_CONFIG=$repo/models/tiny.toml
export RIDGELINE_MPIRUN_FLAGS="--oversubscribe --allow-run-as-root"
export RIDGELINE_ARGS="--tp 2 --warmup 1 --iters 3"
submit "$repo/slurm/run.sbatch"
out=$submit_dir/ridgeline-$job.h5
if [[ ! -f $out ]]; then
  echo "slurm-ci: the job did not write $out" >&2
  exit 1
fi
not_in_source "$job"
bounded 60 mpirun -np 1 $RIDGELINE_MPIRUN_FLAGS "$bin" validate "$out"

# Scaling through srun (PMIx) over TP = 1, 3, 2 on the node's 2 tasks: TP = 3 is invalid for the
# tiny model (8 heads), so that point fails while TP = 1 and 2 still run, keep their files and
# summary lines, and the job lists both outcomes and exits non-zero.
export RIDGELINE_ARGS="--warmup 1 --iters 3"
export RIDGELINE_LAUNCHER=srun
export RIDGELINE_SRUN_FLAGS="--mpi=pmix --overcommit"
export RIDGELINE_TP_LIST="1 3 2"
scaling_rc=0
submit "$repo/slurm/scaling.sbatch" || scaling_rc=$?
if (( scaling_rc == 0 )); then
  echo "slurm-ci: the scaling job exited 0 although its TP=3 point failed" >&2
  exit 1
fi
for tp in 1 2; do
  if [[ ! -f $submit_dir/ridgeline-$job-tp$tp.h5 ]]; then
    echo "slurm-ci: the scaling job did not write ridgeline-$job-tp$tp.h5 in the submit directory" >&2
    exit 1
  fi
done
if [[ -e $submit_dir/ridgeline-$job-tp3.h5 ]]; then
  echo "slurm-ci: the failed TP=3 point left a file that looks complete" >&2
  exit 1
fi
not_in_source "$job"
rows=$(grep -c "ridgeline-$job-tp[12].h5 " "$job_log" || true)
if (( rows != 2 )); then
  echo "slurm-ci: expected 2 summary lines in the scaling job's output, found $rows" >&2
  exit 1
fi
for line in "succeeded: tp=1" "succeeded: tp=2" "FAILED: tp=3 (run exited 2)" "2 succeeded, 1 failed"; do
  if ! grep -qF "$line" "$job_log"; then
    echo "slurm-ci: the scaling job's summary lacks '$line'" >&2
    exit 1
  fi
done
