"""Fixtures: one real run file and one real sweep file, each produced once per session by the
C++ binary under mpirun."""
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 300


def ridgeline_binary() -> Path:
    """$RIDGELINE_BIN, else <repo>/build/src/ridgeline. Never skips: these tests exist to check
    the real file, so a missing binary is a failure."""
    if os.environ.get("RIDGELINE_BIN"):
        binary = Path(os.environ["RIDGELINE_BIN"])
        if not binary.is_file():
            pytest.fail(f"RIDGELINE_BIN={binary} is not a file")
        return binary
    binary = REPO / "build" / "src" / "ridgeline"
    if not binary.is_file():
        pytest.fail(f"no ridgeline binary: set RIDGELINE_BIN to a built binary, or build "
                    f"{binary} (cmake -S {REPO} -B {REPO / 'build'} && cmake --build "
                    f"{REPO / 'build'} --target ridgeline)")
    return binary


def analysis_cli(*args: str) -> subprocess.CompletedProcess:
    """python3 -m ridgeline_analysis ARGS, from scripts/ (where the package lives)."""
    return subprocess.run([sys.executable, "-m", "ridgeline_analysis", *args],
                          cwd=REPO / "scripts", capture_output=True, text=True, timeout=120)


def ridgeline_validate(path) -> subprocess.CompletedProcess:
    """`ridgeline validate PATH` with the binary under test."""
    return subprocess.run([str(ridgeline_binary()), "validate", str(path)], capture_output=True,
                          text=True, timeout=120)


def run_ridgeline(workdir: Path, *args: str) -> None:
    """mpirun -np 2 <binary> ARGS in workdir; fails the test on a timeout or a non-zero exit."""
    command = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
               str(ridgeline_binary()), *args]
    try:
        done = subprocess.run(command, cwd=workdir, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(command)} did not finish within {RUN_TIMEOUT_S} s")
    if done.returncode != 0:
        pytest.fail(f"{' '.join(command)} exited {done.returncode}\n"
                    f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}")


@pytest.fixture(scope="session")
def run_path(tmp_path_factory) -> Path:
    """A real two-rank TP=2 run of models/tiny.toml: 1 warm-up and 3 timed iterations."""
    workdir = tmp_path_factory.mktemp("run")
    run_ridgeline(workdir, "run", "--config", str(REPO / "models" / "tiny.toml"), "--tp", "2",
                  "--warmup", "1", "--iters", "3", "--out", "tmp.h5")
    return workdir / "tmp.h5"


@pytest.fixture(scope="session")
def run(run_path):
    from ridgeline_analysis import load
    return load(str(run_path))


@pytest.fixture(scope="session")
def overlap_run_path(tmp_path_factory) -> Path:
    """A real two-rank TP=2 run of models/tiny.toml under two overlap strategies, chunked:2
    (/points/0) and split:2 (/points/1): 1 warm-up and 3 timed iterations each."""
    workdir = tmp_path_factory.mktemp("overlap")
    run_ridgeline(workdir, "run", "--config", str(REPO / "models" / "tiny.toml"), "--tp", "2",
                  "--overlap", "chunked:2,split:2", "--warmup", "1", "--iters", "3",
                  "--out", "overlap.h5")
    return workdir / "overlap.h5"


@pytest.fixture(scope="session")
def overlap_run(overlap_run_path):
    from ridgeline_analysis import load
    return load(str(overlap_run_path))


@pytest.fixture(scope="session")
def train_run_path(tmp_path_factory) -> Path:
    """A real two-rank train run of models/tiny.toml over two pipeline stages, 1f1b over 4
    microbatches: 1 warm-up and 3 timed iterations."""
    workdir = tmp_path_factory.mktemp("train")
    run_ridgeline(workdir, "run", "--config", str(REPO / "models" / "tiny.toml"), "--phase",
                  "train", "--pp", "2", "--batch", "4", "--microbatches", "4", "--schedule",
                  "1f1b", "--warmup", "1", "--iters", "3", "--out", "train.h5")
    return workdir / "train.h5"


@pytest.fixture(scope="session")
def sweep_path(tmp_path_factory) -> Path:
    """A real two-rank decode sweep of models/tiny.toml over tp = 1, 2 and batch = 1, 4."""
    workdir = tmp_path_factory.mktemp("sweep")
    run_ridgeline(workdir, "sweep", "--config", str(REPO / "models" / "tiny.toml"),
                  "--phase", "decode", "--tp", "1,2", "--batch", "1,4", "--warmup", "1",
                  "--iters", "3", "--out", "sweep.h5")
    return workdir / "sweep.h5"


@pytest.fixture(scope="session")
def sweep(sweep_path):
    from ridgeline_analysis import load
    return load(str(sweep_path))


@pytest.fixture(scope="session")
def mixed_sweep_path(tmp_path_factory) -> Path:
    """A real two-rank sweep of mixed steps of models/tiny.toml at tp = 2 along the prefill
    share 0, 0.5, 1 of the step's 24 tokens (2 chunks of 8, 8 decode tokens), 2 repeats."""
    workdir = tmp_path_factory.mktemp("mixed")
    run_ridgeline(workdir, "sweep", "--config", str(REPO / "models" / "tiny.toml"), "--phase",
                  "mixed", "--tp", "2", "--prefill-seqs", "2", "--chunk", "8", "--decode-batch",
                  "8", "--context", "20", "--prefill-share", "0,0.5,1", "--repeats", "2",
                  "--warmup", "1", "--iters", "2", "--out", "mixed.h5")
    return workdir / "mixed.h5"


@pytest.fixture(scope="session")
def batch_sweep_paths(tmp_path_factory):
    """Two real two-rank decode sweeps of models/tiny.toml over tp = 1, 2 that differ only in
    the batch (1 and 4): one file each, for the join (the host backend refuses --transport other
    than auto, so the files differ in batch rather than transport)."""
    workdir = tmp_path_factory.mktemp("join")
    paths = []
    for batch in ("1", "4"):
        name = f"decode_batch{batch}.h5"
        run_ridgeline(workdir, "sweep", "--config", str(REPO / "models" / "tiny.toml"),
                      "--phase", "decode", "--tp", "1,2", "--batch", batch, "--warmup", "1",
                      "--iters", "2", "--out", name)
        paths.append(workdir / name)
    return tuple(paths)


#: Where committed results pages' raw files are unpacked for the tests (removed at exit).
_RAW = tempfile.TemporaryDirectory(prefix="ridgeline-raw-")


def raw_result(page: str, member: str) -> Path:
    """A results page's raw HDF5 file, unpacked from the page's raw-h5.tar.xz (the pages keep
    their raw files in one archive each)."""
    target = Path(_RAW.name) / page / member
    if not target.exists():
        with tarfile.open(REPO / "results" / page / "raw-h5.tar.xz") as tar:
            tar.extract("./" + member, path=Path(_RAW.name) / page)
    return target
