#!/usr/bin/env bash
# Transport ordering by bandwidth, with a joined pair of host files whose roofs differ: two sweeps
# of one small grid (tiny, tp 1,2, 2 ranks), one per transport, joined by `ridgeline report A B`
# and by the Python join (ridgeline_analysis.sweeps.join_sweeps and transport_order).
#
# The host backend refuses every --transport but auto (nvlink, host and net select NCCL
# transports: they need the cuda backend), so the two files are made as follows. One roofs file
# is measured; two copies get injected roofs, and each sweep attributes its steps under its own:
#   nvlink.h5: all-reduce (every interconnect row) 200 GB/s; GEMM peak 0.001 TFLOP/s and memory
#              1000 GB/s, so that every compute-lane op of the tiny model is compute-bound;
#   host.h5:   all-reduce 2 GB/s; GEMM peak 1000 TFLOP/s and memory 0.001 GB/s, so that every op
#              is HBM-bound.
# Each sweep file's transport (/sweep/points `transport`, the field both joins read, and the
# `transport` of /config and /points/<k>/config) is then set from auto to nvlink or host. The
# names are chosen so that the text order (host before nvlink) is the reverse of the bandwidth
# order (nvlink first). At tp=1 no all-reduce runs, so the step's ceiling there comes from the
# injected GEMM and memory roofs alone: compute over nvlink, hbm over host. That puts a crossover
# along transport at tp=1 whatever the timings; its direction (before = the faster link) is the
# order under test. What tp=2 does is timing, and only compared between C++ and Python.
#
# Checked, in both file orders: report names the transports fastest first with their roofs
# (nvlink 200 GB/s, host 2 GB/s); each file's section names its transport and roof above its own
# crossovers; the joined crossovers along transport go from nvlink to host, tp=1's of kind hbm;
# the Python join has the same order, the same labels and the same crossovers. No measured time or
# ratio of times is asserted.
# Usage: transport_order.sh RIDGELINE_BIN REPO_DIR
set -euo pipefail
bin=$1 repo=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mpiexec -n 2 --oversubscribe "$bin" roofs --backend host --quick --out "$work/roofs.h5" \
  >"$work/roofs.log"
python3 - "$work" <<'PY'
import shutil, sys
import h5py
work = sys.argv[1]
# transport: (all-reduce GB/s, GEMM TFLOP/s, memory GB/s)
injected = {"nvlink": (200.0, 0.001, 1000.0), "host": (2.0, 1000.0, 0.001)}
for transport, (link, tflops, gbps) in injected.items():
    path = f"{work}/roofs_{transport}.h5"
    shutil.copy(f"{work}/roofs.h5", path)
    with h5py.File(path, "r+") as f:
        roofs = f["roofs"]
        ic = roofs["interconnect"][()]
        assert b"all_reduce" in ic["collective"].tolist(), ic["collective"]
        ic["beta_gbps"] = ic["floor_beta_gbps"] = link
        roofs["interconnect"][...] = ic
        gemm = roofs["gemm"][()]
        gemm["tflops"] = tflops
        gemm["best_ns"] = 2.0 * gemm["m"] * gemm["n"] * gemm["k"] / (tflops * 1e3)
        roofs["gemm"][...] = gemm
        memory = roofs["memory"][()]
        memory["gbps"] = gbps
        memory["best_ns"] = memory["bytes"] / gbps
        roofs["memory"][...] = memory
        for name in list(roofs.attrs):
            if name.startswith("gemm_peak_tflops."):
                roofs.attrs[name] = tflops
            elif name.startswith("hbm_") and name.endswith("_gbps"):
                roofs.attrs[name] = gbps
PY
for t in nvlink host; do
  "$bin" validate "$work/roofs_$t.h5" >/dev/null
  mpiexec -n 2 --oversubscribe "$bin" sweep --backend host --config "$repo/models/tiny.toml" \
    --tp 1,2 --warmup 1 --iters 3 --roofs "$work/roofs_$t.h5" --out "$work/$t.h5" \
    >"$work/sweep_$t.log" 2>&1
done
python3 - "$work" <<'PY'
import sys
import h5py
work = sys.argv[1]
for transport in ("nvlink", "host"):
    with h5py.File(f"{work}/{transport}.h5", "r+") as f:
        points = f["sweep/points"][()]
        assert points["transport"].tolist() == [b"auto", b"auto"], points["transport"]
        points["transport"] = transport.encode()
        f["sweep/points"][...] = points
        f["config"].attrs["transport"] = transport
        for k in f["points"]:
            f[f"points/{k}/config"].attrs["transport"] = transport
PY
"$bin" validate "$work/nvlink.h5" >/dev/null
"$bin" validate "$work/host.h5" >/dev/null
"$bin" report "$work/host.h5" "$work/nvlink.h5" >"$work/report_host_first.txt"
"$bin" report "$work/nvlink.h5" "$work/host.h5" >"$work/report_nvlink_first.txt"

PYTHONPATH="$repo/scripts" python3 - "$work" <<'PY'
import re, sys
from ridgeline_analysis import reader, sweeps
work = sys.argv[1]
GBPS = {"nvlink": 200.0, "host": 2.0}
FAST, SLOW = "nvlink", "host"
FASTEST_FIRST = ("transport, fastest link first (each file's all-reduce roof): "
                 "nvlink (200 GB/s) host (2 GB/s)")
ROOF = re.compile(r"^transport (\S+): all-reduce roof (\S+) GB/s bus bandwidth$")
CROSS = re.compile(r"^  (\S+) +\[([^\]]*)\] (?:within noise: the ceiling moves to (\S+)|(\S+) "
                   r"becomes the ceiling) between (\S+?)=(\S+) and \S+?=([^\s:,]+)"
                   r"( \(measured once)?")
LABEL = re.compile(r"^ *(\d+)  (tp=\d+ transport=\S+) ")


def sections(text):
    """{header: lines} of each "== header" part of a report."""
    out = {}
    for part in re.split(r"^== ", text, flags=re.M)[1:]:
        head, *lines = part.splitlines()
        out[head] = lines
    return out


def crossovers(lines):
    rows = []
    for line in lines:
        m = CROSS.match(line)
        if m:
            axis, fixed, noisy, kind, axis2, before, at, once = m.groups()
            assert axis2 == axis, line
            status = "within noise" if noisy else "unrepeated" if once else "found"
            rows.append((axis, fixed, noisy or kind, before, at, status))
    return rows


runs = {t: reader.load(f"{work}/{t}.h5") for t in GBPS}
# The injected roofs reached each file, and set its tp=1 ceiling (no all-reduce there).
for t, run in runs.items():
    assert run.roofs.interconnect_rows("all_reduce")["beta_gbps"].tolist() == [GBPS[t]], t
    p = run.sweep.points
    assert p["transport"].tolist() == [t, t] and p["status"].tolist() == ["ok", "ok"], p
    tp1 = p[p["tp"] == 1][0]["ceiling"]
    assert tp1 == {"nvlink": "compute", "host": "hbm"}[t], (t, tp1)

for first, second in ((SLOW, FAST), (FAST, SLOW)):
    paths = [f"{work}/{first}.h5", f"{work}/{second}.h5"]
    text = open(f"{work}/report_{first}_first.txt").read()
    parts = sections(text)
    assert list(parts) == [f"{paths[0]} (ridgeline sweep)", f"{paths[1]} (ridgeline sweep)",
                           "joined: 2 files, 4 points"], list(parts)
    # Each file's section names its own transport and roof, above its own crossovers.
    for t, path in zip((first, second), paths):
        lines = parts[f"{path} (ridgeline sweep)"]
        named = [(i, ROOF.match(l).groups()) for i, l in enumerate(lines) if ROOF.match(l)]
        assert [n for _, n in named] == [(t, f"{GBPS[t]:.1f}")], (path, named)
        assert named[0][0] < lines.index("crossovers"), path
    joined = parts["joined: 2 files, 4 points"]
    assert joined.count(FASTEST_FIRST) == 1, joined[:2]
    cpp_labels = [LABEL.match(l).group(2) for l in joined if LABEL.match(l)]
    cpp = crossovers(joined[joined.index("crossovers"):])
    along = [c for c in cpp if c[0] == "transport"]
    assert all(c[3:5] == (FAST, SLOW) for c in along), along
    assert ("transport", "tp=1", "hbm", FAST, SLOW, "found") in along, along
    # The Python join of the same files, in the same order.
    loaded = [reader.load(p) for p in paths]
    order = sweeps.transport_order(loaded)
    assert order == {"transport": GBPS}, order
    assert sorted(GBPS, key=lambda v: sweeps.axis_order_key("transport", v, order)) == \
        [FAST, SLOW]
    sweep = sweeps.join_sweeps(loaded)
    assert sweep.axes == ["tp", "transport"] and sweep.files == paths, (sweep.axes, sweep.files)
    assert sweep.points["label"].tolist() == cpp_labels, (sweep.points["label"], cpp_labels)
    ours = [(str(c["axis"]), str(c["fixed"]), str(c["kind"]), str(c["before_value"]),
             str(c["at_value"]), str(c["status"])) for c in sweep.crossovers]
    assert ours == cpp, (ours, cpp)
    print(f"{first} first: transports {FAST} > {SLOW}; along transport: "
          + "; ".join(f"[{c[1]}] {c[2]} {c[3]} -> {c[4]} ({c[5]})" for c in along))
PY
echo "e2e transport order ok"
