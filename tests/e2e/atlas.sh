#!/usr/bin/env bash
# The atlas campaign end to end on the host backend, on a tiny grid: scripts/atlas.sh measures
# sweeps with --repeats 3 (and two of them twice), predicts and validates, and
# scripts/atlas_report.py writes the page. Checks the files, not the times: every repeat is
# stored and validates, every ok point's median lies in its interval, the repeated sweeps' rows
# line up, and the page's tables and pictures exist.
# Usage: atlas.sh RIDGELINE_BIN REPO
set -euo pipefail
bin=$1
repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_MCA_rmaps_base_oversubscribe=1
RIDGELINE_BIN=$bin ATLAS_MODELS=tiny ATLAS_SEQ=16,32 ATLAS_BATCH=1,2 ATLAS_CONTEXT=16 \
  ATLAS_TRAIN_SEQ=16 ATLAS_RANKS=2 ATLAS_REPEATS=3 ATLAS_HARDWARE=h200-sxm \
  MPIRUN="mpiexec --oversubscribe" "$repo/scripts/atlas.sh" "$work/atlas" auto
for f in "$work"/atlas/h5/sweep_*.h5; do "$bin" validate "$f"; done
# report prints the intervals and the repeats of a file measured with repeats.
"$bin" report "$work/atlas/h5/sweep_tiny_decode_auto.h5" >"$work/report_cli.txt"
grep -q "95 % interval  R" "$work/report_cli.txt"
grep -q "^transport auto: all-reduce roof" "$work/report_cli.txt"
python3 - "$work/atlas/h5" <<'PY'
import glob, os, sys
import h5py
import numpy as np
h5 = sys.argv[1]
names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(h5, "sweep_*.h5")))
assert names == ["sweep_tiny_decode_auto.h5", "sweep_tiny_decode_auto_again.h5",
                 "sweep_tiny_prefill_auto.h5", "sweep_tiny_prefill_auto_again.h5",
                 "sweep_tiny_train_auto.h5"], names
for name in names:
    with h5py.File(os.path.join(h5, name)) as f:
        assert f["sweep"].attrs["repeats"] == 3 and f["sweep"].attrs["complete"] == 1, name
        points, repeats = f["sweep/points"][()], f["sweep/repeats"][()]
        ok = points[points["status"] == b"ok"]
        assert ok.size > 0, name
        assert (ok["repeats"] == 3).all(), name
        # Every repeat of every ok point, the points taking turns: 1..n, 1..n, 1..n.
        assert repeats.size == 3 * ok.size, (name, repeats.size, ok.size)
        assert repeats["repeat"].tolist() == sorted(repeats["repeat"].tolist()), name
        assert repeats["point"][: ok.size].tolist() == ok["point"].tolist(), name
        for c in ("step_p50", "compute", "hbm", "interconnect", "launch"):
            lo, mid, hi = ok[f"{c}_lo_ns"], ok[f"{c}_ns"], ok[f"{c}_hi_ns"]
            assert ((lo <= mid) & (mid <= hi)).all(), (name, c)
        # The point's median step is the median of its repeats' p50 steps.
        for p in ok:
            mine = repeats[repeats["point"] == p["point"]]["step_p50_ns"]
            assert np.isclose(np.median(mine), p["step_p50_ns"]), (name, p["label"])
        cross = f["sweep/crossovers"][()]
        allowed = {b"found", b"within noise", b"unrepeated", b"predicted", b"from the first point"}
        assert all(s in allowed for s in cross["status"]), name
# One model: validated from the roofs alone (calibration takes the other models' files).
assert len(glob.glob(os.path.join(h5, "validate_sweep_tiny_*.json"))) == len(names)
assert glob.glob(os.path.join(h5, "predicted_tiny_decode_auto_*.h5"))
PY
# The custom all-reduce's decode pair runs on GPUs only: two real decode sweeps stand in for
# it here, with a host all-reduce table (MPI's, which --allreduce auto never chooses).
cp "$work/atlas/h5/sweep_tiny_decode_auto.h5" "$work/atlas/h5/customar_tiny_decode_nccl_auto.h5"
cp "$work/atlas/h5/sweep_tiny_decode_auto_again.h5" \
  "$work/atlas/h5/customar_tiny_decode_auto_auto.h5"
mpiexec --oversubscribe -np 2 "$bin" collectives --collectives all_reduce -e 64K --iters 3 \
  --warmup 1 --out "$work/atlas/h5/allreduce_g2_auto.h5" >/dev/null
page=$work/page
python3 "$repo/scripts/atlas_report.py" "$page" "$work/atlas" >"$work/report.txt"
for f in headline.md crossovers.md crossovers.csv transport.md model_error.md repro.md \
  atlas_prefill.png atlas_decode.png atlas_train.png; do
  [ -s "$page/$f" ] || { echo "atlas_report wrote no $f" >&2; exit 1; }
done
grep -q "| tiny | decode | auto |" "$page/headline.md"
grep -q "tiny decode auto" "$page/repro.md"
# Both decode points at TP 2 (batch 1 and 2), NCCL's beside the other, no choice from MPI's table.
[ "$(grep -c '^| tiny | auto | 2 | [12] | 16 | - |' "$page/custom_ar.md")" = 2 ]
echo "e2e atlas ok"
