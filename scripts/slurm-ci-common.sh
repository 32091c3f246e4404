# Sourced by the Slurm CI scripts, never run: their time budget and the bounded waits under it.
# The sourcing script sets `ci` (its name, for messages) and `budget_s` (seconds, checked as a
# positive integer) before sourcing; the clock starts here.
start_s=$SECONDS

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
