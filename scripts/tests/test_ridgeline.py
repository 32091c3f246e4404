"""Tests of the roofs, the ridgeline plane, sweep files and their pictures: against a real sweep
file and a real run file (conftest.py) and against hand-made tables."""
import math
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from matplotlib.image import imread

from conftest import analysis_cli
from ridgeline_analysis import analysis, load, sweeps
from ridgeline_analysis.reader import ROOF_TABLE_DTYPES, Roofs, Sweep

CLASSES = {"compute", "hbm", "interconnect", "launch"}


# ---- reader ----

def test_sweep_file_is_read(sweep):
    assert sweep.command == "sweep"
    assert sweep.summary is None and sweep.timelines == {} and sweep.ops == []
    assert sweep.sweep.axes == ["tp", "batch"]
    assert sweep.sweep.attrs["points"] == 4 and sweep.sweep.attrs["failed"] == 0
    table = sweep.sweep.points
    assert table["point"].tolist() == [0, 1, 2, 3]
    assert table["label"].tolist() == ["tp=1 batch=1", "tp=1 batch=4", "tp=2 batch=1",
                                       "tp=2 batch=4"]
    assert set(table["status"].tolist()) == {"ok"}
    assert set(table["ceiling"].tolist()) <= CLASSES
    assert (table["step_p50_ns"] > 0).all() and (table["step_flops"] > 0).all()
    assert set(table["phase"].tolist()) == {"decode"}
    # Every point measured three times (the default --repeats), the points taking turns; in each
    # repeat the four classes split its measured step.
    repeats = sweep.sweep.repeats
    assert sweep.sweep.attrs["repeats"] == 3 and (table["repeats"] == 3).all()
    assert repeats["point"].tolist() == [0, 1, 2, 3] * 3
    parts = sum(repeats[f"{c}_ns"] for c in CLASSES)
    np.testing.assert_allclose(parts, repeats["step_p50_ns"], rtol=1e-6)
    # A point's step is the median of its repeats' steps, inside its interval.
    for k in range(4):
        mine = np.sort(repeats["step_p50_ns"][repeats["point"] == k])
        assert table["step_p50_ns"][k] == mine[1]
        assert table["step_p50_lo_ns"][k] <= mine[1] <= table["step_p50_hi_ns"][k]

    assert len(sweep.points) == 4
    for k, point in enumerate(sweep.points):
        assert point.status == "ok" and point.label == table["label"][k]
        assert point.config["tp"] == table["tp"][k] and point.config["batch"] == table["batch"][k]
        # The point's summary is its median repeat's.
        mine = repeats[repeats["point"] == k]
        median = mine[np.argsort(mine["step_p50_ns"])[1]]
        assert point.summary.attrs["ceiling"] == median["ceiling"]
        assert "ceiling" in point.summary.ops.dtype.names
        assert point.roofs is sweep.roofs

    cross = sweep.sweep.crossovers
    assert {"axis", "fixed", "kind", "predicted", "before_value", "at_value", "before_point",
            "at_point", "rising_ns", "falling_ns", "note"} <= set(cross.dtype.names)
    assert set(cross["axis"].tolist()) <= {"tp", "batch"}
    measured = cross[cross["predicted"] == 0]
    assert (measured["at_point"] >= 0).all()
    assert (cross[cross["predicted"] == 1]["at_point"] == -1).all()


def test_roofs_are_read(sweep, run):
    for roofs in (sweep.roofs, run.roofs):
        assert roofs is not None
        assert roofs.backend in ("host", "cuda")
        peaks = roofs.peak_tflops()
        assert "fp32" in peaks and peaks["fp32"] > 0
        copy = roofs.memory[roofs.memory["kind"] == "copy"]
        assert roofs.hbm_gbps() == copy["gbps"][np.argmax(copy["bytes"])]
        assert roofs.launch_floor_ns() >= 0
        reduce = roofs.interconnect_rows("all_reduce")
        assert reduce.size and reduce["group_size"].max() == 2
        assert set(roofs.interconnect.dtype.names) >= set(ROOF_TABLE_DTYPES["interconnect"].names)


def test_run_file_attribution_fields(run):
    attrs = run.summary.attrs
    for key in ("step_compute_ns", "step_hbm_ns", "step_interconnect_ns", "step_launch_ns",
                "exposed_interconnect_ns", "attribution", "ops_over_ceiling", "step_flops",
                "step_hbm_bytes", "step_comm_bytes"):
        assert key in attrs, key
    assert attrs["ceiling"] in CLASSES
    assert set(run.summary.ops["ceiling"].tolist()) <= CLASSES | {"none"}


def test_file_without_roofs_is_read(run_path, tmp_path):
    copy = tmp_path / "noroofs.h5"
    shutil.copy(run_path, copy)
    with h5py.File(copy, "r+") as f:
        del f["roofs"]
    assert load(str(copy)).roofs is None


# ---- ridgeline plane ----

def test_ridgeline_points_of_a_run(run):
    points = analysis.ridgeline_points(run.summary.ops, run.summary.attrs)
    ops, steps = points[points["what"] == "op"], points[points["what"] == "step"]
    assert ops["name"].tolist() == run.summary.ops["name"].tolist()
    assert ops["ceiling"].tolist() == run.summary.ops["ceiling"].tolist()
    no_comm = run.summary.ops["comm_bytes"] == 0
    assert no_comm.any() and np.isinf(ops["y"][no_comm]).all()
    gemm = run.summary.ops[run.summary.ops["kind"] == "gemm"][0]
    row = ops[ops["name"] == gemm["name"]][0]
    assert row["x"] == pytest.approx(gemm["flops"] / gemm["hbm_bytes"])
    assert steps.size == 1
    a = run.summary.attrs
    assert steps[0]["x"] == pytest.approx(a["step_flops"] / a["step_hbm_bytes"])
    assert steps[0]["y"] == pytest.approx(a["step_flops"] / a["step_comm_bytes"])
    assert steps[0]["ceiling"] == a["ceiling"] and steps[0]["time_ns"] == a["p50_ns"]


def test_ridgeline_points_of_a_sweep(sweep):
    steps = analysis.sweep_step_points(sweep.sweep.points)
    table = sweep.sweep.points
    assert steps["name"].tolist() == table["label"].tolist()
    tp1 = table["tp"] == 1  # one rank per replica: no interconnect bytes
    assert np.isinf(steps["y"][tp1]).all() and np.isfinite(steps["y"][~tp1]).all()


def test_intensity_edges():
    assert analysis.intensity(8.0, 2.0) == 4.0
    assert analysis.intensity(8.0, 0.0) == math.inf
    assert math.isnan(analysis.intensity(0.0, 2.0))


def _roofs(interconnect_rows, transport="nvlink"):
    def table(name, rows):
        return np.array(rows, dtype=ROOF_TABLE_DTYPES[name])
    # Rows given without a scope were measured within a node.
    interconnect_rows = [r if len(r) == 12 else (*r, "intra", 1) for r in interconnect_rows]
    return Roofs(
        attrs={"backend": "cuda", "transport": transport, "gemm_peak_tflops.bf16": 800.0},
        gemm=table("gemm", [("bf16", "square", 8192, 8192, 8192, 20, 1.0, 1.0, 790.0, 1980.0),
                            ("fp32", "square", 4096, 4096, 4096, 20, 1.0, 1.0, 60.0, 1980.0)]),
        memory=table("memory", [("copy", 1 << 20, 10, 1.0, 1.0, 9000.0, -1.0),
                                ("copy", 1 << 30, 10, 1.0, 1.0, 4000.0, -1.0),
                                ("read", 1 << 30, 10, 1.0, 1.0, 4500.0, -1.0)]),
        launch=table("launch", [("eager", 1000, 2500.0, -1.0), ("graph_node", 1000, 900.0, -1.0)]),
        interconnect=table("interconnect", interconnect_rows),
    )


def test_ridge_lines_by_hand():
    rows = [("all_reduce", 2, "bf16", "nvlink", 5.0, 300.0, 4.0, 350.0, 1024, 1 << 30),
            ("all_reduce", 8, "bf16", "net", 9.0, 40.0, 8.0, 50.0, 1024, 1 << 30),
            ("all_reduce", 8, "bf16", "nvlink", 9.0, 150.0, 8.0, 200.0, 1024, 1 << 30),
            ("all_gather", 8, "bf16", "nvlink", 9.0, 900.0, 8.0, 999.0, 1024, 1 << 30),
            # Across nodes: a larger group, never the roof of the ops within a node.
            ("all_reduce", 16, "bf16", "nvlink", 9.0, 500.0, 8.0, 600.0, 1024, 1 << 30, "hier", 2)]
    roofs = _roofs(rows)
    assert roofs.interconnect_rows("all_reduce", "hier").size == 1
    assert roofs.peak_tflops() == {"bf16": 800.0, "fp32": 60.0}
    assert roofs.hbm_gbps() == 4000.0          # the copy row with the largest bytes
    assert roofs.launch_floor_ns() == 900.0    # graph_node where measured
    lines = analysis.ridge_lines(roofs, "bf16")
    assert lines.peak_flops == 800e12 and lines.hbm_bw == 4000e9
    assert lines.net_bw == 200e9               # all_reduce, 8 ranks in a node, the roofs' transport
    assert lines.x_ridge == pytest.approx(200.0)
    assert lines.y_ridge == pytest.approx(4000.0)
    # The diagonal (HBM time = network time) passes through the ridge point.
    assert lines.diagonal(lines.x_ridge) == pytest.approx(lines.y_ridge)
    assert lines.region(1e4, 1e6) == "compute"
    assert lines.region(10.0, 1e6) == "hbm"
    assert lines.region(1e4, 10.0) == "interconnect"
    assert lines.region(10.0, 100.0) == "interconnect"   # below the diagonal
    assert lines.region(10.0, 400.0) == "hbm"            # above it
    assert analysis.ridge_lines(roofs, "fp32").peak_flops == 60e12
    assert analysis.ridge_lines(roofs, "unknown").dtype == "bf16"   # the highest peak


def test_ridge_lines_without_interconnect():
    lines = analysis.ridge_lines(_roofs([]))
    assert math.isnan(lines.net_bw) and math.isnan(lines.y_ridge)
    assert lines.region(1e4, 10.0) == "compute"


def test_ridge_lines_of_real_roofs(run):
    lines = analysis.ridge_lines(run.roofs, run.config["dtype"])
    assert lines.dtype == "fp32"
    assert lines.x_ridge == pytest.approx(run.roofs.peak_tflops()["fp32"] * 1e3
                                          / run.roofs.hbm_gbps())
    reduce = run.roofs.interconnect_rows("all_reduce")
    assert lines.net_bw == pytest.approx(reduce["floor_beta_gbps"].max() * 1e9)


def test_roofs_written_before_scopes_read_as_within_a_node():
    golden = Path(__file__).resolve().parents[2] / "tests" / "golden" / "roofs.h5"
    with h5py.File(golden, "r") as f:
        assert "scope" not in f["roofs/interconnect"].dtype.names
    rows = load(str(golden)).roofs.interconnect_rows()
    assert rows.size and set(rows["scope"]) == {"intra"} and set(rows["group_nodes"]) == {1}


# ---- scaling series ----

def test_scaling_series_of_the_real_sweep(sweep):
    tp = sweeps.scaling_series(sweep.sweep, "tp")
    assert tp.numeric and tp.values == [1, 2]
    assert [g.name for g in tp.groups] == ["batch=1", "batch=4"]
    for group in tp.groups:
        assert group.rows["tp"].tolist() == [1, 2]
        assert len(set(group.rows["batch"].tolist())) == 1
        assert all(c["fixed"] == group.name and c["axis"] == "tp" for c in group.crossovers)
    assert sum(g.crossovers.size for g in tp.groups) == tp.crossovers.size
    batch = sweeps.scaling_series(sweep.sweep, "batch")
    assert [g.name for g in batch.groups] == ["tp=1", "tp=2"]
    assert all(g.rows["batch"].tolist() == [1, 4] for g in batch.groups)
    with pytest.raises(ValueError, match="axes: tp, batch"):
        sweeps.scaling_series(sweep.sweep, "seq")


def _sweep(rows, axes, crossovers=()):
    points = np.zeros(len(rows), dtype=[
        ("point", "<i8"), ("status", "U32"), ("label", "U32"), ("tp", "<i8"), ("batch", "<i8"),
        ("phase", "U8"), ("step_p50_ns", "<f8"), ("compute_ns", "<f8"), ("hbm_ns", "<f8"),
        ("interconnect_ns", "<f8"), ("launch_ns", "<f8"), ("ceiling", "U12")])
    for i, (tp, batch, phase, status) in enumerate(rows):
        points[i] = (i, status, f"p{i}", tp, batch, phase, 10.0 * i, 1, 2, 3, 4, "compute")
    cross = np.array(list(crossovers), dtype=[
        ("axis", "U8"), ("fixed", "U32"), ("kind", "U12"), ("predicted", "<i8"),
        ("at_value", "U8")])
    return Sweep({"axes": axes}, points, cross)


def test_scaling_series_groups_and_sorts_by_hand():
    rows = [(16, 2, "decode", "ok"), (2, 2, "decode", "ok"), (2, 10, "prefill", "ok"),
            (8, 2, "decode", "failed: out of memory"), (4, 10, "prefill", "ok"),
            (2, 10, "decode", "ok")]
    sweep = _sweep(rows, "tp,batch,phase", [
        ("tp", "batch=2 phase=decode", "interconnect", 0, "16"),
        ("tp", "phase=prefill batch=10", "hbm", 1, "32"),   # order of `fixed` does not matter
        ("batch", "tp=2 phase=decode", "hbm", 0, "10")])
    s = sweeps.scaling_series(sweep, "tp")
    # Groups by (batch, phase), batch numerically (2 < 10), phase as a string.
    assert [g.fixed for g in s.groups] == [{"batch": "2", "phase": "decode"},
                                           {"batch": "10", "phase": "decode"},
                                           {"batch": "10", "phase": "prefill"}]
    assert [g.rows["tp"].tolist() for g in s.groups] == [[2, 16], [2], [2, 4]]  # failed left out
    assert [g.crossovers["kind"].tolist() for g in s.groups] == [["interconnect"], [], ["hbm"]]
    assert s.values == [2, 4, 16]
    phase = sweeps.scaling_series(sweep, "phase")
    assert not phase.numeric and phase.values == ["decode", "prefill"]
    assert [g.name for g in phase.groups] == ["tp=2 batch=2", "tp=2 batch=10", "tp=4 batch=10",
                                              "tp=16 batch=2"]
    two = next(g for g in phase.groups if g.fixed == {"tp": "2", "batch": "10"})
    assert two.rows["phase"].tolist() == ["decode", "prefill"]


# ---- pictures ----

def _check_picture(path: Path) -> None:
    assert path.is_file() and path.stat().st_size > 10_000, path
    if path.suffix == ".png":
        image = imread(str(path))
        assert image.ndim == 3 and image.shape[0] > 300 and image.shape[1] > 400
        assert float(image[..., :3].var()) > 0.005, f"{path} looks blank"
    else:
        text = path.read_text(encoding="utf-8")
        assert text.lstrip().startswith("<?xml") and "<svg" in text


@pytest.mark.parametrize("suffix", [".png", ".svg"])
@pytest.mark.parametrize("command", [["ridgeline"], ["ridgeline", "--point", "2"],
                                     ["scaling", "--axis", "tp"],
                                     ["scaling", "--axis", "batch"], ["bars"]])
def test_sweep_pictures(sweep_path, tmp_path, command, suffix):
    out = tmp_path / f"picture{suffix}"
    done = analysis_cli(command[0], str(sweep_path), *command[1:], "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out)
    _check_picture(out)


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_ridgeline_picture_of_a_run(run_path, tmp_path, suffix):
    out = tmp_path / f"plane{suffix}"
    done = analysis_cli("ridgeline", str(run_path), "-o", str(out))
    assert done.returncode == 0, done.stderr
    _check_picture(out)


def test_default_picture_names(sweep_path, tmp_path):
    copy = tmp_path / "grid.h5"
    shutil.copy(sweep_path, copy)
    for args, name in ((["ridgeline"], "grid-ridgeline.png"),
                       (["scaling", "--axis", "tp"], "grid-scaling-tp.png"),
                       (["bars"], "grid-bars.png")):
        done = analysis_cli(args[0], str(copy), *args[1:])
        assert done.returncode == 0, done.stderr
        _check_picture(tmp_path / name)


def test_bars_with_a_failed_point(sweep_path, tmp_path):
    """A point that failed has no summary: a hatched bar, and the reader accepts the file."""
    path = tmp_path / "failed.h5"
    shutil.copy(sweep_path, path)
    with h5py.File(path, "r+") as f:
        table = f["sweep/points"][()]
        table["status"][3] = b"failed: out of memory"
        for field in ("step_p50_ns", "compute_ns", "hbm_ns", "interconnect_ns", "launch_ns"):
            table[field][3] = 0.0
        table["ceiling"][3] = b"none"
        del f["sweep/points"]
        f.create_dataset("sweep/points", data=table)
        f["points/3"].attrs["status"] = "failed: out of memory"
        del f["points/3/summary"]
    run = load(str(path))
    assert run.points[3].summary is None and run.points[3].status.startswith("failed")
    assert [g.rows["tp"].tolist() for g in sweeps.scaling_series(run.sweep, "tp").groups] \
        == [[1, 2], [1]]
    out = tmp_path / "bars.png"
    assert analysis_cli("bars", str(path), "-o", str(out)).returncode == 0
    _check_picture(out)
    lines = analysis_cli("summary", str(path)).stdout.splitlines()
    assert lines[4].split()[3] == "failed" and "out of memory" in lines[-1]


# ---- command line ----

def _refused(done, *words):
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr


def test_cli_refusals(sweep_path, run_path, tmp_path):
    _refused(analysis_cli("scaling", str(sweep_path), "--axis", "seq"), "seq", "tp, batch")
    _refused(analysis_cli("scaling", str(run_path), "--axis", "tp"), "not a sweep file")
    _refused(analysis_cli("bars", str(run_path)), "not a sweep file")
    _refused(analysis_cli("ridgeline", str(run_path), "-o", str(tmp_path / "plane.pdf")), ".png, .svg")
    _refused(analysis_cli("plot", str(sweep_path)), "no timelines")
    copy = tmp_path / "noroofs.h5"
    shutil.copy(run_path, copy)
    with h5py.File(copy, "r+") as f:
        del f["roofs"]
    _refused(analysis_cli("ridgeline", str(copy)), "no /roofs")


def test_cli_summary_of_a_sweep(sweep_path, sweep):
    done = analysis_cli("summary", str(sweep_path))
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split()[:4] == ["run", "label", "status", "p50_ms"]
    assert [r.split()[0] for r in rows] == [f"sweep.h5-p{k}" for k in range(4)]
    table = sweep.sweep.points
    for row, point in zip(rows, table):
        cells = row.split()
        assert " ".join(cells[1:3]) == point["label"] and cells[3] == "ok"
        assert float(cells[4]) == pytest.approx(point["step_p50_ns"] / 1e6, abs=1e-4)
        assert cells[6] == point["ceiling"]
    one = analysis_cli("summary", str(sweep_path), "--point", "2").stdout.splitlines()
    assert len(one) == 2 and one[1].startswith("sweep.h5-p2")


# ---- crossovers and joined sweep files ----

def test_find_crossovers_reproduces_the_files_measured_ones(sweep):
    """The Python rule gives what the C++ sweep wrote, field for field (measured rows)."""
    ours = sweeps.find_crossovers(sweep.sweep.points, sweep.sweep.axes)
    cpp = sweep.sweep.crossovers[sweep.sweep.crossovers["predicted"] == 0]
    assert ours.size == cpp.size
    for name in sweeps.CROSSOVER_FIELDS:
        assert ours[name].tolist() == cpp[name].tolist(), name


def _points_table(rows):
    """(tp, transport, status, ceiling, compute, hbm, interconnect, launch) -> /sweep/points."""
    points = np.zeros(len(rows), dtype=[
        ("point", "<i8"), ("status", "U32"), ("label", "U32"), ("tp", "<i8"), ("batch", "<i8"),
        ("seq", "<i8"), ("context", "<i8"), ("hidden", "<i8"), ("phase", "U8"),
        ("overlap", "U8"), ("transport", "U8"), ("dtype", "U8"), ("step_p50_ns", "<f8"),
        ("compute_ns", "<f8"), ("hbm_ns", "<f8"), ("interconnect_ns", "<f8"),
        ("launch_ns", "<f8"), ("ceiling", "U12")])
    for i, (tp, transport, status, ceiling, *ns) in enumerate(rows):
        points[i] = (i, status, f"tp={tp}", tp, 8, 1, 256, 256, "decode", "none", transport,
                     "bf16", sum(ns), *ns, ceiling)
    return points


#: A hand-made join of an nvlink sweep and a host sweep (and one auto point) over tp; times in ns
#: as (compute, hbm, interconnect, launch).
TRANSPORT_ROWS = [
    (1, "nvlink", "ok", "compute", 5000, 4000, 1000, 0),
    (2, "nvlink", "ok", "hbm", 2000, 3000, 1000, 0),
    (4, "nvlink", "ok", "hbm", 1000, 2000, 1500, 0),
    (8, "nvlink", "failed: out of memory", "none", 0, 0, 0, 0),
    (16, "nvlink", "ok", "launch", 100, 200, 300, 900),
    (1, "host", "ok", "hbm", 4000, 5000, 2000, 0),
    (2, "host", "ok", "interconnect", 2000, 3000, 6000, 0),
    (4, "host", "ok", "interconnect", 1000, 2000, 7000, 0),
    (8, "host", "ok", "hbm", 500, 4000, 3000, 0),
    (16, "host", "ok", "interconnect", 100, 200, 9000, 0),
    (2, "auto", "ok", "hbm", 2000, 3000, 1000, 0),
]


def test_crossover_rule_by_hand_with_a_transport_axis():
    points = _points_table(TRANSPORT_ROWS)
    found = sweeps.find_crossovers(points, ["tp", "transport"])
    got = [(c["axis"], c["fixed"], c["kind"], c["before_value"], c["at_value"],
            int(c["before_point"]), int(c["at_point"]), c["rising_ns"], c["falling_ns"])
           for c in found]
    assert got == [
        # Along tp, groups in text order of `fixed`: auto (one point: nothing), host, nvlink.
        # host: hbm -> interconnect at tp=2 (the first only: tp=16 is interconnect again after
        # tp=8 went back to hbm, which is no crossover either).
        ("tp", "transport=host", "interconnect", "1", "2", 5, 6, 6000.0, 3000.0),
        # nvlink: compute -> hbm at tp=2; the failed tp=8 is left out, launch is never a kind.
        ("tp", "transport=nvlink", "hbm", "1", "2", 0, 1, 3000.0, 2000.0),
        # Along transport in text order (auto < host < nvlink), groups "tp=1" < "tp=16" <
        # "tp=2" < ...: at tp=1 host (hbm) -> nvlink (compute) switches hbm to compute.
        ("transport", "tp=1", "compute", "host", "nvlink", 5, 0, 5000.0, 4000.0),
        # At tp=2 auto (hbm) -> host: host becomes interconnect-bound; host -> nvlink goes
        # from interconnect back to hbm: no crossover (and none at tp=4 for the same reason).
        ("transport", "tp=2", "interconnect", "auto", "host", 10, 6, 6000.0, 3000.0),
    ]
    assert found["predicted"].tolist() == [0, 0, 0, 0]
    assert found["note"][0] == ("interconnect 6.00 us [6.00, 6.00] vs hbm 3.00 us [3.00, 3.00] at "
                                "tp=2; hbm 5.00 us [5.00, 5.00] vs interconnect 2.00 us "
                                "[2.00, 2.00] at tp=1")
    assert found["note"][2] == ("compute 5.00 us [5.00, 5.00] vs hbm 4.00 us [4.00, 4.00] at "
                                "transport=nvlink; hbm 5.00 us [5.00, 5.00] vs compute 4.00 us "
                                "[4.00, 4.00] at transport=host")
    # Points of one repeat carry no interval: nothing is established beyond noise.
    assert found["status"].tolist() == ["unrepeated"] * 4
    # No axes, or no ok rows: an empty table with the /sweep/crossovers fields.
    assert sweeps.find_crossovers(points, []).size == 0
    empty = sweeps.find_crossovers(points[points["status"] == "x"], ["tp"])
    assert empty.size == 0 and empty.dtype.names == sweeps.CROSSOVER_FIELDS


def _repeated(points, spread):
    """`points` measured with 3 repeats, every class time's interval +-spread (ns) around it."""
    names = [*points.dtype.names, "repeats",
             *(f"{c}_{end}_ns" for c in ("compute", "hbm", "interconnect", "launch")
               for end in ("lo", "hi"))]
    out = np.zeros(points.size, dtype=[(n, points.dtype[n] if n in points.dtype.names else
                                        ("<i8" if n == "repeats" else "<f8")) for n in names])
    for n in points.dtype.names:
        out[n] = points[n]
    out["repeats"] = 3
    for c in ("compute", "hbm", "interconnect", "launch"):
        out[f"{c}_lo_ns"] = points[f"{c}_ns"] - spread
        out[f"{c}_hi_ns"] = points[f"{c}_ns"] + spread
    return out


def test_crossover_found_only_beyond_the_intervals():
    rows = [r for r in TRANSPORT_ROWS if r[1] == "host"][:2]   # hbm 5000 vs 2000 -> 6000 vs 3000
    clear = sweeps.find_crossovers(_repeated(_points_table(rows), 500), ["tp"])
    assert clear["status"].tolist() == ["found"]
    assert (clear["rising_lo_ns"][0], clear["rising_hi_ns"][0]) == (5500.0, 6500.0)
    # Intervals of +-1600 ns overlap at tp=2 (6000 vs 3000): the same step is within noise.
    noisy = sweeps.find_crossovers(_repeated(_points_table(rows), 1600), ["tp"])
    assert noisy["status"].tolist() == ["within noise"]
    assert noisy["kind"].tolist() == ["interconnect"]


def test_transport_ordered_by_measured_bandwidth():
    """Along transport, the link gets slower: nvlink (fast) before host (slow), whatever the
    text order; a value the order does not rank comes after the ranked ones."""
    points = _repeated(_points_table([r for r in TRANSPORT_ROWS if r[0] == 2]), 100)
    order = {"transport": {"nvlink": 340.0, "host": 27.0}}
    found = sweeps.find_crossovers(points, ["transport"], order)
    # tp=2: nvlink hbm -> host interconnect; then auto (unranked, last) is hbm again: none.
    assert [(c["before_value"], c["at_value"], c["kind"], c["status"]) for c in found] == \
        [("nvlink", "host", "interconnect", "found")]
    keys = sorted(["auto", "host", "nvlink"],
                  key=lambda v: sweeps.axis_order_key("transport", v, order))
    assert keys == ["nvlink", "host", "auto"]


def _sweep_run(path, rows, axes, config=None):
    """A Run as reader.load() gives for a sweep file, made of a /sweep/points table."""
    from ridgeline_analysis.reader import Run
    config = {"model": "tiny", "layers": 2, "backend": "cuda", **(config or {})}
    crossovers = sweeps.find_crossovers(_points_table([]), [])
    return Run(path=path, attrs={"command": "sweep"}, stack={}, env={}, config=config,
               topology={}, ops=[], timelines={}, summary=None,
               sweep=Sweep({"axes": axes, "complete": 1}, _points_table(rows), crossovers))


def test_join_sweeps_by_hand_adds_the_transport_axis():
    nvlink = _sweep_run("decode_nvlink.h5", [r for r in TRANSPORT_ROWS if r[1] == "nvlink"], "tp")
    host = _sweep_run("decode_host.h5", [r for r in TRANSPORT_ROWS if r[1] == "host"], "tp")
    joined = sweeps.join_sweeps([nvlink, host])
    assert joined.axes == ["tp", "transport"]
    assert joined.files == ["decode_nvlink.h5", "decode_host.h5"]
    assert joined.attrs["points"] == 10 and joined.attrs["failed"] == 1
    p = joined.points
    assert p["point"].tolist() == list(range(10))
    assert p["file"].tolist() == ["decode_nvlink.h5"] * 5 + ["decode_host.h5"] * 5
    assert p["file_point"].tolist() == [0, 1, 2, 3, 4] * 2
    assert p["label"][6] == "tp=2 transport=host"
    # The joined crossovers: the rule on the joined rows (points renumbered).
    assert joined.crossovers.tolist() == \
        sweeps.find_crossovers(p, ["tp", "transport"]).tolist()
    along = joined.crossovers[joined.crossovers["axis"] == "transport"]
    assert along[["fixed", "kind", "before_value", "at_value"]].tolist() == \
        [("tp=1", "compute", "host", "nvlink")]
    # The scaling series and its picture take the join like one file's sweep.
    s = sweeps.scaling_series(joined, "transport")
    assert s.values == ["host", "nvlink"] and s.groups[0].crossovers["kind"].tolist() == ["compute"]
    # One file: its own /sweep, unchanged.
    assert sweeps.join_sweeps([nvlink]) is nvlink.sweep


def test_join_sweeps_refusals(run):
    nvlink = _sweep_run("a.h5", TRANSPORT_ROWS[:2], "tp")
    host = _sweep_run("b.h5", TRANSPORT_ROWS[5:7], "tp")
    with pytest.raises(sweeps.JoinError, match="not a sweep file"):
        sweeps.join_sweeps([nvlink, run])
    with pytest.raises(sweeps.JoinError, match="differ in model"):
        sweeps.join_sweeps([nvlink, _sweep_run("b.h5", TRANSPORT_ROWS[5:7], "tp",
                                                 {"model": "llama3-8b"})])
    with pytest.raises(sweeps.JoinError, match="differ in backend"):
        sweeps.join_sweeps([nvlink, _sweep_run("b.h5", TRANSPORT_ROWS[5:7], "tp",
                                                 {"backend": "host"})])
    with pytest.raises(sweeps.JoinError, match="same value of every axis"):
        sweeps.join_sweeps([nvlink, _sweep_run("c.h5", TRANSPORT_ROWS[:1], "tp")])
    prefill = _sweep_run("p.h5", TRANSPORT_ROWS[5:7], "tp")
    prefill.sweep.points["phase"] = "prefill"
    with pytest.raises(sweeps.JoinError, match="phases differ"):
        sweeps.join_sweeps([nvlink, prefill])
    with pytest.raises(sweeps.JoinError, match="no files"):
        sweeps.join_sweeps([])
    assert sweeps.join_sweeps([nvlink, host]).axes == ["tp", "transport"]


def test_join_of_two_real_sweeps_along_batch(batch_sweep_paths):
    a, b = (load(str(p)) for p in batch_sweep_paths)
    assert a.sweep.axes == b.sweep.axes == ["tp"]   # one batch each: not an axis of either
    joined = sweeps.join_sweeps([a, b])
    assert joined.axes == ["tp", "batch"]
    p = joined.points
    assert p.size == 4 and joined.files == [str(x) for x in batch_sweep_paths]
    assert list(zip(p["tp"].tolist(), p["batch"].tolist())) == [(1, 1), (2, 1), (1, 4), (2, 4)]
    assert p["file"].tolist() == [str(batch_sweep_paths[0])] * 2 + [str(batch_sweep_paths[1])] * 2
    assert p["label"].tolist() == ["tp=1 batch=1", "tp=2 batch=1", "tp=1 batch=4",
                                   "tp=2 batch=4"]
    for name in ("step_p50_ns", "compute_ns", "hbm_ns", "interconnect_ns", "ceiling"):
        assert p[name].tolist() == [*a.sweep.points[name].tolist(), *b.sweep.points[name].tolist()]
    # Along batch, by hand from the points' ceilings: per tp, batch 1 -> 4.
    expected = []
    for tp in (1, 2):
        before, at = (p[(p["tp"] == tp) & (p["batch"] == batch)][0] for batch in (1, 4))
        old, new = str(before["ceiling"]), str(at["ceiling"])
        if old != new and (new == "interconnect" or {old, new} == {"hbm", "compute"}):
            expected.append((f"tp={tp}", new, "1", "4", int(before["point"]), int(at["point"]),
                             float(at[f"{new}_ns"]), float(at[f"{old}_ns"])))
    along = sweeps.find_crossovers(p, joined.axes)
    along = along[along["axis"] == "batch"]
    got = [(c["fixed"], c["kind"], c["before_value"], c["at_value"], int(c["before_point"]),
            int(c["at_point"]), float(c["rising_ns"]), float(c["falling_ns"])) for c in along]
    assert got == expected
    assert joined.crossovers[joined.crossovers["axis"] == "batch"].tolist() == along.tolist()
    s = sweeps.scaling_series(joined, "batch")
    assert [g.fixed for g in s.groups] == [{"tp": "1"}, {"tp": "2"}]
    assert [g.rows["batch"].tolist() for g in s.groups] == [[1, 4], [1, 4]]


def test_cli_pictures_of_a_join(batch_sweep_paths, tmp_path):
    a, b = (str(p) for p in batch_sweep_paths)
    for name, args in (("batch", ["scaling", a, b, "--axis", "batch"]),
                       ("tp", ["scaling", a, b, "--axis", "tp"]), ("bars", ["bars", a, b])):
        out = tmp_path / f"{name}.png"
        done = analysis_cli(*args, "-o", str(out))
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == str(out)
        _check_picture(out)
    # Without -o: the stems joined by "+" beside the first file.
    done = analysis_cli("bars", a, b)
    assert done.returncode == 0, done.stderr
    _check_picture(Path(a).parent / "decode_batch1+decode_batch4-bars.png")
    # summary of several sweep files: one row per point of each.
    rows = analysis_cli("summary", a, b).stdout.splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["decode_batch1.h5-p0", "decode_batch1.h5-p1",
                                           "decode_batch4.h5-p0", "decode_batch4.h5-p1"]


def test_cli_join_refusals(batch_sweep_paths, run_path):
    a, b = (str(p) for p in batch_sweep_paths)
    _refused(analysis_cli("scaling", str(run_path), a, "--axis", "tp"), "not a sweep file")
    _refused(analysis_cli("bars", a, str(run_path)), "not a sweep file")
    _refused(analysis_cli("scaling", a, b, "--axis", "transport"), "'transport'", "tp, batch")
    _refused(analysis_cli("bars", a, a), "same value of every axis")
