#!/usr/bin/env bash
# A sweep's file costs the same per point at point 1 and point 1,000, and a stopped sweep keeps
# what it finished:
# - 1,000 tiny points: the file is rewritten at checkpoints (runs 1, 2, 4, ... and at most once
#   per 30 s), not after every point: the count of writes stays within 2 log2(points) + 2 plus
#   one per 30 s the sweep ran (every point rewritten would be 1,001);
# - SIGTERM to every rank mid-sweep (as Slurm's time limit sends it): the point in flight
#   finishes, the job exits 143, the file holds every run finished, marked incomplete, and no
#   temporary file is left.
# Usage: sweep_checkpoints.sh RIDGELINE_BIN
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
micro=(--hidden 32 --heads 2 --ffn-hidden 64 --layers 1 --seq 4 --warmup 0 --iters 1 --repeats 1
  --roofs none --backend host --check off)

start=$SECONDS
mpiexec -n 2 --oversubscribe "$bin" sweep "${micro[@]}" --batch "$(seq -s, 1 1000)" \
  --out many.h5 >many.log 2>many.err || { tail -5 many.err; exit 1; }
elapsed=$((SECONDS - start))
writes=$(sed -n 's/^wrote many.h5 (written \([0-9]*\) times during the sweep)$/\1/p' many.log)
[ -n "$writes" ] || { tail -3 many.log; echo "no count of writes" >&2; exit 1; }
bound=$((2 * 10 + 2 + elapsed / 30))
echo "1000 points in ${elapsed} s: the file written $writes times (bound $bound)"
[ "$writes" -le "$bound" ] || { echo "the file was rewritten $writes times" >&2; exit 1; }
"$bin" validate many.h5 >/dev/null || exit 1
python3 - many.h5 <<'PY' || exit 1
import sys
import h5py
with h5py.File(sys.argv[1]) as f:
    status = [s.decode() for s in f["sweep/points"]["status"]]
    assert len(status) == 1000 and set(status) == {"ok"}, set(status)
PY

children() { cat /proc/"$1"/task/*/children 2>/dev/null; }
mpiexec -n 2 --oversubscribe "$bin" sweep "${micro[@]}" --batch "$(seq -s, 1 2000)" \
  --out stopped.h5 >stopped.log 2>stopped.err &
job=$!
# Past point 100 (the progress line counts them), then the signal.
for _ in $(seq 1 1200); do
  grep -q "point [1-9][0-9][0-9] of 2000" stopped.err && break
  sleep 0.1
done
ranks=$(children "$job")
[ -n "$ranks" ] || { echo "no ranks found" >&2; exit 1; }
# shellcheck disable=SC2086 # one pid per word
kill -TERM $ranks
wait "$job"
rc=$?
grep -v "^ " stopped.err | tail -4
[ "$rc" -eq 143 ] || { echo "expected exit 143, got $rc" >&2; exit 1; }
runs=$(sed -n 's/^ridgeline: sweep stopped by SIGTERM after \([0-9]*\) of 2000 runs.*marked incomplete$/\1/p' stopped.err)
[ -n "$runs" ] || { echo "no line saying where the sweep stopped" >&2; exit 1; }
problems=$("$bin" validate stopped.h5 2>&1)
[ "$problems" = "stopped.h5: /sweep: incomplete: the job ended before it finished (complete = 0); what it holds is valid but partial" ] ||
  { echo "$problems" | head -5; echo "the stopped file is not valid-but-incomplete" >&2; exit 1; }
python3 - stopped.h5 "$runs" <<'PY' || exit 1
import sys
import h5py
with h5py.File(sys.argv[1]) as f:
    status = [s.decode() for s in f["sweep/points"]["status"]]
    done = status.count("ok")
    assert done == int(sys.argv[2]) and done > 0, (done, sys.argv[2])
    assert set(status) == {"ok", "pending"}, set(status)
    assert len(f["sweep/repeats"]) == done
print(f"stopped after {done} runs, all in the file")
PY
leftover=$(find . -name "*.tmp.*" -o -name "*.probe.*")
[ -z "$leftover" ] || { echo "temporary files left: $leftover" >&2; exit 1; }
echo "sweep checkpoints ok"
