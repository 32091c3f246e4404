"""`export` and Run.to_dataframe(): tidy tables of committed GPU result files (a two-rank run,
a run of two attention implementations, a sweep), read back and checked against the HDF5 values
read directly with h5py; the refusals (output collides with an input, an input that is no
regular file); an incomplete file; a sweep file given the repeats table with h5py."""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pandas as pd
import pytest

from conftest import REPO, analysis_cli, raw_result
from ridgeline_analysis import load
from ridgeline_analysis.tidy import STACK_KEYS, STEP_KEYS

#: Two two-rank H100 decode runs (one per all-reduce algorithm), with /roofs.
RUN_A = raw_result("h100-allreduce-2026-11-26", "f2/h5/allreduce_llama8b_decode_auto_1.h5")
RUN_B = raw_result("h100-allreduce-2026-11-26", "f2/h5/allreduce_llama8b_decode_nccl_1.h5")
#: A run of two attention implementations (/points/0 fused, /points/1 cudnn), with timelines.
POINTS_RUN = raw_result("h200x1-attention-2026-11-23", "h5/attention_layer_s16384.h5")
#: A two-rank decode sweep of 12 points, one failed, without timelines or repeats.
SWEEP = raw_result("h200x2-decode-2026-11-24", "h5/decode_tp2_gpt-h8192_heuristic.h5")
REPEATS = 3
INTERVALS = ("step_p50", "compute", "hbm", "interconnect", "launch")


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


FORMATS = ["csv", "json", pytest.param("parquet", marks=pytest.mark.skipif(
    not _has_pyarrow(), reason="pyarrow is not installed: Parquet is not written"))]


def _text(value):
    """An HDF5 string (bytes) as str; numpy scalars as Python values."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value.item() if isinstance(value, np.generic) else value


def _attrs(obj) -> dict:
    return {key: _text(value) for key, value in obj.attrs.items()}


def _column(values) -> list:
    return [_text(v) for v in values]


def _export(tmp_path, fmt, *args, files=(RUN_A,)):
    out = tmp_path / f"out.{fmt}"
    done = analysis_cli("export", *map(str, files), "--format", fmt, "-o", str(out), *args)
    assert done.returncode == 0, done.stderr
    return out, done


def _read_back(path, fmt) -> pd.DataFrame:
    if fmt == "csv":
        # CSV keeps no types, and a version such as "13.0" would read back as a number: the
        # cells are compared as the text written.
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    if fmt == "json":
        with open(path, encoding="utf-8") as f:
            return pd.DataFrame(json.load(f))
    return pd.read_parquet(path)


def _assert_column(table: pd.DataFrame, name: str, expected: list, fmt: str) -> None:
    got = table[name].tolist()
    if fmt == "csv":
        expected = ["" if v is None else str(v) for v in expected]
    else:
        got = [None if v is None or (isinstance(v, float) and np.isnan(v)) else _text(v)
               for v in got]
    assert got == expected, name


def _assert_context(table, rows, fmt, config, stack, gpu_names) -> None:
    """The columns every row of one run carries: its /config, /stack versions and GPUs."""
    part = table.iloc[rows]
    for key, value in config.items():
        _assert_column(part, f"config.{key}", [value] * len(rows), fmt)
    for key in STACK_KEYS:
        _assert_column(part, key, [stack.get(key)] * len(rows), fmt)
    _assert_column(part, "gpu_name", [",".join(dict.fromkeys(gpu_names))] * len(rows), fmt)


def _timeline_rows(f: h5py.File, base: str):
    """(rank, timeline) of every rank under `base`, in rank order."""
    world = int(f.attrs["world_size"])
    return [(r, f[f"{base}/ranks/{r}/timeline"][()]) for r in range(world)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_timeline_export_matches_the_file(tmp_path, fmt):
    out, _ = _export(tmp_path, fmt)
    table = _read_back(out, fmt)
    with h5py.File(RUN_A, "r") as f:
        timelines = _timeline_rows(f, "")
        names = _column(f["ops"][()]["name"])
        kinds = _column(f["ops"][()]["kind"])
        summary, config, stack = _attrs(f["summary"]), _attrs(f["config"]), _attrs(f["stack"])
        gpu_names = _column(f["topology/gpu_name"][()])
    rows = np.concatenate([t for _, t in timelines])
    assert len(table) == rows.size
    _assert_column(table, "file", [str(RUN_A)] * rows.size, fmt)
    _assert_column(table, "complete", [True] * rows.size, fmt)
    _assert_column(table, "rank", [r for r, t in timelines for _ in range(t.size)], fmt)
    for name in ("iteration", "op_id", "layer", "microbatch", "t_start_ns", "t_end_ns", "flops",
                 "hbm_bytes", "comm_bytes"):
        _assert_column(table, name, rows[name].tolist(), fmt)
    _assert_column(table, "warmup", [bool(w) for w in rows["warmup"]], fmt)
    _assert_column(table, "duration_ns", (rows["t_end_ns"] - rows["t_start_ns"]).tolist(), fmt)
    _assert_column(table, "op", [names[i] for i in rows["op_id"]], fmt)
    _assert_column(table, "kind", [kinds[i] for i in rows["op_id"]], fmt)
    _assert_column(table, "lane", [("compute", "comm", "p2p")[i] for i in rows["lane"]], fmt)
    _assert_column(table, "transport", [config["transport"]] * rows.size, fmt)
    for key in STEP_KEYS:
        _assert_column(table, key, [summary[key]] * rows.size, fmt)
    _assert_context(table, list(range(rows.size)), fmt, config, stack, gpu_names)


def test_points_of_a_run_are_told_apart(tmp_path):
    out, _ = _export(tmp_path, "json", files=(POINTS_RUN,))
    table = _read_back(out, "json")
    with h5py.File(POINTS_RUN, "r") as f:
        points = sorted(f["points"], key=int)
        expected = [(int(k), _attrs(f[f"points/{k}/config"])["strategy"], _timeline_rows(
            f, f"points/{k}")) for k in points]
    # The root holds point 0 again: its rows are not exported twice.
    assert len(table) == sum(t.size for _, _, ranks in expected for _, t in ranks)
    for k, strategy, ranks in expected:
        mine = table[table["point"] == k]
        assert set(mine["config.strategy"]) == {strategy}
        rows = np.concatenate([t for _, t in ranks])
        assert mine["t_start_ns"].tolist() == rows["t_start_ns"].tolist()


@pytest.mark.parametrize("fmt", FORMATS)
def test_points_export_matches_the_file(tmp_path, fmt):
    out, _ = _export(tmp_path, fmt, "--table", "points", files=(SWEEP,))
    table = _read_back(out, fmt)
    with h5py.File(SWEEP, "r") as f:
        points = f["sweep/points"][()]
        configs = [_attrs(f[f"points/{k}/config"]) for k in points["point"]]
        stack = _attrs(f["stack"])
        gpu_names = _column(f["topology/gpu_name"][()])
    assert len(table) == points.size
    for name in points.dtype.names:
        _assert_column(table, name, _column(points[name]), fmt)
    for i, config in enumerate(configs):
        _assert_context(table, [i], fmt, config, stack, gpu_names)


def test_two_files_join_into_one_table(tmp_path):
    out, _ = _export(tmp_path, "csv", files=(RUN_A, RUN_B))
    table = _read_back(out, "csv")
    sizes = []
    for path in (RUN_A, RUN_B):
        with h5py.File(path, "r") as f:
            sizes.append(sum(t.size for _, t in _timeline_rows(f, "")))
    assert table["file"].tolist() == [str(RUN_A)] * sizes[0] + [str(RUN_B)] * sizes[1]
    assert list(table.columns) == list(_read_back(_export(tmp_path, "csv")[0], "csv").columns)


def test_dataframes_in_python_hold_no_bytes():
    for frame in (load(str(RUN_A)).to_dataframe(), load(str(SWEEP)).points_dataframe()):
        assert len(frame)
        assert not any(isinstance(v, bytes) for v in frame.to_numpy().ravel())


def _refused(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in lines[0]


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", ["same path", "symbolic link", "hard link"])
def test_output_that_is_an_input_is_refused(tmp_path, name):
    source = tmp_path / "run.h5"
    shutil.copyfile(RUN_A, source)
    before = _digest(source)
    out = source
    if name == "symbolic link":
        out = tmp_path / "link.csv"
        out.symlink_to(source)
    elif name == "hard link":
        out = tmp_path / "hard.csv"
        os.link(source, out)
    done = analysis_cli("export", str(RUN_B), str(source), "--format", "csv", "-o", str(out))
    _refused(done, "the same file")
    assert _digest(source) == before


def test_another_spelling_of_an_input_is_refused(tmp_path):
    source = tmp_path / "run.h5"
    shutil.copyfile(RUN_A, source)
    (tmp_path / "sub").mkdir()
    done = analysis_cli("export", str(source), "--format", "json", "-o",
                        str(tmp_path / "sub" / ".." / "." / "run.h5"))
    _refused(done, "the same file")


def test_fifo_and_directory_inputs_are_refused(tmp_path):
    fifo = tmp_path / "fifo.h5"
    os.mkfifo(fifo)
    for path, what in ((fifo, "a FIFO"), (tmp_path, "a directory")):
        done = analysis_cli("export", str(path), "--format", "csv", "-o",
                            str(tmp_path / "out.csv"))
        _refused(done, "not a regular file", what)
    assert not (tmp_path / "out.csv").exists()


def test_parquet_without_pyarrow_says_so_and_leaves_the_output(tmp_path):
    hidden = tmp_path / "hidden" / "pyarrow"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('pyarrow is hidden')\n")
    out = tmp_path / "out" / "table.parquet"
    out.parent.mkdir()
    out.write_text("the previous export\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hidden.parent), str(REPO / "scripts")])}
    done = subprocess.run([sys.executable, "-m", "ridgeline_analysis", "export", str(RUN_A),
                           "--format", "parquet", "-o", str(out)], env=env, capture_output=True,
                          text=True, timeout=120)
    _refused(done, "pyarrow")
    assert out.read_text() == "the previous export\n"
    assert os.listdir(out.parent) == ["table.parquet"]


def test_table_without_rows_is_refused(tmp_path):
    done = analysis_cli("export", str(SWEEP), "--format", "csv", "-o", str(tmp_path / "t.csv"))
    _refused(done, "no timelines")
    done = analysis_cli("export", str(RUN_A), "--table", "repeats", "--format", "csv", "-o",
                        str(tmp_path / "t.csv"))
    _refused(done, "no repeats")
    assert os.listdir(tmp_path) == []


def test_incomplete_file_is_exported_marked(tmp_path):
    path = tmp_path / "partial.h5"
    shutil.copyfile(SWEEP, path)
    with h5py.File(path, "r+") as f:
        f["sweep"].attrs["complete"] = np.int64(0)
    out, done = _export(tmp_path, "csv", "--table", "points", files=(path, SWEEP))
    warnings = done.stderr.strip().splitlines()
    assert len(warnings) == 1 and "incomplete" in warnings[0] and str(path) in warnings[0]
    table = _read_back(out, "csv")
    half = len(table) // 2
    assert table["complete"].tolist() == ["False"] * half + ["True"] * half


def _write_table(group: h5py.Group, name: str, columns: dict) -> None:
    """A table as the C++ side writes it (h5.cpp write_table): one compound dataset, an int64,
    float64 or variable-length UTF-8 string field per column."""
    kinds = {"i": np.int64, "f": np.float64}
    dtype = np.dtype([(key, kinds.get(np.asarray(v).dtype.kind, h5py.string_dtype("utf-8")))
                      for key, v in columns.items()])
    rows = np.empty(len(next(iter(columns.values()))), dtype=dtype)
    for key, values in columns.items():
        rows[key] = values
    if name in group:
        del group[name]
    group.create_dataset(name, data=rows)


def _columns(table: np.ndarray) -> dict:
    return {key: np.array(_column(table[key])) if table[key].dtype.kind in "OS" else table[key]
            for key in table.dtype.names}


@pytest.fixture
def repeated_sweep(tmp_path):
    """The sweep with what sweeps that repeat their points add: /sweep/repeats (REPEATS rows per
    ok point), the repeats and interval columns of /sweep/points, the crossovers' status."""
    path = tmp_path / "repeated.h5"
    shutil.copyfile(SWEEP, path)
    with h5py.File(path, "r+") as f:
        points = _columns(f["sweep/points"][()])
        ok = points["point"][points["status"] == "ok"]
        point = np.repeat(ok, REPEATS)
        scale = 1 + np.tile(np.arange(REPEATS), ok.size) / 100
        row = np.searchsorted(points["point"], point)
        repeats = {"point": point, "repeat": np.tile(np.arange(REPEATS), ok.size),
                   "status": np.array(["ok"] * point.size)}
        for key in ("step_p50_ns", "step_p99_ns", "compute_ns", "hbm_ns", "interconnect_ns",
                    "launch_ns", "exposed_interconnect_ns"):
            repeats[key] = points[key][row] * scale
        repeats["ceiling"] = points["ceiling"][row]
        _write_table(f["sweep"], "repeats", repeats)
        points["repeats"] = np.where(points["status"] == "ok", REPEATS, 0)
        for name in INTERVALS:
            median = points[f"{name}_ns" if name != "step_p50" else "step_p50_ns"]
            points[f"{name}_lo_ns"], points[f"{name}_hi_ns"] = median * 0.99, median * 1.02
        _write_table(f["sweep"], "points", points)
        crossovers = _columns(f["sweep/crossovers"][()])
        crossovers["status"] = np.array(["found"] * crossovers["axis"].size)
        _write_table(f["sweep"], "crossovers", crossovers)
    return path


@pytest.mark.parametrize("fmt", FORMATS)
def test_repeats_export_matches_the_file(repeated_sweep, tmp_path, fmt):
    out, _ = _export(tmp_path, fmt, "--table", "repeats", files=(repeated_sweep,))
    table = _read_back(out, fmt)
    with h5py.File(repeated_sweep, "r") as f:
        repeats = f["sweep/repeats"][()]
        points = f["sweep/points"][()]
        configs = {int(k): _attrs(f[f"points/{k}/config"]) for k in points["point"]}
        stack = _attrs(f["stack"])
        gpu_names = _column(f["topology/gpu_name"][()])
    assert len(table) == repeats.size
    for name in repeats.dtype.names:
        _assert_column(table, name, _column(repeats[name]), fmt)
    row = [list(points["point"]).index(p) for p in repeats["point"]]
    for name in ("label", "tp", "batch", "context", "transport"):
        _assert_column(table, name, [_text(points[name][i]) for i in row], fmt)
    for point, config in configs.items():
        rows = np.flatnonzero(repeats["point"] == point).tolist()
        _assert_context(table, rows, fmt, config, stack, gpu_names)


def test_points_export_has_the_intervals(repeated_sweep, tmp_path):
    out, _ = _export(tmp_path, "json", "--table", "points", files=(repeated_sweep,))
    table = _read_back(out, "json")
    with h5py.File(repeated_sweep, "r") as f:
        points = f["sweep/points"][()]
    for name in ("repeats", *(f"{n}_{end}_ns" for n in INTERVALS for end in ("lo", "hi"))):
        _assert_column(table, name, points[name].tolist(), "json")
    run = load(str(repeated_sweep))
    assert run.sweep.crossovers["status"].tolist() == ["found"] * run.sweep.crossovers.size
    assert run.repeats_dataframe()["repeat"].tolist() == run.sweep.repeats["repeat"].tolist()
