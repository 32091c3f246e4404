#!/usr/bin/env bash
# A bad configuration: the error is printed exactly once (by rank 0), every rank exits non-zero
# and the job ends (no hang: within 60 seconds, however loaded the machine), with no output file.
# How long the refusal took is printed, never asserted: a busy host's MPI start-up alone can
# take seconds.
# Usage: bad_config.sh RIDGELINE_BIN NP EXPECTED_TEXT [run options...]
set -uo pipefail
bin=$1 np=$2 expected=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
timeout 60 mpiexec -n "$np" --oversubscribe "$bin" run --out "$work/x.h5" "$@" >"$work/out.log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$work/out.log"
[ "$rc" -ne 0 ] || { echo "expected a non-zero exit" >&2; exit 1; }
[ "$rc" -ne 124 ] || { echo "the job hung" >&2; exit 1; }
count=$(grep -cF -- "$expected" "$work/out.log")
[ "$count" -eq 1 ] || { echo "expected '$expected' exactly once, saw it $count times" >&2; exit 1; }
[ ! -e "$work/x.h5" ] || { echo "an output file was written" >&2; exit 1; }
echo "bad config ok: rc=$rc in ${elapsed}s"
