#!/usr/bin/env bash
# Both file layouts at 32 ranks (oversubscribed, a tiny model): run -> validate -> report, then
# the Python reader on both files (scripts/tests/test_file_layouts.py). Where HDF5 is serial,
# the single-file layout must be refused with a clear message instead.
# Usage: file_layouts.sh RIDGELINE_BIN REPO_DIR
set -Eeuo pipefail
bin=$1 repo=$2
np=32
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# On a failure, say which command failed and show the logs of the runs so far.
trap 'rc=$?; echo "file_layouts.sh: line $LINENO failed (exit $rc): $BASH_COMMAND" >&2
      for f in "$work"/*.log; do [ -f "$f" ] && { echo "== $f" >&2; tail -30 "$f" >&2; }; done' ERR
run=(mpiexec -n "$np" --oversubscribe "$bin" run --config "$repo/models/tiny.toml" --dp "$np"
     --hidden 64 --heads 4 --kv-heads 2 --ffn-hidden 128 --layers 1 --batch 1 --seq 16
     --warmup 1 --iters 2 --roofs none)

check_file() {  # FILE LOG: written, valid, reported, no temporary left behind
  grep -q "check: skipped" "$2"
  test -f "$1"
  if ls "$work"/*.tmp.* >/dev/null 2>&1; then echo "temporary file left behind" >&2; exit 1; fi
  "$bin" validate "$1"
  # Into a file first: grep -q stops reading at its match, and report would die of SIGPIPE.
  "$bin" report "$1" >"$work/report.txt"
  grep -q "step time (ms): p50" "$work/report.txt"
}

"$bin" env > "$work/env.txt"
if grep -q "hdf5_build = parallel" "$work/env.txt"; then
  "${run[@]}" --file-layout single --out "$work/single.h5" > "$work/single.log"
  check_file "$work/single.h5" "$work/single.log"
  if ls "$work"/single.node*.h5 >/dev/null 2>&1; then echo "single layout wrote node files" >&2; exit 1; fi
else
  if "${run[@]}" --file-layout single --out "$work/single.h5" > "$work/single.log" 2>&1; then
    echo "--file-layout single accepted by a build with serial HDF5" >&2; exit 1
  fi
  grep -q "needs parallel HDF5" "$work/single.log"
fi

# The spelling, with four node files of eight ranks each on this one host.
"${run[@]}" --per-rank-files --ranks-per-file 8 --out "$work/per-node.h5" > "$work/per-node.log"
check_file "$work/per-node.h5" "$work/per-node.log"
grep -q "links to 4 node files" "$work/per-node.log"
for k in 0 1 2 3; do test -f "$work/per-node.node$k.h5"; done

RIDGELINE_BIN="$bin" RIDGELINE_LAYOUT_DIR="$work" python3 -m pytest -q -p no:cacheprovider \
  "$repo/scripts/tests/test_file_layouts.py"
echo "e2e ok: file layouts at np=$np"
