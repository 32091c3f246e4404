#!/usr/bin/env bash
# A collectives job killed midway: stdout holds every size measured until then (rows printed as
# sizes complete), the file holds those it last wrote and is marked incomplete: validate rejects
# it, report prints its tables marked PARTIAL.
# Usage: collectives_partial.sh RIDGELINE_BIN
set -uo pipefail
bin=$1
work=$(mktemp -d)
ranks=()
cleanup() {
  for p in "${ranks[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
children() { cat /proc/"$1"/task/*/children 2>/dev/null; }
out=$work/coll.h5
rows() { grep -cE '^ +[0-9]+ +[0-9]+ +fp32' "$1"; }

# The last sizes take seconds: the job is killed well before its end.
timeout 300 mpiexec -n 2 --oversubscribe "$bin" collectives --collectives all_reduce --max-bytes 64M \
  --iters 100 --warmup 2 --out "$out" >"$work/out.log" 2>"$work/err.log" &
job=$!
for _ in $(seq 1 600); do
  [ -f "$out" ] && [ "$(rows "$work/out.log")" -ge 3 ] && break
  sleep 0.1
done
# The ranks: the children of mpiexec (the child of timeout).
for p in $(children $(children "$job")); do
  grep -q "^OMPI_COMM_WORLD_RANK=" < <(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null) && ranks+=("$p")
done
[ "${#ranks[@]}" -eq 2 ] || { echo "expected 2 ranks, found ${#ranks[@]}" >&2; exit 1; }
# As a scheduler ends a job: every rank killed at once.
kill -KILL "${ranks[@]}"
wait "$job"
cat "$work/out.log"
printed=$(rows "$work/out.log")
[ "$printed" -ge 3 ] || { echo "stdout holds $printed sizes, expected 3 or more" >&2; exit 1; }
grep -q "Avg bus bandwidth and interconnect roof" "$work/out.log" && { echo "the job was not killed midway" >&2; exit 1; }
test -f "$out" || { echo "no file left" >&2; exit 1; }

"$bin" validate "$out" >"$work/validate.log" 2>&1 && { cat "$work/validate.log"; echo "validate accepted a partial file" >&2; exit 1; }
cat "$work/validate.log"
grep -q "incomplete" "$work/validate.log" || { echo "validate does not say the file is incomplete" >&2; exit 1; }
"$bin" report "$out" >"$work/report.log" 2>&1 || { cat "$work/report.log"; echo "report refused a partial file" >&2; exit 1; }
cat "$work/report.log"
grep -q "^PARTIAL: incomplete" "$work/report.log" || { echo "report does not say the file is partial" >&2; exit 1; }
kept=$(rows "$work/report.log")
[ "$kept" -ge 1 ] && [ "$kept" -le "$printed" ] || { echo "the file holds $kept sizes, stdout $printed" >&2; exit 1; }
# The sizes the file holds are the first ones printed, digit for digit.
diff <(grep -E '^ +[0-9]+ +[0-9]+ +fp32' "$work/report.log") \
     <(grep -E '^ +[0-9]+ +[0-9]+ +fp32' "$work/out.log" | head -n "$kept") ||
  { echo "the file's sizes differ from those printed" >&2; exit 1; }
echo "partial collectives ok: $printed sizes printed, $kept in the file"
