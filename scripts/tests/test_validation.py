"""The package refuses what `ridgeline validate` refuses, and accepts what it accepts: real files
written by the binary (conftest.py), damaged with h5py, read in-process and through the command
line; and selections that select nothing are refused before any output is written."""
import json
import shutil

import h5py
import numpy as np
import pytest

from conftest import analysis_cli, ridgeline_validate
from ridgeline_analysis import SchemaError, load, validate


def _refused(done, *words):
    """Exit code 2, one line on stderr naming `words`, no traceback."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)


def _set_field(f, path, field, row, value):
    """Rewrites one field of one row of a compound dataset."""
    table = f[path][()]
    table[field][row] = value
    f[path][...] = table


def _bad_op_id(f):
    _set_field(f, "ranks/1/timeline", "op_id", 5, 999)


def _nan_step(f):
    f["summary/step_time_ns"][1] = np.nan


def _world_size(f):
    f.attrs["world_size"] = np.int64(3)


def _lane(f):
    _set_field(f, "ranks/0/timeline", "lane", 0, 7)


def _warmup_flag(f):
    _set_field(f, "ranks/0/timeline", "warmup", 2, 2)


def _end_before_start(f):
    table = f["ranks/1/timeline"][()]
    table["t_end_ns"][3] = table["t_start_ns"][3] - 1
    f["ranks/1/timeline"][...] = table


def _op_kind(f):
    _set_field(f, "ops", "kind", 0, b"magic")


def _root_attribute(f):
    del f.attrs["git_sha"]


def _schema_version_text(f):
    f.attrs["schema_version"] = "1"


def _stack_attribute(f):
    del f["stack"].attrs["hdf5"]


def _percentiles(f):
    f["summary"].attrs["p50_ns"] = f["summary"].attrs["p99_ns"] * 2


def _roof_rate(f):
    _set_field(f, "roofs/gemm", "tflops", 0, -1.0)


def _collectives_kind(f):
    f.attrs["command"] = "collectives"


def _checksum(f):
    f["summary"].attrs["output_checksum"] = "not-hex"


def _topology_entries(f):
    name = next(iter(f["topology"]))
    values = f["topology"][name][()]
    del f["topology"][name]
    f["topology"].create_dataset(name, data=values[:1])


#: (damage, what the one line names): every one a file `ridgeline validate` rejects.
RUN_DAMAGES = [
    (_bad_op_id, "op_id 999 outside [0, "),
    (_nan_step, "/summary/step_time_ns: value 1 is nan, expected > 0"),
    (_world_size, "/: world_size 3 but /topology holds 2 ranks"),
    (_lane, "lane 7 not in {0, 1, 2}"),
    (_warmup_flag, "warmup 2 not in {0, 1}"),
    (_end_before_start, "t_end_ns < t_start_ns"),
    (_op_kind, "unknown kind 'magic'"),
    (_root_attribute, "missing attribute 'git_sha'"),
    (_schema_version_text, "schema_version is not an integer"),
    (_stack_attribute, "/stack: missing attribute 'hdf5'"),
    (_percentiles, "expected p50_ns <= p95_ns <= p99_ns"),
    (_roof_rate, "/roofs/gemm: row 0: tflops must be > 0"),
    (_collectives_kind, "/: missing attribute 'check'"),
    (_checksum, "output_checksum must be 16 lowercase hexadecimal digits"),
    (_topology_entries, "1 values, expected world_size 2"),
]


def _point_op_id(f):
    _set_field(f, "points/1/ranks/0/timeline", "op_id", 0, 999)


def _point_nan_step(f):
    f["points/0/summary/step_time_ns"][0] = np.nan


def _point_checksum(f):
    f["points/1/summary"].attrs["output_checksum_algorithm"] = "md5"


def _point_attention(f):
    f["points/1/summary"].attrs["attention"] = "flash"


def _cudnn_plans_without_version(f):
    f["stack"].attrs["cudnn_plans"] = "fwd b=1 h=8: eng0"
    if "cudnn" in f["stack"].attrs:
        del f["stack"].attrs["cudnn"]


#: Damages of a run of two overlap strategies (/points/0 and /points/1).
POINT_DAMAGES = [
    (_point_op_id, "/points/1/ranks/0/timeline: row 0: op_id 999 outside [0, "),
    (_point_nan_step, "/points/0/summary/step_time_ns: value 0 is nan"),
    (_point_checksum, "output_checksum_algorithm 'md5' is not fnv1a64"),
    (_point_attention, "attention is 'flash', expected fused, naive or cudnn"),
    (_cudnn_plans_without_version, "/stack: cudnn_plans without cudnn"),
]


def _sweep_axes(f):
    del f["sweep"].attrs["axes"]


def _sweep_field(f):
    table = f["sweep/points"][()]
    names = [n for n in table.dtype.names if n != "exposed_interconnect_ns"]
    del f["sweep/points"]
    f.create_dataset("sweep/points", data=table[names])


SWEEP_DAMAGES = [
    (_sweep_axes, "/sweep: missing attribute 'axes'"),
    (_sweep_field, "/sweep/points: missing field 'exposed_interconnect_ns'"),
]


def _damaged(source, tmp_path, damage):
    path = tmp_path / f"{damage.__name__.strip('_')}.h5"
    shutil.copy(source, path)
    with h5py.File(path, "r+") as f:
        damage(f)
    return path


def _check_rejected(path, words, command):
    """`ridgeline validate` rejects the file and the package finds the same problems; load()
    raises SchemaError naming the first on one line; the command exits 2 with one line and
    writes nothing."""
    done = ridgeline_validate(path)
    assert done.returncode != 0
    assert validate.problems(str(path)) == [line.split(": ", 1)[1]
                                            for line in done.stderr.splitlines()]
    with pytest.raises(SchemaError) as raised:
        load(str(path))
    assert words in str(raised.value) and "\n" not in str(raised.value)
    out = path.parent / f"{path.stem}-out"
    done = analysis_cli(*command(str(path), str(out)))
    _refused(done, words)
    assert not out.exists() and not list(path.parent.glob(f"{path.stem}*.png"))


#: Commands that write output, one per damage in turn: (file, out) -> argv.
COMMANDS = [
    lambda path, out: ["summary", path, "-o", out],
    lambda path, out: ["trace", path, "-o", out],
    lambda path, out: ["plot", path, "-o", out],
]


@pytest.mark.parametrize("index", range(len(RUN_DAMAGES)),
                         ids=[d.__name__.strip("_") for d, _ in RUN_DAMAGES])
def test_damaged_run_file_is_refused(run_path, tmp_path, index):
    damage, words = RUN_DAMAGES[index]
    _check_rejected(_damaged(run_path, tmp_path, damage), words, COMMANDS[index % len(COMMANDS)])


@pytest.mark.parametrize("index", range(len(POINT_DAMAGES)),
                         ids=[d.__name__.strip("_") for d, _ in POINT_DAMAGES])
def test_damaged_point_is_refused(overlap_run_path, tmp_path, index):
    damage, words = POINT_DAMAGES[index]
    path = _damaged(overlap_run_path, tmp_path, damage)
    _check_rejected(path, words, lambda p, out: ["trace", p, "--point", "1", "-o", out])


@pytest.mark.parametrize("index", range(len(SWEEP_DAMAGES)),
                         ids=[d.__name__.strip("_") for d, _ in SWEEP_DAMAGES])
def test_damaged_sweep_file_is_refused(sweep_path, tmp_path, index):
    damage, words = SWEEP_DAMAGES[index]
    path = _damaged(sweep_path, tmp_path, damage)
    _check_rejected(path, words, lambda p, out: ["summary", p, "-o", out])


def test_valid_run_without_a_points_timelines_is_accepted(overlap_run_path, tmp_path):
    """A strategy's timelines may be left out (validate asks for them only with its /ops): the
    file stays valid, and the package reads it and summarises both strategies."""
    path = tmp_path / "slim.h5"
    shutil.copy(overlap_run_path, path)
    with h5py.File(path, "r+") as f:
        del f["points/1/ranks"]
        del f["points/1/ops"]
    done = ridgeline_validate(path)
    assert done.returncode == 0, done.stderr
    assert validate.problems(str(path)) == []
    run = load(str(path))
    assert run.points[1].timelines == {} and run.points[1].summary is not None
    assert sorted(run.points[0].timelines) == [0, 1]
    summary = analysis_cli("summary", str(path))
    assert summary.returncode == 0, summary.stderr
    assert [r.split()[0] for r in summary.stdout.splitlines()[1:]] == ["slim.h5-p0", "slim.h5-p1"]
    _refused(analysis_cli("trace", str(path), "--point", "1", "-o", str(tmp_path / "t.json")),
             "no timelines")


# ---- selections that select nothing ----

def test_plot_of_an_iteration_the_run_lacks_is_refused(run_path, tmp_path):
    out = tmp_path / "plots"
    _refused(analysis_cli("plot", str(run_path), "--iteration", "99999", "-o", str(out)),
             "no timed iteration 99999", "1..3")
    # A warm-up iteration is not plotted either: the Gantt chart shows timed iterations.
    _refused(analysis_cli("plot", str(run_path), "--iteration", "0", "-o", str(out)),
             "no timed iteration 0")
    assert not out.exists()
    done = analysis_cli("plot", str(run_path), "--iteration", "2", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["tmp-steps.png", "tmp-timeline.png"]


def test_rank_and_op_selections(run, run_path, tmp_path):
    out = tmp_path / "plots"
    _refused(analysis_cli("plot", str(run_path), "--rank", "5", "-o", str(out)), "no rank 5", "0, 1")
    _refused(analysis_cli("plot", str(run_path), "--op", "nosuch", "-o", str(out)), "no op 'nosuch'")
    assert not out.exists()
    trace = tmp_path / "t.json"
    _refused(analysis_cli("trace", str(run_path), "--iteration", "99999", "-o", str(trace)),
             "no iteration 99999", "0..3")
    assert not trace.exists()
    gemm = next(op.name for op in run.ops if op.kind == "gemm")
    done = analysis_cli("trace", str(run_path), "--rank", "1", "--op", gemm, "-o", str(trace))
    assert done.returncode == 0, done.stderr
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    assert events and {(e["args"]["rank"], e["name"]) for e in events} == {(1, gemm)}


def test_trace_of_several_points_asks_for_one(overlap_run_path, tmp_path):
    out = tmp_path / "t.json"
    _refused(analysis_cli("trace", str(overlap_run_path), "-o", str(out)), "choose one with --point K")
    assert not out.exists()


def test_ridgeline_of_a_dtype_without_roofs_is_refused(run_path, tmp_path):
    out = tmp_path / "plane.png"
    _refused(analysis_cli("ridgeline", str(run_path), "--dtype", "bf16", "-o", str(out)),
             "no GEMM roof of dtype 'bf16'", "fp32")
    assert not out.exists()
