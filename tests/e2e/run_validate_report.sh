#!/usr/bin/env bash
# End to end on the host backend: mpirun -> run -> HDF5 file -> validate -> report -> h5dump.
# Usage: run_validate_report.sh RIDGELINE_BIN REPO_DIR NP [run options...]
set -euo pipefail
bin=$1 repo=$2 np=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$work/run.h5

mpiexec -n "$np" --oversubscribe "$bin" run --config "$repo/models/tiny.toml" --warmup 1 --iters 3 \
  --out "$out" "$@" | tee "$work/run.log"
grep -q "check: passed\|check: skipped" "$work/run.log"
test -f "$out"
if ls "$work"/*.tmp.* >/dev/null 2>&1; then echo "temporary file left behind" >&2; exit 1; fi
"$bin" validate "$out"
"$bin" report "$out" | tee "$work/report.log"
grep -q "step time (ms): p50" "$work/report.log"
# The per-op table of report is the one run printed.
diff <(grep -E "^(op|[a-z0-9_]+ +(gemm|attention|norm|elementwise|collective|p2p))" "$work/run.log") \
     <(grep -E "^(op|[a-z0-9_]+ +(gemm|attention|norm|elementwise|collective|p2p))" "$work/report.log")
if command -v h5dump >/dev/null; then
  h5dump -H "$out" > "$work/h5dump.txt"
  for g in stack config topology ops ranks summary; do
    grep -Eq "(GROUP|DATASET) \"$g\"" "$work/h5dump.txt" || { echo "h5dump: no /$g" >&2; exit 1; }
  done
  last=$((np - 1))
  for r in $(seq 0 "$last"); do
    grep -q "GROUP \"$r\"" "$work/h5dump.txt" || { echo "h5dump: no /ranks/$r" >&2; exit 1; }
  done
fi
echo "e2e ok: np=$np $*"
