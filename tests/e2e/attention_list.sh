#!/usr/bin/env bash
# --attention as a list on the host backend: fused and naive run back to back in one job, the
# side-by-side table is printed, each is stored as a point with its own attention and summary,
# and the file validates. --attention cudnn on the host backend is refused with exit 2 on every
# rank and the reason printed once.
# Usage: attention_list.sh RIDGELINE_BIN REPO_DIR
set -uo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "attention_list: $*" >&2; exit 1; }

mpiexec -n 2 --oversubscribe "$bin" run --config "$repo/models/tiny.toml" --tp 2 --backend host \
  --attention fused,naive --warmup 1 --iters 3 --out "$work/run.h5" >"$work/run.log" 2>&1 ||
  { cat "$work/run.log"; fail "the run failed"; }
cat "$work/run.log"
grep -q "^attention .*step ms .*attn ms .*TFLOP/s" "$work/run.log" || fail "no attention table"
for impl in fused naive; do
  grep -Eq "^$impl +[0-9.]+ +[0-9.]+ " "$work/run.log" || fail "no $impl row"
  grep -q "^== $impl$" "$work/run.log" || fail "no report of $impl"
done
"$bin" validate "$work/run.h5" || fail "validate refused the file"
if command -v h5dump >/dev/null; then
  for k in 0 1; do
    h5dump -a "/points/$k/config/attention" "$work/run.h5" >"$work/attr$k.txt" 2>&1 ||
      fail "no /points/$k/config/attention"
  done
  grep -q '"fused"' "$work/attr0.txt" || fail "point 0 is not fused: $(cat "$work/attr0.txt")"
  grep -q '"naive"' "$work/attr1.txt" || fail "point 1 is not naive: $(cat "$work/attr1.txt")"
fi

timeout 30 mpiexec -n 2 --oversubscribe "$bin" run --config "$repo/models/tiny.toml" --backend host \
  --dp 2 --attention fused,cudnn --out "$work/refused.h5" >"$work/refused.log" 2>&1
rc=$?
cat "$work/refused.log"
[ "$rc" -eq 2 ] || fail "--attention cudnn on the host backend: exit $rc, expected 2"
count=$(grep -c -- "--attention cudnn needs the cuda backend" "$work/refused.log")
[ "$count" -eq 1 ] || fail "the refusal was printed $count times, expected once"
[ ! -e "$work/refused.h5" ] || fail "a refused run wrote a file"
echo "attention list ok"
