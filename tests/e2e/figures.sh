#!/usr/bin/env bash
# Every printed figure is attributed or says why not, on the host backend: data-parallel
# buckets against the interconnect roof of their own group, ops without a roof named with the
# reason, a step without collectives exposing none, no SM clock printed where none was sampled,
# a data sheet's roofs printed as such and predicted points without repeats or intervals; and
# help that says what a command takes.
# Nothing here depends on how fast the machine is: only which roof, which reason and which
# marks, never a time or a ratio of times (the share's bound is tests/unit/test_run_attribution).
# Usage: figures.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tiny=(--config "$repo/models/tiny.toml" --warmup 1 --iters 3 --quiet)
fail() { echo "$*" >&2; exit 1; }

mpiexec -n 2 --oversubscribe "$bin" roofs --quick --out "$work/roofs.h5" >"$work/roofs.log"

# Data parallelism: every bucket of the dp group is attributed to that group's all-reduce (or,
# sharded, reduce-scatter) roof, and the table says what its share is.
for shard in off on; do
  op=dp_allreduce collective=all_reduce extra=()
  if [ "$shard" = on ]; then op=dp_reducescatter collective=reduce_scatter extra=(--dp-shard); fi
  mpiexec -n 2 --oversubscribe "$bin" run "${tiny[@]}" --phase train --batch 4 --dp 2 \
    --microbatches 2 --bucket-mb 0.1 "${extra[@]}" --roofs "$work/roofs.h5" \
    --out "$work/dp_$shard.h5" >"$work/dp_$shard.log"
  grep -Eq "^$op +collective +comm .* interconnect +[0-9.]+ +intra$" "$work/dp_$shard.log" ||
    { cat "$work/dp_$shard.log"; fail "$op is not attributed to the interconnect"; }
  grep -q "^share: the op's time in a step (the union of its instances' intervals" \
    "$work/dp_$shard.log" || fail "no footnote says what the share is"
  python3 - "$work/dp_$shard.h5" "$op" "$collective" <<'PY'
import sys
import h5py
path, op, collective = sys.argv[1:]
with h5py.File(path) as f:
    ops = {o["name"].decode(): o for o in f["summary/ops"][()]}
    a = ops[op]
    assert a["ceiling"] == b"interconnect" and a["interconnect_bound_ns"] > 0, a
    # Its bound comes from the dp group's roof: the file holds one, of 2 ranks.
    rows = [r for r in f["roofs/interconnect"][()] if r["collective"].decode() == collective]
    assert any(r["group_size"] == 2 for r in rows), rows
    assert "unattributed_ops" not in f["summary"].attrs, f["summary"].attrs["unattributed_ops"]
PY
done

# A pipeline: the ops no roof applies to are named with the reason.
mpiexec -n 2 --oversubscribe "$bin" run "${tiny[@]}" --phase train --batch 4 --pp 2 \
  --microbatches 2 --roofs "$work/roofs.h5" --out "$work/pp.h5" >"$work/pp.log"
grep -Eq "^pp_wait +p2p +p2p .* - +none +- +-$" "$work/pp.log" || fail "pp_wait row: $(grep pp_wait "$work/pp.log")"
grep -q "^ceiling none: pp_exchange: the posting of MPI's non-blocking transfers (their time is in pp_wait); pp_wait: the compute waiting for pipeline transfers, no work of its own$" \
  "$work/pp.log" || fail "no reason for the ops without a ceiling"
grep -Eq "^pp_flush +collective +comm .* interconnect +[0-9.]+ +intra$" "$work/pp.log" ||
  fail "pp_flush is not attributed to the interconnect"

# A step without collectives (tp 1, one rank) exposes none, whatever its loops' noise.
mpiexec -n 1 "$bin" run "${tiny[@]}" --overlap none,async --roofs none --out "$work/tp1.h5" \
  >"$work/tp1.log"
python3 - "$work/tp1.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1]) as f:
    for k in f["points"]:
        a = f[f"points/{k}/summary"].attrs
        assert a["exposed_comm_ns"] == 0.0 and a["overlap_efficiency"] == 0.0, dict(a)
PY
for strategy in none async; do
  grep -Eq "^$strategy +[0-9.]+ +[0-9.]+ +- +- +- +[0-9.]+ +- " "$work/tp1.log" ||
    { cat "$work/tp1.log"; fail "the overlap table gives figures of collectives that never ran"; }
done

# The host has no SM clock: no "-1 MHz" in the roofs as measured nor as reported.
"$bin" report "$work/roofs.h5" >"$work/roofs_report.log"
grep -q "^  memory  copy" "$work/roofs_report.log" || fail "no memory rows in the roofs report"
if grep -q -- "-1 MHz" "$work/roofs.log" "$work/roofs_report.log"; then
  fail "a host roof printed an SM clock of -1 MHz"
fi

# A data sheet's roofs are no measurement: no shapes, sizes, times or clocks of zero, each row
# marked.
"$bin" model --config "$repo/models/llama3-70b.toml" --layers 1 --phase decode --batch 64 \
  --context 1024 --tp 4,8,16 --nodes 2 --hardware "$repo/models/hardware/h200-sxm.toml" \
  --out "$work/model.h5" >"$work/model.log"
"$bin" report "$work/model.h5" >"$work/model_report.log"
grep -q "^roofs (cuda; NVIDIA H200 SXM 141GB: NVIDIA H200 Tensor Core GPU data sheet" \
  "$work/model_report.log" || fail "the report does not name the data sheet"
grep -Eq "^  gemm    bf16  no shape timed +801.414 TFLOP/s  \(data sheet, derated\)$" \
  "$work/model_report.log" || fail "no data-sheet GEMM row"
grep -Eq "^  memory  copy +no size timed +4464.0 GB/s  \(data sheet, derated\)$" \
  "$work/model_report.log" || fail "no data-sheet memory row"
grep -Eq "^  launch  eager +4.352 us per kernel \(from the hardware description" \
  "$work/model_report.log" || fail "no launch row from the description"
if grep -Eq "0x +0x +0|best +0.00 us|\(0 launches\)|MHz" "$work/model_report.log"; then
  fail "a data-sheet row printed a measurement's zeros"
fi

# Predicted points have no repeats, interval or p99.
for log in model model_report; do
  grep -Eq "^ +0 +tp=4 +[0-9.]+ +- +- +- " "$work/$log.log" || fail "$log: a predicted row with repeats"
  grep -q "^predicted rows: the analytic model's step" "$work/$log.log" || fail "$log: no footnote"
done
# Its crossover (tp 8 -> 16 over two nodes) gives its times without intervals of zero width.
grep -q "interconnect becomes the ceiling between tp=8 and tp=16 (predicted" "$work/model.log" ||
  fail "no predicted crossover"
if grep -Eq "\[([0-9.]+), \1\]" "$work/model.log"; then fail "a point estimate with an interval"; fi

# Help that says what the command takes: a sweep's transport is one value, its --dp none.
"$bin" sweep --help >"$work/sweep_help.txt"
grep -E "^  --transport " "$work/sweep_help.txt" | grep -q "one value" ||
  fail "sweep --help offers a list of transports"
grep -E "^  --dp " "$work/sweep_help.txt" | grep -q "Not taken" || fail "sweep --help offers --dp"

echo "e2e figures ok"
