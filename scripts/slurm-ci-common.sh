# shellcheck shell=bash disable=SC2034,SC2154
# Sourced by the Slurm CI scripts, never run: their arguments, time budget and the bounded waits
# under it. The sourcing script sets `ci` (its name, for messages) and calls
# `ci_setup DEFAULT_BUDGET_S WHY_ROOT "$@"`, which checks its one argument (the build directory)
# and sets `repo`, `bin` and `budget_s`; the clock starts at sourcing.
start_s=$SECONDS

# ci_setup DEFAULT_BUDGET_S WHY_ROOT BUILD_DIR: the checks both scripts make before anything
# runs, each refusal one line and exit 2.
ci_setup() {
  local default_s=$1 why_root=$2
  shift 2
  if (( $# != 1 )) || [[ ! -d $1 ]]; then
    echo "usage: $ci.sh BUILD_DIR (the build holding src/ridgeline, a directory)" >&2
    exit 2
  fi
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  bin=$(cd "$1" && pwd)/src/ridgeline
  budget_s=${RIDGELINE_SLURM_CI_BUDGET_S:-$default_s}
  # Checked as text before any arithmetic, which would run the commands an unchecked value holds.
  if [[ ! $budget_s =~ ^[1-9][0-9]{0,5}$ ]]; then
    echo "$ci: RIDGELINE_SLURM_CI_BUDGET_S must be a positive integer, not '$budget_s'" >&2
    exit 2
  fi
  if [[ ! -x $bin ]]; then
    echo "$ci: no binary at $bin" >&2
    exit 2
  fi
  if (( EUID != 0 )); then
    echo "$ci: must run as root ($why_root)" >&2
    exit 2
  fi
}

log() { echo "$ci [$((SECONDS - start_s))s]: $*"; }

# bounded MAX_S CMD...: CMD for at most MAX_S seconds and never past the total budget.
bounded() {
  local max_s=$1 left_s=$((budget_s - (SECONDS - start_s)))
  shift
  (( left_s < max_s )) && max_s=$left_s
  if (( max_s <= 0 )); then
    echo "$ci: the time budget of ${budget_s}s is spent" >&2
    return 124
  fi
  timeout --kill-after=5 "$max_s" "$@"
}

# wait_until WHAT MAX_S CMD...: polls CMD once a second until it succeeds.
wait_until() {
  local what=$1 max_s=$2
  shift 2
  local deadline_s=$((SECONDS + max_s))
  until bounded 10 "$@" > /dev/null 2>&1; do
    if (( SECONDS >= deadline_s || SECONDS - start_s >= budget_s )); then
      echo "$ci: timed out after ${max_s}s waiting for $what" >&2
      return 1
    fi
    sleep 1
  done
}

# start_munged DIR LOG: a munged of its own (key, socket, files in DIR, so that a system munged
# is left alone) in the background, logging to LOG, its pid appended to `pids`; sets `sock`.
start_munged() {
  local dir=$1 log=$2
  sock=$dir/munge.socket
  bounded 10 mungekey --create --keyfile="$dir/munge.key"
  munged -F --force --socket="$sock" --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
    --seed-file="$dir/munged.seed" > "$log" 2>&1 &
  pids+=($!)
  wait_until "munged" 15 bash -c "munge --socket='$sock' -n | unmunge --socket='$sock'"
}
