"""Fixtures: one real run file, produced once per session by the C++ binary under mpirun."""
import os
import subprocess
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


@pytest.fixture(scope="session")
def run_path(tmp_path_factory) -> Path:
    """A real two-rank TP=2 run of models/tiny.toml: 1 warm-up and 3 timed iterations."""
    workdir = tmp_path_factory.mktemp("run")
    command = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
               str(ridgeline_binary()), "run", "--config", str(REPO / "models" / "tiny.toml"),
               "--tp", "2", "--warmup", "1", "--iters", "3", "--out", "tmp.h5"]
    try:
        done = subprocess.run(command, cwd=workdir, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(command)} did not finish within {RUN_TIMEOUT_S} s")
    if done.returncode != 0:
        pytest.fail(f"{' '.join(command)} exited {done.returncode}\n"
                    f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}")
    return workdir / "tmp.h5"


@pytest.fixture(scope="session")
def run(run_path):
    from ridgeline_analysis import load
    return load(str(run_path))
