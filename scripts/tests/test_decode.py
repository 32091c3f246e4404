"""--decode-steps in the file (per-token times against context, read and validated) and the
decode bandwidth table of scripts/decode_roof_table.py, on files the C++ side wrote."""
import dataclasses
import shutil

import h5py
import numpy as np
import pytest

import decode_roof_table
from conftest import REPO, ridgeline_validate, run_ridgeline
from ridgeline_analysis import load, validate

CONTEXT, STEPS = 30, 4


@pytest.fixture(scope="module")
def steps_path(tmp_path_factory):
    """A real two-rank TP=2 decode run of models/tiny.toml generating 4 tokens twice over."""
    workdir = tmp_path_factory.mktemp("decode_steps")
    run_ridgeline(workdir, "run", "--config", str(REPO / "models" / "tiny.toml"), "--tp", "2",
                  "--phase", "decode", "--context", str(CONTEXT), "--decode-steps", str(STEPS),
                  "--iters", str(2 * STEPS), "--warmup", "1", "--roofs", "none", "--out",
                  "steps.h5")
    return workdir / "steps.h5"


def test_decode_context_and_bins(steps_path):
    run = load(str(steps_path))
    s = run.summary
    keys = CONTEXT + 1 + np.arange(STEPS)
    assert s.decode_context.tolist() == np.concatenate([keys, keys]).tolist()
    assert s.attrs["check"] == "passed" and s.attrs["check_steps"] == STEPS
    bins = s.decode_bins
    assert bins["tokens"].sum() == 2 * STEPS
    assert bins["context_first"][0] == CONTEXT + 1 and bins["context_last"][-1] == CONTEXT + STEPS
    # Each bin's median is that of its iterations' step times.
    for b in bins:
        mine = s.step_time_ns[(s.decode_context >= b["context_first"]) &
                              (s.decode_context <= b["context_last"])]
        assert b["p50_ns"] == pytest.approx(np.percentile(mine, 50))


def test_validate_requires_decode_tables(steps_path, tmp_path):
    assert validate.problems(str(steps_path)) == []
    broken = tmp_path / "broken.h5"
    shutil.copy(steps_path, broken)
    with h5py.File(broken, "r+") as f:
        del f["summary/decode_bins"]
        ctx = f["summary/decode_context"][()]
        del f["summary/decode_context"]
        f["summary/decode_context"] = ctx[:-1]
    found = validate.problems(str(broken))
    assert any("decode_bins: missing" in p for p in found), found
    assert any("decode_context: 7 entries but 8 timed iterations" in p for p in found), found
    # `ridgeline validate` finds the same problems.
    done = ridgeline_validate(broken)
    assert done.returncode != 0
    text = done.stdout + done.stderr
    assert "decode_bins: missing" in text and "7 entries but 8 timed iterations" in text, text


def test_roof_table_of_a_sweep(sweep_path, capsys):
    rows = decode_roof_table.rows_of(str(sweep_path))
    with h5py.File(sweep_path, "r") as f:
        points = f["sweep/points"][()]
        memory = f["roofs/memory"][()]
    copies = memory[memory["kind"] == b"copy"]
    roof = float(copies[copies["bytes"].argmax()]["gbps"])
    assert len(rows) == len(points) == 4
    for row, p in zip(rows, points):
        assert row.status == "ok"
        assert row.attention == "fused" and row.gemm_algo == "heuristic"
        assert row.step_bytes == p["step_hbm_bytes"] > 0
        assert row.gbps == pytest.approx(p["step_hbm_bytes"] / p["step_p50_ns"])
        assert row.fraction == pytest.approx(row.gbps / roof)
    assert decode_roof_table.main([str(sweep_path), "--target", "0.85"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["model", "tp", "batch", "context"]
    assert len(out) == 1 + 4 + 1
    assert out[-1].endswith("measured decode points at >= 0.85 of the copy roof; 0 failed")
    # Rows of another attention implementation: a summary line per implementation, then the total.
    other = [dataclasses.replace(r, attention="cudnn", fraction=1.0) for r in rows]
    lines = decode_roof_table.summary_lines(rows + other, 0.85)
    assert lines[0].startswith("attention cudnn, gemm heuristic: 4 of 4 measured")
    assert lines[1].startswith("attention fused, gemm heuristic:")
    reaching = sum(r.fraction >= 0.85 for r in rows)
    assert lines[2].startswith(f"{reaching + 4} of 8 measured decode points")


def test_roof_table_refuses_a_run_file(run_path, capsys):
    assert decode_roof_table.main([str(run_path)]) == 2
    assert "not a sweep file" in capsys.readouterr().err
