"""Tests of the analysis package against a real run file (conftest.py) and hand-made data."""
import json
import shutil

import h5py
import numpy as np
import pytest

from conftest import analysis_cli
from ridgeline_analysis import SchemaError, analysis, export, load, plots
from ridgeline_analysis.reader import TIMELINE_DTYPE


# ---- reader ----

def test_reader_loads_every_group(run):
    for key in ("schema_version", "ridgeline_version", "git_sha", "created_utc", "argv",
                "world_size", "command"):
        assert key in run.attrs
    assert run.attrs["schema_version"] == 1
    assert run.world_size == 2
    assert {"mpi_library", "hdf5", "build_type"} <= set(run.stack)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in run.env.items())
    assert run.config["tp"] == 2 and run.config["warmup"] == 1 and run.config["iters"] == 3
    assert run.config["model"] == "tiny"
    assert run.topology and all(len(v) == 2 for v in run.topology.values())
    assert [op.id for op in run.ops] == list(range(len(run.ops)))
    assert {op.kind for op in run.ops} >= {"gemm", "collective"}
    assert sorted(run.timelines) == [0, 1]
    assert run.points == []
    ops = run.summary.ops
    assert set(ops.dtype.names) == {
        "name", "kind", "lane", "count", "p50_ns", "mean_ns", "per_step_p50_ns", "share",
        "flops", "hbm_bytes", "comm_bytes", "achieved_tflops", "achieved_gbps",
        # attribution against the measured roofs
        "compute_bound_ns", "hbm_bound_ns", "interconnect_bound_ns", "launch_bound_ns",
        "bound_ns", "ceiling", "efficiency", "scope"}
    assert ops["name"].dtype.kind == "U" and ops.size > 0
    assert run.summary.step_time_ns.shape == (3,)
    assert run.summary.warmup_step_time_ns.shape == (1,)
    for key in ("count", "mean_ns", "min_ns", "max_ns", "p50_ns", "p95_ns", "p99_ns",
                "warmup_to_steady"):
        assert key in run.summary.attrs


def test_timeline_dtypes(run):
    for timeline in run.timelines.values():
        assert timeline.dtype == TIMELINE_DTYPE
        assert timeline.size > 0
        assert set(np.unique(timeline["warmup"]).tolist()) == {0, 1}
        assert set(np.unique(timeline["lane"]).tolist()) <= {0, 1, 2}
        assert (timeline["t_end_ns"] >= timeline["t_start_ns"]).all()


def test_schema_version_2_is_rejected(run_path, tmp_path):
    copy = tmp_path / "v2.h5"
    shutil.copy(run_path, copy)
    with h5py.File(copy, "r+") as f:
        f.attrs["schema_version"] = np.int64(2)
    with pytest.raises(SchemaError, match="major version 2"):
        load(str(copy))


def test_sweep_points_are_exposed(run_path, tmp_path):
    sweep = tmp_path / "sweep.h5"
    with h5py.File(run_path, "r") as src, h5py.File(sweep, "w") as dst:
        for key, value in src.attrs.items():
            dst.attrs[key] = value
        for name in src:
            src.copy(name, dst)
        for k in ("0", "1", "10"):
            point = dst.create_group(f"points/{k}")
            for name in ("config", "ops", "ranks", "summary"):
                src.copy(name, point)
            point["config"].attrs["tp"] = int(k) + 1
    run = load(str(sweep))
    assert [p.config["tp"] for p in run.points] == [1, 2, 11]
    assert sorted(run.timelines) == [0, 1]
    assert run.points[2].ops == run.ops and run.points[2].env == run.env
    assert sorted(run.points[0].timelines) == [0, 1]
    lines = analysis_cli("summary", str(sweep)).stdout.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["sweep.h5-p0", "sweep.h5-p1", "sweep.h5-p2"]
    assert [line.split()[3] for line in lines[1:]] == ["1", "2", "11"]


def test_gpu_samples_per_rank(run, run_path, tmp_path):
    """Host runs have no NVML samples; a GPU run's /ranks/<r>/samples are read per rank."""
    assert run.samples == {}
    path = tmp_path / "samples.h5"
    with h5py.File(run_path, "r") as src, h5py.File(path, "w") as dst:
        for key, value in src.attrs.items():
            dst.attrs[key] = value
        for name in src:
            src.copy(name, dst)
        rows = np.array([(0, 1980, 3201, 150.0, 120.0, 40.0, 0),
                         (20_000_000, 1710, 3201, 699.5, 680.0, 51.0, 4)],
                        dtype=[("t_ns", "<i8"), ("sm_clock_mhz", "<i8"), ("mem_clock_mhz", "<i8"),
                               ("power_w", "<f8"), ("power_avg_w", "<f8"), ("temp_c", "<f8"),
                               ("clock_event_reasons", "<i8")])
        dst.create_dataset("ranks/1/samples", data=rows)
    got = load(str(path))
    assert sorted(got.samples) == [1]
    assert got.samples[1]["sm_clock_mhz"].tolist() == [1980, 1710]
    assert "/ranks/1/samples" not in got.tables


def test_table_file_without_timelines(run_path, tmp_path):
    """`ridgeline collectives` files: no /ops, /ranks or /summary; tables instead."""
    path = tmp_path / "collectives.h5"
    with h5py.File(run_path, "r") as src, h5py.File(path, "w") as dst:
        for key, value in src.attrs.items():
            dst.attrs[key] = value
        dst.attrs["command"] = "collectives"
        dst.attrs["check"] = "passed"
        for name in ("stack", "config", "topology"):
            src.copy(name, dst)
        ints = ("size_bytes", "count", "wrong", "iters")
        numbers = ("time_mean_ns", "time_p50_ns", "time_p95_ns", "time_p99_ns", "time_min_ns",
                   "algbw_gbps", "busbw_gbps", "busbw_p50_gbps")
        rows = np.array([(1024, 256, 0, 20, 90.0, 90.0, 95.0, 99.0, 80.0, 11.4, 12.5, 12.5)],
                        dtype=[(n, "<i8") for n in ints] + [(n, "<f8") for n in numbers])
        dst.create_dataset("collectives/all_reduce", data=rows)
        dst.create_dataset("roofs/interconnect", data=src["roofs/interconnect"][()])
    run = load(str(path))
    assert run.timelines == {} and run.summary is None
    table = run.tables["/collectives/all_reduce"]
    assert table["size_bytes"].tolist() == [1024] and table["busbw_gbps"][0] == 12.5
    done = analysis_cli("summary", str(path))
    assert done.returncode != 0 and "no timelines" in done.stderr


# ---- analysis against the C++ summary ----

def test_step_times_equal_summary(run):
    iterations, steps_ns = analysis.step_times_ns(run.timelines)
    np.testing.assert_allclose(steps_ns, run.summary.step_time_ns, rtol=1e-9)
    assert iterations.tolist() == [1, 2, 3]
    _, warmup_ns = analysis.step_times_ns(run.timelines, warmup=True)
    np.testing.assert_allclose(warmup_ns, run.summary.warmup_step_time_ns, rtol=1e-9)


def _recomputed_p50_by_name(run):
    p50 = analysis.op_p50_ns(run.timelines, len(run.ops), run.comm_op_ids())
    return {op.name: p50[op.id] for op in run.ops}


def test_compute_op_p50_equals_summary(run):
    ours = _recomputed_p50_by_name(run)
    compute = run.summary.ops[run.summary.ops["lane"] == "compute"]
    assert compute.size > 0
    for row in compute:
        assert ours[row["name"]] == pytest.approx(row["p50_ns"], rel=1e-9), row["name"]


def test_collective_op_p50_equals_summary(run):
    ours = _recomputed_p50_by_name(run)
    comm = run.summary.ops[np.isin(run.summary.ops["kind"], ["collective", "p2p"])]
    assert comm.size > 0
    for row in comm:
        assert ours[row["name"]] == pytest.approx(row["p50_ns"], rel=1e-9), row["name"]


def test_op_p50_per_rank(run):
    per_rank = analysis.op_p50_per_rank_ns(run.timelines, len(run.ops))
    assert per_rank.shape == (2, len(run.ops))
    gemm = next(op.id for op in run.ops if op.kind == "gemm")
    expected = np.percentile(analysis.op_durations_ns(run.timelines[1], gemm), 50)
    assert per_rank[1, gemm] == expected


def test_step_breakdown_parts_add_up(run):
    breakdown = analysis.step_breakdown(run.timelines)
    parts = (breakdown["compute_ns"] + breakdown["comm_unhidden_ns"]
             + breakdown["p2p_unhidden_ns"] + breakdown["idle_ns"])
    np.testing.assert_allclose(parts, breakdown["span_ns"], rtol=1e-12)
    np.testing.assert_allclose(breakdown["span_ns"], run.summary.step_time_ns, rtol=1e-9)
    assert set(breakdown["critical"].tolist()) <= {"compute", "comm", "p2p", "idle"}


def test_compare_op_p50_of_a_run_with_itself(run):
    table = analysis.compare_op_p50(run.summary_op_p50(), run.summary_op_p50())
    assert table.size == run.summary.ops.size
    np.testing.assert_array_equal(table["ratio"], 1.0)


def test_compare_op_p50_ratio_and_missing_ops():
    table = analysis.compare_op_p50({"gemm": 100.0, "norm": 10.0}, {"gemm": 150.0, "ar": 5.0})
    assert table["name"].tolist() == ["gemm", "norm", "ar"]
    assert table["ratio"][0] == 1.5
    assert np.isnan(table["ratio"][1]) and np.isnan(table["ratio"][2])


# ---- interval arithmetic (hand-computed) ----

def _exposed(comm, compute):
    c = np.array(comm, dtype=float).reshape(-1, 2)
    k = np.array(compute, dtype=float).reshape(-1, 2)
    return analysis.exposed_ns(c[:, 0], c[:, 1], k[:, 0], k[:, 1])


@pytest.mark.parametrize("comm, compute, expected", [
    ([(0, 10)], [(5, 15)], 5),                      # overlapping: [0,5) is exposed
    ([(2, 8)], [(0, 10)], 0),                       # comm nested in compute: hidden
    ([(0, 10)], [(2, 5)], 7),                       # compute nested in comm
    ([(0, 3), (10, 12)], [(4, 9)], 5),              # disjoint: all exposed
    ([(0, 5)], [(5, 10)], 5),                       # touching only
    ([(0, 4), (2, 6)], [(1, 2), (5, 7)], 4),        # comm overlaps itself: union [0,6) less 2
    ([(0, 10)], [(1, 3), (2, 4), (6, 7)], 6),       # overlapping compute intervals count once
    ([], [(0, 10)], 0),
    ([(0, 10)], [], 10),
])
def test_exposed_ns(comm, compute, expected):
    assert _exposed(comm, compute) == expected


def test_merge_intervals():
    merged = analysis.merge_intervals(np.array([5, 0, 2, 20, 12]), np.array([8, 3, 4, 25, 20]))
    assert merged.tolist() == [[0, 4], [5, 8], [12, 25]]


def _synthetic(rows):
    """Timeline rows (op_id, iteration, lane, start, end) as the file's dtype."""
    out = np.zeros(len(rows), dtype=TIMELINE_DTYPE)
    for i, (op_id, iteration, lane, start, end) in enumerate(rows):
        out[i] = (op_id, 0, 0, iteration, lane, 0, start, end, 0, 0, 0)
    return out


def test_exposed_comm_and_critical_lane_on_synthetic_timelines():
    timelines = {
        # iteration 0: compute [0,10) and [12,20), comm [8,14): exposed [10,12) = 2
        # iteration 1: compute [100,102), comm [101,130), p2p [125,140): 28 + 10 exposed
        0: _synthetic([(0, 0, 0, 0, 10), (0, 0, 0, 12, 20), (1, 0, 1, 8, 14),
                       (0, 1, 0, 100, 102), (1, 1, 1, 101, 130), (2, 1, 2, 125, 140)]),
        # iteration 0: compute [0,30) with comm hidden inside; iteration 1: short
        1: _synthetic([(0, 0, 0, 0, 30), (1, 0, 1, 5, 10), (0, 1, 0, 100, 101)]),
    }
    iterations, by_rank = analysis.unhidden_comm_by_rank_ns(timelines)
    assert iterations.tolist() == [0, 1]
    assert by_rank.tolist() == [[2, 38], [0, 0]]
    assert analysis.unhidden_comm_ns(timelines)[1].tolist() == [2, 38]
    _, steps = analysis.step_times_ns(timelines)
    assert steps.tolist() == [30, 40]
    b = analysis.step_breakdown(timelines)
    assert b["rank"].tolist() == [1, 0]
    assert b["critical"].tolist() == ["compute", "comm"]
    assert b[1]["compute_ns"] == 2 and b[1]["comm_unhidden_ns"] == 28
    assert b[1]["p2p_unhidden_ns"] == 10 and b[1]["idle_ns"] == 0


# ---- export and plots ----

def test_perfetto_trace(run, tmp_path):
    path = export.write_trace(str(tmp_path / "trace.json"), run.timelines, run.op_names(),
                              run.op_kinds(), run.attrs)
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(events) == sum(t.size for t in run.timelines.values())
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in events)
    assert {e["args"]["rank"] for e in events} == {0, 1}
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert all(names[(e["pid"], e["tid"])] == e["args"]["lane"] for e in events)


def _partial_overlaps(events):
    """Pairs of slices on one (pid, tid) that overlap without one holding the other: Perfetto
    can draw a thread's slices only as a stack. Times in whole ns."""
    tracks = {}
    for e in events:
        start = round(e["ts"] * 1e3)
        tracks.setdefault((e["pid"], e["tid"]), []).append((start, start + round(e["dur"] * 1e3),
                                                            e["name"]))
    found = []
    for track, slices in tracks.items():
        open_slices = []
        for start, end, name in sorted(slices, key=lambda s: (s[0], -s[1])):
            while open_slices and open_slices[-1][1] <= start:
                open_slices.pop()
            if open_slices and end > open_slices[-1][1]:
                found.append((track, open_slices[-1], (start, end, name)))
            open_slices.append((start, end, name))
    return found


def test_partial_overlap_check_by_hand():
    def x(tid, ts, dur):
        return {"pid": 1, "tid": tid, "ts": ts, "dur": dur, "name": f"{ts}"}
    nested = [x(1, 0, 10), x(1, 2, 3), x(1, 5, 5), x(1, 10, 1)]
    assert _partial_overlaps(nested) == []
    assert len(_partial_overlaps([x(2, 0, 10), x(2, 5, 10)])) == 1
    assert _partial_overlaps([x(2, 0, 10), x(3, 5, 10)]) == []


@pytest.mark.parametrize("point, word", [(0, "chunk"), (1, "part")])
def test_perfetto_tracks_of_chunks_and_parts(overlap_run, overlap_run_path, tmp_path, point, word):
    """chunked:2 (point 0) and split:2 (point 1): each chunk or part of a lane is a thread of its
    own, so no two slices of one thread partly overlap (collectives of consecutive chunks run
    at once: on one thread they would)."""
    strategy = overlap_run.points[point].config["strategy"]
    assert strategy == ("chunked:2" if point == 0 else "split:2")
    out = tmp_path / "trace.json"
    done = analysis_cli("trace", str(overlap_run_path), "--point", str(point), "-o", str(out))
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(events) == sum(t.size for t in overlap_run.points[point].timelines.values())
    assert _partial_overlaps(events) == []
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    for lane in ("compute", "comm"):
        assert {f"{lane} {word} 0", f"{lane} {word} 1"} <= set(names.values())
    for e in events:
        assert names[(e["pid"], e["tid"])] == f"{e['args']['lane']} {word} {e['args'][word]}"
        assert e["tid"] == export.thread_id(["compute", "comm", "p2p"].index(e["args"]["lane"]),
                                            e["args"][word])
    # Both chunks (parts) of every collective are there, in start order.
    comm = [e for e in events if e["cat"] == "collective" and not e["args"]["warmup"]]
    by_instance = {}
    for e in comm:
        key = (e["pid"], e["name"], e["args"]["iteration"], e["args"]["layer"])
        by_instance.setdefault(key, []).append((e["args"][word], e["ts"]))
    assert by_instance and all(sorted(v) == sorted(v, key=lambda u: u[1]) and
                               [u for u, _ in sorted(v)] == [0, 1] for v in by_instance.values())


def test_unit_index_by_hand():
    rows = _synthetic([(0, 0, 0, 0, 10), (1, 0, 1, 10, 30), (0, 0, 0, 12, 20),
                       (1, 0, 1, 21, 30), (2, 0, 0, 31, 32), (0, 1, 0, 40, 50)])
    # op 0 and op 1 twice in iteration 0 (chunks 0, 1), op 2 once, op 0 once in iteration 1.
    assert export.unit_index(rows).tolist() == [0, 0, 1, 1, 0, 0]
    assert export.strategy_of({"overlap": "split:2,none"}) == "split:2"
    assert export.strategy_of({"overlap": "none,chunked:4", "strategy": "chunked:4"}) == "chunked:4"


# ---- exposed communication: what the C++ side stored ----

def test_exposure_is_the_stored_value(overlap_run, overlap_run_path):
    """Python reads the exposed communication C++ wrote, for every strategy of a run with
    overlap; the summary table shows the same numbers."""
    rows = analysis_cli("summary", str(overlap_run_path)).stdout.splitlines()
    header = rows[0].split()
    assert header[10:12] == ["exposed_comm_ms", "exposed_ic_ms"]
    for k, point in enumerate(overlap_run.points):
        attrs = point.summary.attrs
        exposed = analysis.exposure(point)
        assert exposed == (attrs["exposed_comm_ns"], "stored",
                           attrs["exposed_interconnect_ns"], "stored")
        cells = rows[1 + k].split()
        assert cells[10] == f"{attrs['exposed_comm_ns'] / 1e6:.4f}"
        assert cells[11] == f"{attrs['exposed_interconnect_ns'] / 1e6:.4f}"


def test_exposure_recomputed_only_without_a_stored_value(overlap_run_path, tmp_path):
    """Without the stored values: exposed_interconnect by the C++ rule on /summary/ops (the same
    number), exposed_comm from the timelines; both marked as recomputed in the summary."""
    path = tmp_path / "older.h5"
    shutil.copy(overlap_run_path, path)
    with h5py.File(path, "r+") as f:
        stored = {k: float(f["points/1/summary"].attrs[k])
                  for k in ("exposed_comm_ns", "exposed_interconnect_ns")}
        for k in stored:
            del f["points/1/summary"].attrs[k]
    point = load(str(path)).points[1]
    exposed = analysis.exposure(point)
    assert exposed.interconnect_source == "summary ops"
    assert exposed.interconnect_ns == pytest.approx(stored["exposed_interconnect_ns"], rel=1e-9)
    _, unhidden = analysis.unhidden_comm_ns(point.timelines)
    assert exposed.comm_source == "timelines"
    assert exposed.comm_ns == np.percentile(unhidden, 50)
    lines = analysis_cli("summary", str(path)).stdout.splitlines()
    cells = lines[2].split()
    assert cells[10].endswith("*") and cells[11].endswith("*")
    assert lines[1].split()[10][-1].isdigit()
    assert lines[-1].startswith("* not stored in the file, recomputed")


def test_plots_write_png(run, tmp_path):
    png_magic = b"\x89PNG\r\n\x1a\n"
    gantt = plots.plot_timeline(run.timelines, run.op_kinds(), str(tmp_path / "gantt.png"))
    hist = plots.plot_step_histogram(run.summary.step_time_ns, str(tmp_path / "hist.png"),
                                     run.summary.warmup_step_time_ns)
    for path in (gantt, hist):
        with open(path, "rb") as f:
            assert f.read(8) == png_magic


def test_cli(run_path, tmp_path):
    done = analysis_cli("summary", str(run_path))
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()
    assert header.split()[:4] == ["run", "model", "phase", "tp"]
    assert row.split()[1:4] == ["tiny", "prefill", "2"]
    assert analysis_cli("plot", str(run_path), "-o", str(tmp_path)).returncode == 0
    assert (tmp_path / "tmp-timeline.png").is_file() and (tmp_path / "tmp-steps.png").is_file()
    assert analysis_cli("trace", str(run_path), "-o", str(tmp_path / "t.json")).returncode == 0
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    missing = analysis_cli("summary", str(tmp_path / "missing.h5"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
