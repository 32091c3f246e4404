#!/usr/bin/env bash
# Every GPU's own roofs on the host backend (3 ranks): /roofs/gpus holds a row per rank, with its
# node's link (one node here, one figure); a
# reference no rank can reach makes every rank stand out, and --check-gpus then exits 3 with the
# file written and valid; a reference that is not a hardware description is refused with exit 2
# before anything is measured. Which rank stands out against the median is timing, never asserted.
# Usage: roofs_gpus.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mpiexec -n 3 --oversubscribe "$bin" roofs --quick --out "$work/roofs.h5" >"$work/plain.log"
"$bin" validate "$work/roofs.h5" >/dev/null
grep -q "^per GPU" "$work/plain.log"

# Out of reach of any CPU: a million TFLOP/s in fp32 and a launch floor of 0.001 ns.
sed -e 's/^fp32_tflops = .*/fp32_tflops = 1000000/' -e 's/^launch_eager_ns = .*/launch_eager_ns = 0.001/' \
  "$repo/models/hardware/h200-sxm.toml" >"$work/unreachable.toml"
rc=0
mpiexec -n 3 --oversubscribe "$bin" roofs --quick --reference "$work/unreachable.toml" --check-gpus \
  --out "$work/checked.h5" >"$work/checked.log" 2>&1 || rc=$?
[ "$rc" -eq 3 ] || { cat "$work/checked.log"; echo "--check-gpus: exit $rc, expected 3" >&2; exit 1; }
grep -q "^3 GPU(s) stand out (--check-gpus: exit 3)" "$work/checked.log"
"$bin" validate "$work/checked.h5" >/dev/null

PYTHONPATH="$repo/scripts" python3 - "$work" <<'PY'
import sys
import h5py
work = sys.argv[1]
with h5py.File(f"{work}/roofs.h5") as f:
    gpus = f["/roofs/gpus"][()]
    assert sorted(gpus["rank"].tolist()) == [0, 1, 2], gpus
    assert (gpus["gemm_tflops"] > 0).all() and (gpus["read_gbps"] > 0).all(), gpus
    # One node of 3 ranks: one group, so one node link, the same on every rank.
    assert (gpus["node_busbw_gbps"] > 0).all() and len(set(gpus["node_busbw_gbps"])) == 1, gpus
    assert f["/config"].attrs["check_gpus"] == 0
with h5py.File(f"{work}/checked.h5") as f:
    gpus = f["/roofs/gpus"][()]
    for row in gpus:
        why = row["outlier"].decode()
        assert "GEMM" in why and "launch" in why and "NVIDIA H200" in why, why
    assert f["/config"].attrs["check_gpus"] == 1
print("per-GPU roofs: 3 rows; the unreachable reference flags all 3")
PY

# Not a hardware description: refused before anything is measured, no file.
printf '[hardware]\nname = "x"\n' >"$work/bad.toml"
rc=0
mpiexec -n 3 --oversubscribe "$bin" roofs --quick --reference "$work/bad.toml" \
  --out "$work/bad.h5" >"$work/bad.log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { cat "$work/bad.log"; echo "bad --reference: exit $rc, expected 2" >&2; exit 1; }
[ "$(grep -c "invalid roofs configuration: --reference" "$work/bad.log")" -eq 1 ]
[ ! -e "$work/bad.h5" ]
echo "e2e roofs_gpus ok"
