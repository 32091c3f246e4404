#!/usr/bin/env bash
# A long run shows rank 0's progress line on stderr (plain lines, no carriage returns, when
# stderr is not a terminal), ending with a final line; --quiet shows none.
# Usage: progress_line.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Long enough for a periodic line (every 5 s into a file): the quick roofs plus the iterations.
run=(run --config "$repo/models/tiny.toml" --tp 2 --warmup 1 --iters 800 --backend host)

mpiexec -n 2 --oversubscribe "$bin" "${run[@]}" --out "$work/a.h5" >"$work/a.log" 2>"$work/a.err"
cat "$work/a.err"
grep -Eq "^run: .*elapsed [0-9]" "$work/a.err" || { echo "no periodic progress line" >&2; exit 1; }
grep -Eq "^run: done in [0-9]" "$work/a.err" || { echo "no final progress line" >&2; exit 1; }
if grep -q $'\r' "$work/a.err"; then echo "carriage returns in a log file" >&2; exit 1; fi
if grep -q "^run: " "$work/a.log"; then echo "progress on stdout" >&2; exit 1; fi
# One line a few seconds at most: never two within 2 s (the run has its timestamps in order).
[ "$(grep -c "^run: .*elapsed" "$work/a.err")" -le 60 ] || { echo "too many progress lines" >&2; exit 1; }
grep -q "^wrote $work/a.h5" "$work/a.log"

mpiexec -n 2 --oversubscribe "$bin" "${run[@]}" --quiet --out "$work/b.h5" >"$work/b.log" 2>"$work/b.err"
if grep -q "^run: " "$work/b.err"; then echo "--quiet printed progress" >&2; cat "$work/b.err"; exit 1; fi
grep -q "^wrote $work/b.h5" "$work/b.log"
echo "progress line ok"
