#!/usr/bin/env bash
# Measures the golden fixtures once on the host backend (run, sweep, roofs and collectives files
# of the tiny model, two ranks) in a scratch directory, with the binary on PATH and relative
# paths so that the files record no directory of the machine that made them, and copies them
# here. Run it only when the file layout changes; then regenerate the golden outputs
# (RIDGELINE_UPDATE_GOLDEN=1 tests/e2e/golden_reports.sh BIN REPO) and review both diffs.
# Usage: tests/golden/make_fixtures.sh RIDGELINE_BIN
set -euo pipefail
bin_dir=$(cd "$(dirname "$1")" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/models"
cp "$here/../../models/tiny.toml" "$work/models/"
cd "$work"
export PATH="$bin_dir:$PATH" OPENBLAS_NUM_THREADS=1
mpi=(mpiexec -n 2 --oversubscribe)
"${mpi[@]}" ridgeline roofs --memory-max-bytes 16M --out roofs.h5 >/dev/null
"${mpi[@]}" ridgeline run --config models/tiny.toml --tp 2 --batch 2 --warmup 1 --iters 5 \
  --roofs roofs.h5 --overlap none,async --out run.h5 >/dev/null
"${mpi[@]}" ridgeline sweep --config models/tiny.toml --tp 1,2 --batch 1,2 --warmup 1 --iters 3 \
  --repeats 2 --roofs roofs.h5 --out sweep.h5 >/dev/null
"${mpi[@]}" ridgeline collectives --backend host --collectives all_reduce,all_gather \
  --max-bytes 64K --out coll.h5 >/dev/null
cp run.h5 sweep.h5 roofs.h5 coll.h5 "$here/"
echo "fixtures written to $here"
