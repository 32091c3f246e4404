#!/usr/bin/env bash
# Write time and file size against ranks for both file layouts, on the host backend: one
# oversubscribed job per (ranks, layout), a tiny model, every rank a data-parallel replica.
# write_seconds is timed inside the binary (root attribute: from every rank's start of the
# write to the last object written); size is the master file plus its node files.
# Usage: scripts/file-scaling.sh OUTDIR [RANKS...]   (default ranks: 8 16 32 64 128 256)
# Environment: ITERS (timed iterations, default 10: the rows per rank), REPEAT (jobs per point,
# default 3; the table gives the median write_seconds and the range), RANKS_PER_FILE (default 8).
# Writes OUTDIR/table.md, OUTDIR/table.csv (one line per job), OUTDIR/env.txt and OUTDIR/logs/.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: file-scaling.sh OUTDIR [RANKS...]}
shift
ranks=("$@")
[ "${#ranks[@]}" -gt 0 ] || ranks=(8 16 32 64 128 256)
bin=${RIDGELINE_BIN:-$repo/build/src/ridgeline}
# Node files of 8 ranks: the per-node layout as on nodes of 8 GPUs, on this one host.
ranks_per_file=${RANKS_PER_FILE:-8}
iters=${ITERS:-10}
repeat=${REPEAT:-3}
export OPENBLAS_NUM_THREADS=1 NCCL_NVLS_ENABLE=0 OMPI_MCA_rmaps_base_oversubscribe=1
mkdir -p "$out/logs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" env > "$out/env.txt"

echo "ranks,layout,repeat,files,rows,bytes,write_seconds,job_seconds" > "$out/table.csv"
for np in "${ranks[@]}"; do
  for rep in $(seq 1 "$repeat"); do
  for layout in single per-node; do
    log="$out/logs/${layout}_np${np}_${rep}.log"
    extra=(--file-layout "$layout")
    [ "$layout" = per-node ] && extra+=(--ranks-per-file "$ranks_per_file")
    rm -f "$work"/*
    start=$(date +%s.%N)
    if ! mpirun -np "$np" --oversubscribe "$bin" run --config "$repo/models/tiny.toml" --dp "$np" \
        --hidden 64 --heads 4 --kv-heads 2 --ffn-hidden 128 --layers 2 --batch 1 --seq 16 \
        --warmup 1 --iters "$iters" --roofs none --timeout 1200 "${extra[@]}" --out "$work/run.h5" \
        > "$log" 2>&1; then
      echo "file-scaling: np=$np $layout failed (see $log)" >&2
      echo "$np,$layout,$rep,,,,,failed" >> "$out/table.csv"
      continue
    fi
    job=$(echo "$(date +%s.%N) - $start" | bc)
    "$bin" validate "$work/run.h5" >> "$log"
    python3 - "$work/run.h5" "$np" "$layout" "$rep" "$job" >> "$out/table.csv" <<'PY'
import glob, os, sys
import h5py
path, np_, layout, rep, job = sys.argv[1:]
files = [path] + sorted(glob.glob(path[:-3] + ".node*.h5"))
with h5py.File(path, "r") as f:
    rows = sum(f[f"ranks/{r}"].attrs["rows"] for r in range(int(np_)))
    seconds = f.attrs["write_seconds"]
print(f"{np_},{layout},{rep},{len(files)},{rows},{sum(os.path.getsize(p) for p in files)},{seconds:.4f},{float(job):.1f}")
PY
    tail -1 "$out/table.csv"
  done
  done
done

python3 "$repo/scripts/file_scaling_table.py" "$out/table.csv" > "$out/table.md"
cat "$out/table.md"
