"""The GEMM + collective pair times of a TP layer (analysis.pair_times_ns) and the comparison
with PyTorch's fused async-TP ops (scripts/async_tp_table.py): by hand on synthetic timelines,
and on a real two-rank sequence-parallel run under three overlap strategies."""
import json

import numpy as np
import pytest

import async_tp_table
from conftest import REPO, run_ridgeline
from ridgeline_analysis import analysis, load
from ridgeline_analysis.reader import TIMELINE_DTYPE, Op, Run

ITERS, LAYERS = 3, 2
STRATEGIES = ("none", "chunked:2", "ce-ring")


def _timeline(rows):
    """Rows (op_id, layer, iteration, lane, start, end, warmup) as the file's dtype."""
    out = np.zeros(len(rows), dtype=TIMELINE_DTYPE)
    for i, (op_id, layer, iteration, lane, start, end, warmup) in enumerate(rows):
        out[i] = (op_id, layer, 0, iteration, lane, warmup, start, end, 0, 0, 0)
    return out


def test_pair_times_by_hand():
    names = ["qkv_gemm", "allgather_attn", "proj_gemm", "reducescatter_attn", "fc1_gemm", "norm1"]
    ops = [Op(i, n, "collective" if n.startswith(("all", "reduce")) else "gemm")
           for i, n in enumerate(names)]
    timelines = {
        0: _timeline([
            # layer 0: the all-gather, then the GEMM in two chunks: span 30
            (1, 0, 0, 1, 0, 10, 0), (0, 0, 0, 0, 5, 20, 0), (0, 0, 0, 0, 20, 30, 0),
            (5, 0, 0, 0, 30, 40, 0),  # not in any pair
            (2, 0, 0, 0, 40, 50, 0), (3, 0, 0, 1, 50, 65, 0),  # proj + reduce-scatter: 25
            (4, 0, 0, 0, 70, 80, 0),  # fc1 without its all-gather op in the file: no pair
            (1, 1, 0, 1, 100, 110, 0), (0, 1, 0, 0, 110, 115, 0),  # layer 1: 15
            (0, 0, 1, 0, 200, 210, 0),  # iteration 1: the GEMM alone, no collective row
            (1, 0, 5, 1, 0, 1000, 1), (0, 0, 5, 0, 0, 1000, 1),  # warm-up: never counted
        ]),
        1: _timeline([
            (1, 0, 0, 1, 2, 10, 0), (0, 0, 0, 0, 10, 40, 0),  # 38: the slower rank counts
            (2, 0, 0, 0, 40, 50, 0), (3, 0, 0, 1, 45, 60, 0),  # 20 < rank 0's 25
        ]),
    }
    run = Run(path="synthetic", attrs={}, stack={}, env={}, config={}, topology={}, ops=ops,
              timelines=timelines, summary=None)
    got = analysis.pair_times_ns(run)
    assert sorted(got) == ["proj", "qkv"]
    assert got["qkv"].tolist() == [38, 15]
    assert got["proj"].tolist() == [25]


def _point(strategy, next_end):
    """A one-rank point: proj (10-20) and its reduce-scatter (20-30), then the norm after them
    from 30 to next_end, two iterations."""
    names = ["proj_gemm", "reducescatter_attn", "residual1_norm2"]
    ops = [Op(i, n, "gemm" if i == 0 else "collective" if i == 1 else "norm")
           for i, n in enumerate(names)]
    rows = [(0, 0, it, 0, 10, 20, 0) for it in (0, 1)] + \
        [(1, 0, it, 1, 20, 30, 0) for it in (0, 1)] + \
        [(2, 0, it, 0, 30, next_end, 0) for it in (0, 1)]
    return Run(path="synthetic", attrs={}, stack={}, env={}, config={"strategy": strategy},
               topology={}, ops=ops, timelines={0: _timeline(rows)}, summary=None)


def test_sum_left_to_the_next_op_is_charged_to_the_pair():
    # none's norm takes 10 ns; ce-ring's 25 (the peer's partial added there): its proj pair,
    # 20 ns of GEMM and exchange, is charged 15 more; a strategy whose norm is faster than
    # none's is charged nothing.
    run = Run(path="synthetic", attrs={}, stack={}, env={}, config={}, topology={}, ops=[],
              timelines={}, summary=None,
              points=[_point("none", 40), _point("ce-ring", 55), _point("chunked:2", 38)])
    ref = {"pairs": [{"pair": "proj", "op": "matmul_reduce_scatter", "fused_ms": 30e-6,
                      "unfused_ms": 40e-6}]}
    (row,) = async_tp_table.table(run, ref)
    assert row["charged"] == pytest.approx({"none": 0.0, "ce-ring": 15e-6, "chunked:2": 0.0})
    assert row["strategies"] == pytest.approx({"none": 20e-6, "ce-ring": 35e-6,
                                               "chunked:2": 20e-6})
    assert "proj ce-ring +0.001" in async_tp_table.charges([dict(row, charged={"ce-ring": 0.001})])
    # Without none in the run there is nothing to charge against.
    alone = Run(path="synthetic", attrs={}, stack={}, env={}, config={}, topology={}, ops=[],
                timelines={}, summary=None, points=[_point("ce-ring", 55)])
    assert async_tp_table.deferred_ms(alone.points) == {}


@pytest.fixture(scope="module")
def sp_run_path(tmp_path_factory):
    """A real two-rank TP=2 sequence-parallel run of models/tiny.toml under three strategies."""
    workdir = tmp_path_factory.mktemp("async_tp")
    run_ridgeline(workdir, "run", "--config", str(REPO / "models" / "tiny.toml"), "--tp", "2",
                  "--sequence-parallel", "--overlap", ",".join(STRATEGIES), "--warmup", "1",
                  "--iters", str(ITERS), "--roofs", "none", "--out", "sp.h5")
    return workdir / "sp.h5"


def test_pair_times_of_a_real_run(sp_run_path):
    run = load(str(sp_run_path))
    assert [async_tp_table.strategy_name(p) for p in run.points] == list(STRATEGIES)
    ids = {op.name: op.id for op in run.ops}
    for point in run.points:
        times = analysis.pair_times_ns(point)
        assert sorted(times) == ["fc1", "fc2", "proj", "qkv"]
        for pair, gemm, _ in analysis.TP_PAIRS:
            assert times[pair].size == ITERS * LAYERS
            # A pair lasts at least as long as the longest GEMM row in it on any rank.
            longest = max(
                float(np.max(t["t_end_ns"][(t["op_id"] == ids[gemm]) & (t["warmup"] == 0)] -
                             t["t_start_ns"][(t["op_id"] == ids[gemm]) & (t["warmup"] == 0)]))
                for t in point.timelines.values())
            assert times[pair].max() >= longest > 0


def _reference(tmp_path, fused_ms, **override):
    """A JSON in torch_async_tp.py's layout for tiny.toml's layer at TP2."""
    args = {"hidden": 256, "heads": 8, "seq": 64, "batch": 2, **override}
    pairs = [{"pair": p, "op": "all_gather_matmul" if p in ("qkv", "fc1") else
              "matmul_reduce_scatter", "fused_ms": fused_ms, "unfused_ms": 2 * fused_ms}
             for p in ("qkv", "proj", "fc1", "fc2")]
    path = tmp_path / f"ref_{fused_ms}_{len(override)}.json"
    path.write_text(json.dumps({"world_size": 2, "args": args, "pairs": pairs}))
    return path


def test_table_against_a_reference(sp_run_path, tmp_path, capsys):
    md = tmp_path / "pairs.md"
    # A reference far slower than any host pair, then one far faster.
    assert async_tp_table.main([str(sp_run_path), str(_reference(tmp_path, 1e6)),
                                "--markdown", str(md)]) == 0
    out = capsys.readouterr().out
    assert "4 of 4 pairs faster than PyTorch's fused op" in out
    for strategy in STRATEGIES:
        assert f"{strategy} ms" in out
    assert md.read_text().startswith("| pair | PyTorch op | fused ms |")
    assert async_tp_table.main([str(sp_run_path), str(_reference(tmp_path, 1e-9))]) == 0
    assert "0 of 4 pairs faster" in capsys.readouterr().out


def test_table_refuses_another_layer(sp_run_path, run_path, tmp_path, capsys):
    assert async_tp_table.main([str(sp_run_path), str(_reference(tmp_path, 1.0, seq=128))]) == 2
    assert "seq differs: 64 in the run, 128 in the reference" in capsys.readouterr().err
    # The session's plain TP=2 run has no sequence parallelism, hence no fused-op pairs.
    assert async_tp_table.main([str(run_path), str(_reference(tmp_path, 1.0))]) == 2
    assert "no sequence parallelism" in capsys.readouterr().err
