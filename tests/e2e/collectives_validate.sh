#!/usr/bin/env bash
# End to end on the host backend: mpirun -> collectives -> HDF5 file -> validate -> report.
# Usage: collectives_validate.sh RIDGELINE_BIN NP [collectives options...]
set -euo pipefail
bin=$1 np=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$work/coll.h5

mpiexec -n "$np" --oversubscribe "$bin" collectives --out "$out" "$@" | tee "$work/run.log"
test -f "$out"
if ls "$work"/*.tmp.* >/dev/null 2>&1; then echo "temporary file left behind" >&2; exit 1; fi
grep -q "Avg bus bandwidth" "$work/run.log"
grep -q "busbw(GB/s)" "$work/run.log"
"$bin" validate "$out"
# report prints the file's tables: the very ones the job printed.
"$bin" report "$out" | tee "$work/report.log"
diff <(grep -v "^wrote " "$work/run.log") <(grep -v "^== \|^check: " "$work/report.log")
grep -q "^check: passed" "$work/report.log"
if command -v h5dump >/dev/null; then
  h5dump -H "$out" > "$work/h5dump.txt"
  for d in all_reduce all_reduce_samples_ns sendrecv interconnect; do
    grep -q "DATASET \"$d\"" "$work/h5dump.txt" || { echo "h5dump: no $d" >&2; exit 1; }
  done
fi
# --batch: every table says so, and each size counts 10 batches of --iters calls.
if [[ " $* " == *" --batch "* ]]; then
  python3 - "$out" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    iters = int(f["config"].attrs["iters"])
    for name, table in f["collectives"].items():
        if name.endswith("_samples_ns"):
            continue
        timing = table.attrs["timing"]
        timing = timing.decode() if isinstance(timing, bytes) else str(timing)
        assert timing == "batch_mean", (name, timing)
        assert all(int(n) == 10 * iters for n in table["iters"]), (name, table["iters"])
        samples = f["collectives"][name + "_samples_ns"]["iteration"]
        assert int(max(samples)) == 9, (name, "expected 10 samples per size")
print("batch timing ok")
PY
fi
echo "e2e collectives ok: np=$np $*"
