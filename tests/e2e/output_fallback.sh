#!/usr/bin/env bash
# No result is lost to an output path that cannot be written.
# - Up front: --out in a read-only directory, or naming a directory, is refused (exit 2) before
#   anything is measured, for run, sweep, roofs and collectives, and --json/--markdown too.
# - At the end: when the directory turned read-only (or a directory took the file's name) while
#   the job ran, the summary is printed anyway, the file goes to a fallback path in $TMPDIR that
#   is named on stderr and is valid, and the job exits 4.
# Usage: output_fallback.sh RIDGELINE_BIN REPO_DIR
set -uo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
# Root writes into read-only directories: without CAP_DAC_OVERRIDE it obeys the mode bits too.
as_user=()
if [ "$(id -u)" -eq 0 ]; then as_user=(setpriv --bounding-set -dac_override,-dac_read_search); fi
mkdir "$work/ro" "$work/tmp"
chmod 555 "$work/ro"
tiny=(--config "$repo/models/tiny.toml" --tp 2 --warmup 1 --iters 3 --backend host --quiet)

refused() {  # EXPECTED_TEXT COMMAND...
  local expected=$1
  shift
  local rc
  "${as_user[@]}" timeout 120 mpiexec -n 2 --oversubscribe "$bin" "$@" >"$work/refused.log" 2>&1
  rc=$?
  cat "$work/refused.log"
  [ "$rc" -eq 2 ] || { echo "expected exit 2, got $rc: $*" >&2; exit 1; }
  grep -qF -- "$expected" "$work/refused.log" || { echo "no '$expected': $*" >&2; exit 1; }
  grep -q "^op \|^wrote\|Avg bus\|^ridgeline sweep:\|^roofs (" "$work/refused.log" && { echo "measured before refusing: $*" >&2; exit 1; }
  [ -z "$(ls -A "$work/ro")" ] || { echo "a file was left in the read-only directory" >&2; exit 1; }
}
refused "cannot create a file in '$work/ro'" run "${tiny[@]}" --roofs none --out "$work/ro/run.h5"
refused "is a directory" run "${tiny[@]}" --roofs none --out "$work"
refused "names a directory" run "${tiny[@]}" --roofs none --out "$work/tmp/"
refused "--json '$work/ro/run.json'" run "${tiny[@]}" --roofs none --out "$work/run.h5" --json "$work/ro/run.json"
refused "--markdown '$work/ro/s.md'" sweep "${tiny[@]}" --roofs none --batch 1,2 --out "$work/s.h5" --markdown "$work/ro/s.md"
refused "cannot create a file in '$work/ro'" sweep "${tiny[@]}" --roofs none --batch 1,2 --out "$work/ro/s.h5"
refused "cannot create a file in '$work/ro'" roofs --quick --out "$work/ro/roofs.h5"
refused "is a directory" collectives --max-bytes 1K --out "$work/ro"

# The directory turns read-only while the run measures (after the check up front: the roofs
# line comes later), or a directory takes the file's name: the final write fails.
late() {  # HOW (chmod | mkdir)
  local how=$1 dir=$work/late-$1 rc
  mkdir "$dir"
  TMPDIR=$work/tmp "${as_user[@]}" mpiexec -n 2 --oversubscribe "$bin" run "${tiny[@]}" --out "$dir/run.h5" \
    --json "$dir/run.json" >"$work/late.log" 2>"$work/late.err" &
  local job=$!
  for _ in $(seq 1 600); do
    grep -q "measuring a short version of the roofs" "$work/late.log" && break
    sleep 0.1
  done
  if [ "$how" = chmod ]; then chmod 555 "$dir"; else mkdir "$dir/run.h5" "$dir/run.json"; fi
  wait "$job"
  rc=$?
  cat "$work/late.log" "$work/late.err"
  [ "$rc" -eq 4 ] || { echo "expected exit 4 ($how), got $rc" >&2; exit 1; }
  grep -q "^step time (ms): p50" "$work/late.log" || { echo "no summary ($how)" >&2; exit 1; }
  grep -q "cannot write --out '$dir/run.h5'" "$work/late.err" || { echo "no reason given ($how)" >&2; exit 1; }
  local saved json
  saved=$(sed -n "s/^ridgeline: --out results written to '\(.*\)' instead.*/\1/p" "$work/late.err")
  json=$(sed -n "s/^ridgeline: --json results written to '\(.*\)' instead.*/\1/p" "$work/late.err")
  case "$saved" in "$work/tmp/run-"*.h5) ;; *) echo "fallback '$saved' not in \$TMPDIR ($how)" >&2; exit 1 ;; esac
  grep -q "^wrote $saved" "$work/late.log" || { echo "stdout does not name the fallback ($how)" >&2; exit 1; }
  "$bin" validate "$saved" || { echo "the fallback file is not valid ($how)" >&2; exit 1; }
  python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$json" || { echo "bad fallback JSON ($how)" >&2; exit 1; }
  rm -f "$work"/tmp/*
}
late chmod
late mkdir
echo "output fallback ok"
