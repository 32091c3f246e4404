"""The checksum of the checked output (/summary output_checksum): the same seed and configuration
give the same bits, another seed other bits; `report` prints it, `compare` lists a difference,
`validate` checks its format. Real runs of the binary (conftest.py)."""
import re
import shutil
import subprocess

import h5py
import pytest

from conftest import REPO, ridgeline_binary, run_ridgeline

HEX16 = re.compile(r"[0-9a-f]{16}")


def _run(workdir, name, *extra):
    """The run of the `run_path` fixture (tiny, tp=2, 1 warm-up, 3 timed iterations), again."""
    run_ridgeline(workdir, "run", "--config", str(REPO / "models" / "tiny.toml"), "--tp", "2",
                  "--warmup", "1", "--iters", "3", *extra, "--out", name)
    return workdir / name


@pytest.fixture(scope="module")
def reruns(tmp_path_factory):
    """(the same run again, the same run with --seed 7) beside the fixture's default seed."""
    workdir = tmp_path_factory.mktemp("checksum")
    return _run(workdir, "same.h5"), _run(workdir, "seed7.h5", "--seed", "7")


def _checksum(path, group="summary"):
    with h5py.File(path, "r") as f:
        attrs = f[group].attrs
        assert attrs["output_checksum_algorithm"] == "fnv1a64"
        return attrs["output_checksum"]


def _bin(*args):
    return subprocess.run([str(ridgeline_binary()), *args], capture_output=True, text=True,
                          timeout=120)


def test_same_seed_same_checksum_other_seed_other(run_path, reruns):
    same, seed7 = reruns
    with h5py.File(run_path, "r") as a, h5py.File(seed7, "r") as c:
        assert a["config"].attrs["seed"] == 1234 and c["config"].attrs["seed"] == 7
    first = _checksum(run_path)
    assert HEX16.fullmatch(first)
    assert _checksum(same) == first
    assert _checksum(seed7) != first and HEX16.fullmatch(_checksum(seed7))


def test_report_prints_the_checksum(run_path):
    done = _bin("report", str(run_path))
    assert done.returncode == 0, done.stderr
    assert f"output_checksum: {_checksum(run_path)}\n" in done.stdout
    assert "output_checksum_algorithm: fnv1a64\n" in done.stdout


def test_compare_lists_a_differing_checksum(run_path, reruns):
    same, seed7 = reruns
    done = _bin("compare", str(run_path), str(seed7))
    assert done.returncode == 0, done.stderr
    assert (f"output checksums (fnv1a64): 1 differ: overlap=none (A {_checksum(run_path)}, "
            f"B {_checksum(seed7)})") in done.stdout
    done = _bin("compare", str(run_path), str(same))
    assert "output checksums (fnv1a64): identical (1 of 1)" in done.stdout


def test_sweep_points_have_checksums(sweep):
    for point in sweep.points:
        assert HEX16.fullmatch(point.summary.attrs["output_checksum"])


def test_validate_checks_the_checksum_format(run_path, tmp_path):
    path = tmp_path / "bad.h5"
    shutil.copy(run_path, path)
    with h5py.File(path, "r+") as f:
        f["summary"].attrs["output_checksum"] = "0x" + _checksum(run_path)[2:].upper()
        del f["summary"].attrs["output_checksum_algorithm"]
    done = _bin("validate", str(path))
    assert done.returncode == 1
    assert "/summary: output_checksum must be 16 lowercase hexadecimal digits" in done.stderr
    assert "/summary: missing attribute 'output_checksum_algorithm'" in done.stderr
