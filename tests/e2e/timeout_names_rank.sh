#!/usr/bin/env bash
# A rank that stops (SIGSTOP) mid-run: --timeout ends the job, and the message of the ranks that
# wait names the stopped rank, its host and where it is, not only the waiting rank.
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
