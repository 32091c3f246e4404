"""Nothing lost, nothing hung, nothing crashed: the package's side.

- Writers: every file the command line writes (tables, pictures, traces, exports) goes to a
  temporary file beside the target and is renamed onto it once flushed, synced and closed; a
  write that fails (a full disk: a 64 KiB tmpfs mounted for the test) leaves the target as it
  was and no temporary file, and says so in one line, exit code 1.
- Hostile files: real files written by the binary (conftest.py), damaged with h5py (counts far
  beyond what the file holds, attributes of the wrong kind, NaN and negative numbers, a sweep
  axis that is no column), are refused by every reader (load(), validate, summary, bars,
  scaling, export, trace) with one line and exit code 2, in bounded memory and time: each is
  read in a child process under an address-space limit.
- Partial files (complete = 0): read and marked, with one warning line, in every command that
  reads them; `validate` refuses them.
"""
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import REPO, analysis_cli, ridgeline_validate, run_ridgeline
from ridgeline_analysis import load

#: The address space a child reading a hostile file may use: ample for the package and its
#: libraries, far below what a count taken from the file would allocate.
MEMORY_LIMIT_BYTES = 4 << 30
CHILD_TIMEOUT_S = 300

# Runs each command line of argv[1] (JSON) through main() in this one process, then load() and
# validate.problems() of argv[2]; prints, as JSON, per command its exit code and stderr,
# load()'s outcome and the problems. An exception escaping main() is printed as the
# interpreter would (a traceback).
_DRIVER = r"""
import contextlib, io, json, sys, traceback
from ridgeline_analysis import load, validate
from ridgeline_analysis.__main__ import main
results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
        except BaseException:
            traceback.print_exc()
            code = "raised"
    results.append([code, err.getvalue()])
try:
    load(sys.argv[2])
    loaded = ["loaded", ""]
except BaseException as e:
    loaded = [type(e).__name__, str(e)]
print(json.dumps({"commands": results, "load": loaded,
                  "problems": validate.problems(sys.argv[2])}))
"""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def _read_in_child(commands, path):
    """The commands' (exit code, stderr), load()'s (exception name, message) and
    validate.problems(), all run in a child process under MEMORY_LIMIT_BYTES; fails the test if
    the child does not finish."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg",
           "PYTHONPATH": str(REPO / "scripts")}
    try:
        done = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(commands), str(path)],
                              capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, env=env,
                              preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading {path} did not finish within {CHILD_TIMEOUT_S} s")
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["commands"], report["load"], report["problems"]


def _damaged(source, tmp_path, damage):
    path = tmp_path / f"{damage.__name__.strip('_')}.h5"
    shutil.copy(source, path)
    with h5py.File(path, "r+") as f:
        damage(f)
    return path


def _rewrite_field(f, path, field, row, value, dtype=None):
    """One field of one row of a compound dataset rewritten; with `dtype`, the field's type
    changed too (the dataset is written anew)."""
    table = f[path][()]
    if dtype is not None:
        table = table.astype([(n, dtype if n == field else table.dtype[n])
                              for n in table.dtype.names])
        del f[path]
        f.create_dataset(path, data=table)
    table[field][row] = value
    f[path][...] = table


# ---- run-file damages: (damage, what the one line names) ----

def _huge_world_size(f):
    f.attrs["world_size"] = np.int64(10**12)


def _negative_world_size(f):
    f.attrs["world_size"] = np.int64(-3)


def _tp_text(f):
    f["config"].attrs["tp"] = "two"


def _tp_float(f):
    f["config"].attrs["tp"] = 2.0


def _phase_number(f):
    f["config"].attrs["phase"] = np.int64(1)


def _complete_text(f):
    f.attrs["complete"] = "no"


def _huge_pp(f):
    # A scheduled pipeline of 10^12 stages in a file that holds the figures of none.
    f["config"].attrs["schedule"] = "1f1b"
    f["config"].attrs["pp"] = np.int64(10**12)


def _summary_op_nan(f):
    _rewrite_field(f, "summary/ops", "p50_ns", 1, np.nan)


def _summary_op_negative(f):
    _rewrite_field(f, "summary/ops", "flops", 0, -5.0)


def _warmup_step_negative(f):
    f["summary/warmup_step_time_ns"][0] = -1.0


def _timeline_nan_start(f):
    _rewrite_field(f, "ranks/0/timeline", "t_start_ns", 2, np.nan, dtype="<f8")


def _timeline_before_epoch(f):
    _rewrite_field(f, "ranks/0/timeline", "t_start_ns", 0, -5)


def _timeline_nan_flops(f):
    _rewrite_field(f, "ranks/1/timeline", "flops", 3, np.nan)


def _unwritten_timeline(f):
    # 10^10 rows declared, none written: the file stays small, a read would not.
    dtype = f["ranks/0/timeline"].dtype
    del f["ranks/0/timeline"]
    f["ranks/0"].create_dataset("timeline", shape=(10**10,), dtype=dtype, chunks=(4096,))


RUN_DAMAGES = [
    (_huge_world_size, "/: world_size 1000000000000 but /topology holds 2 ranks"),
    (_negative_world_size, "/: world_size must be an integer >= 1"),
    (_tp_text, "/config: tp must be an integer, found the string 'two'"),
    (_tp_float, "/config: tp must be an integer, found the number 2"),
    (_phase_number, "/config: phase must be a string, found 1"),
    (_complete_text, "/: complete must be an integer, found the string 'no'"),
    (_huge_pp, "pp is 1000000000000 but the summary holds the figures of 0 stage(s)"),
    (_summary_op_nan, "p50_ns is nan, expected a finite value >= 0"),
    (_summary_op_negative, "flops is -5, expected a finite value >= 0"),
    (_warmup_step_negative, "/summary/warmup_step_time_ns: value 0 is -1, expected > 0"),
    (_timeline_nan_start, "/ranks/0/timeline: field 't_start_ns' has the wrong type class"),
    (_timeline_before_epoch, "/ranks/0/timeline: row 0: t_start_ns -5 < 0"),
    (_timeline_nan_flops, "/ranks/1/timeline: row 3: flops nan, expected a finite value >= 0"),
    (_unwritten_timeline, "/ranks/0/timeline: 10000000000 rows declared but only 0 of"),
]


# ---- sweep-file damages ----

def _unknown_axis(f):
    f["sweep"].attrs["axes"] = "tp,nosuch"


def _axes_number(f):
    f["sweep"].attrs["axes"] = np.int64(5)


def _sweep_complete_two(f):
    f["sweep"].attrs["complete"] = np.int64(2)


SWEEP_DAMAGES = [
    (_unknown_axis, "/sweep: axes names 'nosuch', which is not a sweep axis"),
    (_axes_number, "/sweep: axes must be a string"),
    (_sweep_complete_two, "/sweep: complete must be 0 or 1, found 2"),
]


def _reader_commands(path, out_dir):
    """Every command that reads a file, each writing (if it got that far) into `out_dir`."""
    p = str(path)
    return [["validate", p], ["summary", p, "-o", str(out_dir / "summary.txt")],
            ["export", p, "--format", "json", "-o", str(out_dir / "export.json")],
            ["export", p, "--table", "points", "--format", "csv", "-o",
             str(out_dir / "points.csv")],
            ["trace", p, "-o", str(out_dir / "trace.json")],
            ["bars", p, "-o", str(out_dir / "bars.png")],
            ["scaling", p, "--axis", "tp", "-o", str(out_dir / "scaling.png")]]


def _check_refused_everywhere(path, words, tmp_path):
    """validate.problems() names the damage; every reader refuses the file with one line naming
    it (exit code 2, no traceback) and writes nothing; load() raises SchemaError naming it."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    commands = _reader_commands(path, out_dir)
    results, loaded, found = _read_in_child(commands, path)
    assert any(words in problem for problem in found), (words, found)
    for argv, (code, stderr) in zip(commands, results):
        assert "Traceback" not in stderr, (argv, stderr)
        assert code == 2, (argv, code, stderr)
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (argv, words, stderr)
    assert loaded[0] == "SchemaError" and words in loaded[1] and "\n" not in loaded[1], loaded
    assert os.listdir(out_dir) == []


@pytest.mark.parametrize("index", range(len(RUN_DAMAGES)),
                         ids=[d.__name__.strip("_") for d, _ in RUN_DAMAGES])
def test_hostile_run_file_is_refused_by_every_reader(run_path, tmp_path, index):
    damage, words = RUN_DAMAGES[index]
    _check_refused_everywhere(_damaged(run_path, tmp_path, damage), words, tmp_path)


@pytest.mark.parametrize("index", range(len(SWEEP_DAMAGES)),
                         ids=[d.__name__.strip("_") for d, _ in SWEEP_DAMAGES])
def test_hostile_sweep_file_is_refused_by_every_reader(sweep_path, tmp_path, index):
    damage, words = SWEEP_DAMAGES[index]
    _check_refused_everywhere(_damaged(sweep_path, tmp_path, damage), words, tmp_path)


#: Damages `ridgeline validate` checks too: both validators list the same problems.
SHARED_RULES = (_huge_world_size, _negative_world_size, _tp_text, _tp_float, _phase_number,
                _summary_op_nan, _summary_op_negative, _timeline_nan_start,
                _timeline_before_epoch, _unknown_axis, _axes_number)


def test_shared_rules_are_worded_as_ridgeline_validate_words_them(run_path, sweep_path,
                                                                   tmp_path):
    for damage in SHARED_RULES:
        source = sweep_path if damage in (_unknown_axis, _axes_number) else run_path
        path = _damaged(source, tmp_path, damage)
        done = ridgeline_validate(path)
        assert done.returncode != 0, damage.__name__
        _, _, found = _read_in_child([], path)
        assert found == [line.split(": ", 1)[1] for line in done.stderr.splitlines()], (
            damage.__name__, found, done.stderr)


def test_trace_json_is_strict(run, tmp_path):
    """NaN is no JSON number: a trace holds none, even of timelines made in Python."""
    from ridgeline_analysis import export
    timelines = {r: t.copy() for r, t in run.timelines.items()}
    timelines[0]["flops"][0] = np.nan
    timelines[1]["hbm_bytes"][2] = np.inf
    path = export.write_trace(str(tmp_path / "t.json"), timelines, run.op_names(),
                              run.op_kinds(), {**run.attrs, "odd": float("nan")})

    def refuse(constant):
        raise ValueError(f"{constant} in the trace")

    document = json.loads(Path(path).read_text(), parse_constant=refuse)
    events = [e for e in document["traceEvents"] if e["ph"] == "X"]
    assert events[0]["args"]["flops"] is None and document["otherData"]["odd"] is None


# ---- partial files: complete = 0 ----

@pytest.fixture(scope="module")
def collectives_path(tmp_path_factory) -> Path:
    """A real two-rank `ridgeline collectives` file, sizes up to 1 KiB."""
    workdir = tmp_path_factory.mktemp("collectives")
    run_ridgeline(workdir, "collectives", "--max-bytes", "1K", "--out", "coll.h5")
    return workdir / "coll.h5"


def _partial(source, tmp_path, where):
    """A copy of `source` whose root (where "/") or /sweep says complete = 0."""
    path = tmp_path / f"partial-{Path(source).name}"
    shutil.copy(source, path)
    with h5py.File(path, "r+") as f:
        f[where].attrs["complete"] = np.int64(0)
    return path


def _warned(done, path):
    """stderr's first line is the one warning naming `path` as incomplete."""
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr
    assert lines and "warning" in lines[0] and "incomplete" in lines[0] and str(path) in lines[0]
    assert sum("incomplete" in line for line in lines) == 1, done.stderr
    return lines


def _picture_title(path) -> str:
    from PIL import Image
    with Image.open(path) as image:
        return image.text.get("Title", "")


def _validate_refuses_partial(path, where):
    done = analysis_cli("validate", str(path))
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{where}: incomplete: the job ended before it finished" in lines[0]
    assert "Traceback" not in done.stderr
    assert load(str(path)).complete is False


def test_partial_run_file_is_marked_everywhere(run_path, tmp_path):
    path = _partial(run_path, tmp_path, "/")
    _validate_refuses_partial(path, "/")
    done = analysis_cli("summary", str(path))
    assert done.returncode == 0, done.stderr
    _warned(done, path)
    assert done.stdout.splitlines()[1].startswith(f"{path.name} (incomplete)")
    trace = tmp_path / "t.json"
    done = analysis_cli("trace", str(path), "-o", str(trace))
    assert done.returncode == 0, done.stderr
    _warned(done, path)
    assert json.loads(trace.read_text())["otherData"]["complete"] == 0
    plots = tmp_path / "plots"
    done = analysis_cli("plot", str(path), "-o", str(plots))
    assert done.returncode == 0, done.stderr
    _warned(done, path)
    for picture in plots.iterdir():
        assert _picture_title(picture).endswith("(incomplete)"), picture
    done = analysis_cli("export", str(path), "--format", "csv", "-o", str(tmp_path / "t.csv"))
    assert done.returncode == 0, done.stderr
    _warned(done, path)


def test_partial_sweep_file_is_marked_everywhere(sweep_path, tmp_path):
    path = _partial(sweep_path, tmp_path, "/sweep")
    _validate_refuses_partial(path, "/sweep")
    done = analysis_cli("summary", str(path))
    assert done.returncode == 0, done.stderr
    _warned(done, path)
    rows = [line for line in done.stdout.splitlines() if line.startswith(path.name)]
    assert rows and all(row.startswith(f"{path.name}-p") and "(incomplete)" in row.split()[1]
                        for row in rows), done.stdout
    for command, extra in (("bars", []), ("scaling", ["--axis", "tp"])):
        picture = tmp_path / f"{command}.png"
        done = analysis_cli(command, str(path), *extra, "-o", str(picture))
        assert done.returncode == 0, done.stderr
        _warned(done, path)
        assert _picture_title(picture).endswith("(incomplete)")


def test_partial_collectives_file_is_marked_everywhere(collectives_path, tmp_path):
    path = _partial(collectives_path, tmp_path, "/")
    _validate_refuses_partial(path, "/")
    # No command draws or tabulates a collectives file's results; each says it is partial
    # before it says why it has nothing to make of it.
    for argv in (["summary", str(path)], ["ridgeline", str(path), "-o", str(tmp_path / "r.png")],
                 ["export", str(path), "--format", "csv", "-o", str(tmp_path / "t.csv")]):
        done = analysis_cli(*argv)
        lines = _warned(done, path)
        assert done.returncode == 2 and len(lines) == 2, (argv, done.stderr)
    assert os.listdir(tmp_path) == [path.name]


# ---- writers ----

@pytest.fixture
def full_disk():
    """A 64 KiB tmpfs holding a previous output (`previous.txt`) and a filler that takes every
    byte left: any write there fails with ENOSPC. Skipped where it cannot be mounted (not
    root, no tmpfs)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    directory = tempfile.mkdtemp(prefix="ridgeline-full-")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", directory],
                          capture_output=True, text=True)
    if done.returncode != 0:
        os.rmdir(directory)
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        root = Path(directory)
        (root / "previous.txt").write_text("the previous output\n")
        with contextlib.suppress(OSError), open(root / "filler", "wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        yield root
    finally:
        subprocess.run(["umount", directory], check=False)
        os.rmdir(directory)


def _write_failed(done, target):
    """Exit code 1 and one line saying the target cannot be written, no traceback."""
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"ridgeline_analysis: cannot write '{target}': "), lines[0]


def test_full_disk_leaves_every_output_as_it_was(full_disk, run_path, sweep_path):
    previous = full_disk / "previous.txt"
    run, sweep = str(run_path), str(sweep_path)
    writes = [
        (["summary", run, "-o"], previous), (["trace", run, "-o"], previous),
        (["export", run, "--format", "csv", "-o"], previous),
        (["export", run, "--format", "json", "-o"], full_disk / "new.json"),
        (["bars", sweep, "-o"], full_disk / "bars.png"),
        (["scaling", sweep, "--axis", "tp", "-o"], full_disk / "scaling.svg"),
        (["schedule", run, "-o"], full_disk / "schedule.png"),
        (["plot", run, "-o"], full_disk / "plots"),
    ]
    for argv, target in writes:
        done = analysis_cli(*argv, str(target))
        # plot writes into a directory: the picture in it is what cannot be written.
        if argv[0] == "plot":
            assert done.returncode == 1 and "cannot write '" in done.stderr, done.stderr
            assert not target.exists() or os.listdir(target) == []
            continue
        _write_failed(done, target)
        assert sorted(os.listdir(full_disk)) == ["filler", "previous.txt"], (argv, target)
        assert previous.read_text() == "the previous output\n", argv


def test_unwritable_targets_fail_in_one_line(run_path, tmp_path):
    """A target whose directory does not exist, or that is a directory, is refused as a write
    (exit code 1); a target that is a device is written in place, never replaced."""
    missing = tmp_path / "no" / "such" / "t.json"
    _write_failed(analysis_cli("trace", str(run_path), "-o", str(missing)), missing)
    directory = tmp_path / "a-directory"
    directory.mkdir()
    _write_failed(analysis_cli("summary", str(run_path), "-o", str(directory)), directory)
    assert os.listdir(directory) == []
    done = analysis_cli("trace", str(run_path), "-o", os.devnull)
    assert done.returncode == 0, done.stderr
    assert not os.path.isfile(os.devnull) and os.path.exists(os.devnull)
    assert sorted(os.listdir(tmp_path)) == ["a-directory"]


def test_helper_tables_mark_partial_files_and_fail_writes_in_one_line(sweep_path, tmp_path,
                                                                       capsys):
    """The scripts' tables of a partial file are marked, with one warning line; a markdown
    file that cannot be written is one line, exit code 1, nothing left behind."""
    import allreduce_table
    import decode_roof_table
    from test_allreduce_table import _write_tables

    path = _partial(sweep_path, tmp_path, "/sweep")
    missing = tmp_path / "no" / "t.md"
    assert decode_roof_table.main([str(path), "--markdown", str(missing)]) == 1
    captured = capsys.readouterr()
    rows = captured.out.splitlines()[1:5]
    assert rows and all("(incomplete)" in row for row in rows), captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 2 and "incomplete" in lines[0] and str(path) in lines[0]
    assert lines[1] == (f"decode_roof_table: cannot write '{missing}': No such file or "
                        "directory"), lines

    h5 = tmp_path / "ar.h5"
    _write_tables(h5, {"nccl": [10.0, 12.0, 20.0], "push": [5.0, 9.0, 25.0]})
    with h5py.File(h5, "r+") as f:
        f.attrs["complete"] = np.int64(0)
    assert allreduce_table.main([str(h5), "--markdown", str(missing)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0].endswith("timing, us (incomplete)"), captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 2 and "incomplete" in lines[0] and str(h5) in lines[0]
    assert lines[1].startswith(f"allreduce_table: cannot write '{missing}': ")
    assert sorted(os.listdir(tmp_path)) == ["ar.h5", path.name]
