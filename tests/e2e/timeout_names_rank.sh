#!/usr/bin/env bash
# A rank that stops (SIGSTOP) mid-run: --timeout ends the job, and the message of the ranks that
# wait names the stopped rank, its host and where it is, not only the waiting rank. A rank that
# stops before MPI is up: --timeout bounds that phase too (the job's watchdog starts on the first
# line of main), and the waiting rank names itself and the phase.
# Usage: timeout_names_rank.sh RIDGELINE_BIN REPO_DIR
set -uo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
stopped=""
cleanup() {
  # The stopped rank is this test's own process: end it by its pid.
  if [ -n "$stopped" ]; then kill -CONT "$stopped" 2>/dev/null; kill -KILL "$stopped" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
children() { cat /proc/"$1"/task/*/children 2>/dev/null; }
out=$work/stall.h5

timeout 120 mpiexec -n 4 --oversubscribe "$bin" run --config "$repo/models/tiny.toml" --tp 4 \
  --warmup 1 --iters 1000000 --roofs none --timeout 8 --out "$out" >"$work/out.log" 2>"$work/err.log" &
job=$!
# Rank 3 of this job: the child of mpiexec (the child of timeout) with that rank in its environment.
for _ in $(seq 1 300); do
  for p in $(children $(children "$job")); do
    grep -qx "OMPI_COMM_WORLD_RANK=3" < <(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null) && stopped=$p
  done
  [ -z "$stopped" ] || break
  sleep 0.2
done
[ -n "$stopped" ] || { echo "rank 3 not found" >&2; kill "$job"; exit 1; }
# Into the iterations: rank 0's first progress line says so (at most 60 s).
for _ in $(seq 1 600); do
  grep -q "iterations" "$work/err.log" && break
  sleep 0.1
done
kill -STOP "$stopped"
wait "$job"
rc=$?
cat "$work/err.log"
[ "$rc" -ne 0 ] || { echo "expected a non-zero exit" >&2; exit 1; }
host=$(hostname)
grep -Eq "timed out after 8 s: .*rank 3 \(host $host\) did not (reach|get through) .*stopped responding" \
  "$work/err.log" || { echo "the timeout message does not name rank 3" >&2; exit 1; }
echo "timeout names the stopped rank"

# Rank 1 stops before its MPI_Init: rank 0 waits in MPI's start, where no phase of a command has
# armed its watchdog yet.
timeout 60 mpiexec -n 2 --oversubscribe bash -c \
  'if [ "${OMPI_COMM_WORLD_RANK:-}" = 1 ]; then kill -STOP $$; fi; exec "$@"' _ \
  "$bin" run --config "$repo/models/tiny.toml" --timeout 3 --roofs none -q --out "$work/early.h5" \
  >"$work/early.log" 2>"$work/early.err"
rc=$?
cat "$work/early.err"
[ "$rc" -eq 124 ] || { echo "expected exit 124 from the watchdog, got $rc" >&2; exit 1; }
grep -q "^\[rank 0 $host\] ridgeline: timed out after 3 s: starting: MPI" "$work/early.err" ||
  { echo "no timeout message from rank 0 naming the start" >&2; exit 1; }
[ ! -e "$work/early.h5" ] || { echo "a file was written" >&2; exit 1; }
echo "timeout bounds the start"
