"""Both file layouts, read by the Python reader: one file written by every rank through MPI-IO
(single) and node files joined by a master file's external links (per-node), each from a real
32-rank job. tests/e2e/file_layouts.sh passes its files in $RIDGELINE_LAYOUT_DIR; without it the
fixture runs the two jobs itself."""
import os
import shutil
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import REPO, RUN_TIMEOUT_S, ridgeline_binary
from ridgeline_analysis import load
from ridgeline_analysis.reader import SchemaError

RANKS = 32
NODE_FILES = 4  # --ranks-per-file 8


def _parallel_hdf5() -> bool:
    env = subprocess.run([str(ridgeline_binary()), "env"], capture_output=True, text=True,
                         timeout=RUN_TIMEOUT_S, check=True)
    return "hdf5_build = parallel" in env.stdout


def _run(workdir: Path, out: str, *layout: str) -> None:
    command = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(RANKS),
               str(ridgeline_binary()), "run", "--config", str(REPO / "models" / "tiny.toml"),
               "--dp", str(RANKS), "--hidden", "64", "--heads", "4", "--kv-heads", "2",
               "--ffn-hidden", "128", "--layers", "1", "--batch", "1", "--seq", "16",
               "--warmup", "1", "--iters", "2", "--roofs", "none", "--out", out, *layout]
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(command)} exited {done.returncode}\n{done.stderr}")


@pytest.fixture(scope="module")
def layout_dir(tmp_path_factory) -> Path:
    given = os.environ.get("RIDGELINE_LAYOUT_DIR")
    if given:
        return Path(given)
    workdir = tmp_path_factory.mktemp("layouts")
    if _parallel_hdf5():
        _run(workdir, "single.h5", "--file-layout", "single")
    _run(workdir, "per-node.h5", "--per-rank-files", "--ranks-per-file", "8")
    return workdir


@pytest.fixture(scope="module")
def per_node(layout_dir):
    return load(str(layout_dir / "per-node.h5"))


@pytest.fixture(scope="module")
def single(layout_dir):
    path = layout_dir / "single.h5"
    if not path.exists():
        assert not _parallel_hdf5(), "parallel HDF5, yet no single-layout file was written"
        pytest.skip("serial HDF5: this build writes the per-node layout only")
    return load(str(path))


def _check_run(run, layout):
    assert run.attrs["file_layout"] == layout
    assert run.world_size == RANKS
    assert sorted(run.timelines) == list(range(RANKS))
    assert run.attrs["write_seconds"] > 0
    for rank, timeline in run.timelines.items():
        assert len(timeline) > 0, rank
        assert (timeline["t_end_ns"] >= timeline["t_start_ns"]).all()
        assert set(np.unique(timeline["op_id"])) <= {op.id for op in run.ops}


def test_single_file_holds_every_rank(single, layout_dir):
    _check_run(single, "single")
    assert single.stack["hdf5_build"] == "parallel"
    assert not list(layout_dir.glob("single.node*.h5"))


def test_per_node_timelines_come_through_external_links(per_node, layout_dir):
    _check_run(per_node, "per-node")
    assert per_node.attrs["node_files"] == NODE_FILES
    with h5py.File(layout_dir / "per-node.h5", "r") as f:
        files = set()
        for rank in range(RANKS):
            link = f[f"ranks/{rank}"].get("timeline", getlink=True)
            assert isinstance(link, h5py.ExternalLink), rank
            assert link.path == f"/ranks/{rank}/timeline"
            files.add(link.filename)
    assert files == {f"per-node.node{k}.h5" for k in range(NODE_FILES)}


def test_both_layouts_hold_the_same_rows(single, per_node):
    # Two jobs of the same configuration: the same rows per rank, the same summary shape.
    assert [len(single.timelines[r]) for r in range(RANKS)] == \
           [len(per_node.timelines[r]) for r in range(RANKS)]
    assert single.summary.ops["name"].tolist() == per_node.summary.ops["name"].tolist()


def test_a_missing_node_file_is_named(layout_dir, tmp_path):
    for path in layout_dir.glob("per-node*.h5"):
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "per-node.node2.h5").unlink()
    with pytest.raises(SchemaError, match=r"per-node\.node2\.h5"):
        load(str(tmp_path / "per-node.h5"))
