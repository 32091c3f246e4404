#!/usr/bin/env bash
# The batch scripts check their numbers before anything runs, without Slurm: an empty or zero TP
# list, a TP maximum of 0 and a count that is not a positive integer end the job with exit 2 and
# launch nothing, and a value holding a command ($(...) inside an array index, which bash
# arithmetic would run) is refused, never run; so are a job array whose task ids have gaps
# (a slice would never run) and one output file for every task of an array. A good array task
# runs its own slice into its own file. mpirun and the binary are stand-ins that record being
# launched and how.
# Usage: sbatch_arguments.sh REPO_DIR
set -uo pipefail
repo=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin" "$work/out"
printf '#!/bin/sh\necho "$*" >>"%s/launched"\n' "$work" >"$work/bin/mpirun"
printf '#!/bin/sh\nexit 0\n' >"$work/bin/ridgeline"
chmod +x "$work/bin/mpirun" "$work/bin/ridgeline"

failures=0
# expect SCRIPT EXIT_CODE EXPECTED_TEXT [VAR=VALUE...]: runs slurm/SCRIPT in a clean environment.
expect() {
  local script=$1 code=$2 expected=$3
  shift 3
  rm -f "$work/launched" "$work/out/pwned"
  (cd "$work/out" && env -i PATH="$work/bin:/usr/bin:/bin" HOME="$work" SLURM_SUBMIT_DIR="$work/out" \
    SLURM_JOB_ID=1 SLURM_NTASKS_PER_NODE=2 RIDGELINE_BIN="$work/bin/ridgeline" RIDGELINE_PYTHON=true \
    "$@" bash "$repo/slurm/$script" >"$work/log" 2>&1)
  local rc=$? problem=""
  [ "$rc" -eq "$code" ] || problem="exited $rc, not $code"
  grep -qF -- "$expected" "$work/log" || problem="${problem:+$problem; }no '$expected' in its output"
  [ ! -e "$work/out/pwned" ] || problem="${problem:+$problem; }it ran the command in a variable"
  if [ "$code" -eq 2 ] && [ -e "$work/launched" ]; then
    problem="${problem:+$problem; }it launched a job"
  fi
  if [ -n "$problem" ]; then
    echo "FAIL [$script $*]: $problem"
    sed 's/^/    /' "$work/log"
    failures=$((failures + 1))
  else
    echo "ok   [$script $*]"
  fi
}

expect scaling.sbatch 2 "no TP degree to run" RIDGELINE_TP_LIST=
expect scaling.sbatch 2 "no TP degree to run" RIDGELINE_TP_LIST=,
expect scaling.sbatch 2 "must be a positive integer, not '0'" RIDGELINE_TP_LIST=0
expect scaling.sbatch 2 "must be a positive integer, not '0'" "RIDGELINE_TP_LIST=1 0"
expect scaling.sbatch 2 "must be a positive integer, not '0'" RIDGELINE_TP_MAX=0
expect scaling.sbatch 2 "must be a positive integer" 'RIDGELINE_TP_MAX=a[$(touch pwned)]'
expect scaling.sbatch 2 "must be a positive integer" 'SLURM_CPUS_PER_TASK=a[$(touch pwned)]'
expect scaling.sbatch 2 "must be a positive integer" 'SLURM_NTASKS_PER_NODE=a[$(touch pwned)]'
expect run.sbatch 2 "must be a positive integer" 'SLURM_JOB_NUM_NODES=a[$(touch pwned)]'
expect run.sbatch 2 "must be a positive integer" 'SLURM_NTASKS_PER_NODE=a[$(touch pwned)]'
expect run.sbatch 2 "must be a positive integer" SLURM_CPUS_PER_TASK=0
expect roofs.sbatch 2 "RIDGELINE_LAUNCHER must be mpirun or srun" RIDGELINE_LAUNCHER=ssh
expect collectives.sbatch 2 "must be a positive integer" 'SLURM_JOB_NUM_NODES=a[$(touch pwned)]'
array=(SLURM_ARRAY_JOB_ID=7 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=3 SLURM_ARRAY_TASK_COUNT=3)
expect sweep.sbatch 2 "must be consecutive" SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_JOB_ID=7 \
  SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=5 SLURM_ARRAY_TASK_COUNT=2
expect sweep.sbatch 2 "must be an integer" 'SLURM_ARRAY_TASK_ID=a[$(touch pwned)]' "${array[@]}"
expect sweep.sbatch 2 "RIDGELINE_OUT names one file" SLURM_ARRAY_TASK_ID=2 "${array[@]}" \
  RIDGELINE_OUT="$work/out/one.h5"
expect sweep.sbatch 0 "slice 2/3" SLURM_ARRAY_TASK_ID=2 "${array[@]}"
grep -q -- "sweep --tp 1,2 --slice 2/3 --out $work/out/ridgeline-sweep-7-2.h5" "$work/launched" || {
  echo "FAIL: array task 2 of 3 did not run slice 2/3 into ridgeline-sweep-7-2.h5:"
  sed 's/^/    /' "$work/launched"
  failures=$((failures + 1))
}
# The checks let a good list through: both points launch and succeed.
expect scaling.sbatch 0 "2 succeeded, 0 failed" "RIDGELINE_TP_LIST=1 2"
[ -e "$work/launched" ] || { echo "FAIL: the good list launched nothing"; failures=$((failures + 1)); }

[ "$failures" -eq 0 ] || { echo "$failures case(s) failed" >&2; exit 1; }
echo "sbatch arguments ok"
