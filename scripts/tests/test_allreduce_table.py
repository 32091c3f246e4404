"""scripts/allreduce_table.py: the custom all-reduces beside NCCL and PyTorch, by hand on
synthetic tables laid out as `ridgeline collectives` writes them, and its refusal of a real
host collectives file that has no custom all-reduce."""
import json

import h5py
import numpy as np

import allreduce_table
from conftest import run_ridgeline

SIZES = [8192, 65536, 1 << 20]


def _write_tables(path, p50_us, timing="graph_replay", ranks=2):
    """One compound table per implementation, with the columns and attributes the reader uses."""
    dtype = np.dtype([("size_bytes", "<i8"), ("time_p50_ns", "<f8")])
    with h5py.File(path, "w") as f:
        for impl, times in p50_us.items():
            rows = np.array([(s, t * 1e3) for s, t in zip(SIZES, times)], dtype=dtype)
            name = "/collectives/all_reduce" + ("" if impl == "nccl" else "_" + impl)
            d = f.create_dataset(name, data=rows)
            d.attrs["timing"] = timing
            d.attrs["group_size"] = np.int64(ranks)


def _write_torch(path, nccl, symm, timing="graph_replay", ranks=2):
    rows = [{"collective": "all_reduce", "size_bytes": s, "time_us": t}
            for s, t in zip(SIZES, nccl)]
    rows += [{"collective": "all_reduce_symm_oneshot", "size_bytes": s, "time_us": t}
             for s, t in zip(SIZES, symm)]
    path.write_text(json.dumps({"ranks": ranks, "timing": timing, "rows": rows}))


def test_rows_by_hand(tmp_path, capsys):
    h5 = tmp_path / "ar.h5"
    _write_tables(h5, {"nccl": [10.0, 12.0, 20.0], "oneshot": [7.0, 8.0, 30.0],
                       "push": [5.0, 9.0, 25.0], "push-ll": [5.5, 8.5, 40.0],
                       "twoshot": [9.0, 7.5, 22.0]})
    ref = tmp_path / "torch.json"
    _write_torch(ref, [40.0, 41.0, 45.0], [6.0, 7.0, 20.0])
    assert allreduce_table.main([str(h5), str(ref), "--markdown", str(tmp_path / "t.md")]) == 0
    table = allreduce_table.rows(allreduce_table.read_ridgeline(str(h5)),
                                 allreduce_table.read_torch(str(ref)), 0.6)
    assert [r["best"] for r in table] == ["push", "twoshot", "twoshot"]
    assert table[0]["best_over_nccl"] == 0.5 and table[0]["meets_target"]
    assert table[1]["best_over_nccl"] == 7.5 / 12.0 and not table[1]["meets_target"]
    assert table[2]["best_over_torch_symm"] == 22.0 / 20.0
    out = capsys.readouterr().out
    assert ("1 of 3 sizes with the fastest custom all-reduce at <= 0.6 x NCCL's p50; "
            "1 of 3 no slower than PyTorch's symmetric-memory one-shot") in out
    md = (tmp_path / "t.md").read_text()
    assert md.startswith("| bytes | NCCL | oneshot | push | push-ll | twoshot |")
    assert "| 8 KiB | 10.00 | 7.00 | 5.00 | 5.50 | 9.00 | push | 0.500 |" in md


def test_refuses_mixed_timings_and_rank_counts(tmp_path, capsys):
    h5 = tmp_path / "ar.h5"
    _write_tables(h5, {"nccl": [10.0] * 3, "oneshot": [7.0] * 3})  # the others absent: "-"
    eager = tmp_path / "eager.json"
    _write_torch(eager, [40.0] * 3, [6.0] * 3, timing="per_launch_mean")
    assert allreduce_table.main([str(h5), str(eager)]) == 2
    assert "timings differ" in capsys.readouterr().err
    # Launches stamped one by one are not timed as the reference times eager launches.
    stamped = tmp_path / "stamped.h5"
    _write_tables(stamped, {"nccl": [10.0] * 3, "push-ll": [7.0] * 3}, timing="per_iteration")
    assert allreduce_table.main([str(stamped), str(eager)]) == 2
    assert "timings differ: ridgeline per_iteration, PyTorch batch_mean" in capsys.readouterr().err
    # Batches on both sides (the reference's earlier name for them included) are compared.
    batched = tmp_path / "batched.h5"
    _write_tables(batched, {"nccl": [10.0] * 3, "push-ll": [5.0] * 3}, timing="batch_mean")
    assert allreduce_table.main([str(batched), str(eager)]) == 0
    assert "3 of 3 sizes with the fastest custom all-reduce" in capsys.readouterr().out
    four = tmp_path / "four.json"
    _write_torch(four, [40.0] * 3, [6.0] * 3, ranks=4)
    assert allreduce_table.main([str(h5), str(four)]) == 2
    assert "ranks differ" in capsys.readouterr().err


def test_refuses_a_file_without_a_custom_all_reduce(tmp_path, capsys):
    # A real host file: the communicator's own all-reduce only (the custom one needs GPUs).
    run_ridgeline(tmp_path, "collectives", "--collectives", "all_reduce", "--min-bytes", "8K",
                  "--max-bytes", "16K", "--warmup", "1", "--iters", "2", "--out", "c.h5")
    assert allreduce_table.main([str(tmp_path / "c.h5")]) == 2
    assert "needs /collectives/all_reduce and a custom all-reduce table" in capsys.readouterr().err
