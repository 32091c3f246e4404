"""The train phase's pipeline in the package: a real two-stage train file (conftest.py) is valid
for `ridgeline validate` and validate.py alike, and copies missing a stage's figures or a
backward op are refused by both with the same problems; the schedule picture draws forward,
input-gradient, weight-gradient and p2p ops in their colours with the microbatch numbers; the
summary prints the per-stage table the file stores."""
import shutil

import h5py
import numpy as np
import pytest
from matplotlib.colors import to_rgba

from conftest import analysis_cli, ridgeline_validate
from ridgeline_analysis import SchemaError, analysis, load, plots, validate
from ridgeline_analysis.reader import TIMELINE_DTYPE


def test_train_file_is_valid_in_both_validators(train_run_path):
    done = ridgeline_validate(train_run_path)
    assert done.returncode == 0, done.stderr
    assert validate.problems(str(train_run_path)) == []
    run = load(str(train_run_path))
    attrs = run.summary.attrs
    assert run.config["phase"] == "train" and run.config["pp"] == 2
    assert attrs["schedule"] == "1f1b" and attrs["microbatches"] == 4
    assert attrs["check_compares"] == "gradients" and attrs["check"] == "passed"
    # 1f1b: (p - 1) / (m + p - 1) with p = 2 stages and m = 4 microbatches.
    assert attrs["bubble_theory"] == pytest.approx(1 / 5)
    names = set(run.op_names().tolist())
    assert {"fc2_dgrad", "qkv_wgrad", "residual1_bwd", "pp_exchange", "pp_flush",
            "grad_zero"} <= names
    stages = analysis.pipeline_stages(attrs)
    assert stages["stage"].tolist() == [0, 1]
    assert ((stages["bubble"] >= 0) & (stages["bubble"] <= 1)).all()
    assert (stages["peak_activation_bytes"] > 0).all()


def _drop_stage_bubble(f):
    del f["summary"].attrs["stage1.bubble"]


def _drop_stage_peak(f):
    del f["summary"].attrs["stage0.peak_activation_bytes"]


def _bubble_above_one(f):
    f["summary"].attrs["stage0.bubble"] = 1.25


def _theory_negative(f):
    f["summary"].attrs["bubble_theory"] = -0.5


def _drop_simulated(f):
    del f["summary"].attrs["bubble_simulated"]


def _forward_time_zero(f):
    f["summary"].attrs["action_forward_ns"] = 0.0


def _compares(f):
    f["summary"].attrs["check_compares"] = "weights"


def _compares_outputs(f):
    f["summary"].attrs["check_compares"] = "outputs"


def _schedule(f):
    f["summary"].attrs["schedule"] = "interleaved:1"


def _wgrad_missing(f):
    table = f["ops"][()]
    table["name"][list(table["name"]).index(b"fc1_wgrad")] = b"fc1_other"
    f["ops"][...] = table


#: (damage, the problem both validators name).
DAMAGES = [
    (_drop_stage_bubble, "/summary: missing attribute 'stage1.bubble'"),
    (_drop_stage_peak, "/summary: missing attribute 'stage0.peak_activation_bytes'"),
    (_bubble_above_one, "/summary: stage0.bubble must be in [0, 1], found 1.25"),
    (_theory_negative, "/summary: bubble_theory must be in [0, 1], found -0.5"),
    (_drop_simulated, "/summary: missing attribute 'bubble_simulated'"),
    (_forward_time_zero, "/summary: action_forward_ns must be > 0, found 0"),
    (_compares, "/summary: check_compares is 'weights', expected gradients or outputs"),
    (_compares_outputs, "/summary: check_compares is 'outputs' but /config phase is train "
                        "(expected gradients)"),
    (_schedule, "/summary: schedule is 'interleaved:1', expected gpipe, 1f1b, interleaved:V "
                "(V >= 2) or zb-h1"),
    (_wgrad_missing, "/ops: missing op 'fc1_wgrad' (a train run records it)"),
]


@pytest.mark.parametrize("index", range(len(DAMAGES)),
                         ids=[d.__name__.strip("_") for d, _ in DAMAGES])
def test_damaged_train_file_is_refused_by_both(train_run_path, tmp_path, index):
    damage, problem = DAMAGES[index]
    path = tmp_path / f"{damage.__name__.strip('_')}.h5"
    shutil.copy(train_run_path, path)
    with h5py.File(path, "r+") as f:
        damage(f)
    done = ridgeline_validate(path)
    assert done.returncode == 1, done.stderr
    found = validate.problems(str(path))
    assert found == [line.split(": ", 1)[1] for line in done.stderr.splitlines()]
    assert found == [problem]
    with pytest.raises(SchemaError) as raised:
        load(str(path))
    assert problem in str(raised.value)


def _first_timed_iteration(run):
    rows = {r: analysis.timed_rows(t) for r, t in run.timelines.items()}
    first = min(int(t["iteration"].min()) for t in rows.values())
    return {r: t[t["iteration"] == first] for r, t in rows.items()}


def _steady(rows):
    """A rank's rows with every start and end on a steady clock, the k-th distinct instant of
    the rank at k microseconds: the same order and overlaps as measured, but widths that no
    stall of a loaded machine squeezed (one long wait would leave every action too narrow for
    its number)."""
    instants = np.unique(np.concatenate([rows["t_start_ns"], rows["t_end_ns"]]))
    out = rows.copy()
    for field in ("t_start_ns", "t_end_ns"):
        out[field] = np.searchsorted(instants, rows[field]) * 1000
    return out


def test_schedule_picture_draws_the_four_roles_and_the_microbatches(train_run_path):
    run = load(str(train_run_path))
    rows = {r: _steady(t) for r, t in _first_timed_iteration(run).items()}
    fig = plots.schedule_figure(rows, run.op_names(), run.op_kinds(), title="t")
    ax = fig.axes[0]
    drawn = {tuple(np.round(c, 3)) for coll in ax.collections for c in coll.get_facecolors()}
    for role in ("forward", "backward_input", "backward_weight", "p2p"):
        assert tuple(np.round(to_rgba(plots.ROLE_COLOURS[role]), 3)) in drawn, role
    # The roles' colours differ, and the legend names each role drawn, in order.
    assert len({plots.ROLE_COLOURS[r] for r in analysis.PIPELINE_ROLES}) == 5
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert [plots.ROLE_LABELS[r] for r in ("forward", "backward_input", "backward_weight",
                                           "p2p")] == legend[:4]
    # One outline per action: 4 forwards and 4 backwards on each of the two stages; a number
    # is written only inside its own action.
    actions = analysis.schedule_actions(rows, analysis.op_roles(run.op_names(), run.op_kinds()))
    assert sorted(actions["rank"].tolist()) == [0] * 8 + [1] * 8
    for rank in (0, 1):
        mine = actions[actions["rank"] == rank]
        assert sorted(mine[mine["phase"] == "forward"]["microbatch"].tolist()) == [0, 1, 2, 3]
        assert sorted(mine[mine["phase"] == "backward"]["microbatch"].tolist()) == [0, 1, 2, 3]
    assert len(ax.patches) == actions.size
    texts = [t for t in ax.texts if t.get_text().isdigit()]
    assert texts and {int(t.get_text()) for t in texts} <= {0, 1, 2, 3}
    for t in texts:
        x, y = t.get_position()
        assert any(p.get_x() <= x <= p.get_x() + p.get_width() and
                   p.get_y() <= y <= p.get_y() + p.get_height() for p in ax.patches)


def test_schedule_actions_by_hand():
    """Forward of microbatch 0, an exchange, a fused backward of 0 (B and W interleaved, a
    collective-lane all-reduce beside it), then W of microbatch 1 alone; and the same split
    into B and W (zb-h1)."""
    names = ["fc1_gemm", "pp_exchange", "fc1_dgrad", "fc1_wgrad", "allreduce_mlp_bwd",
             "grad_zero"]
    kinds = ["gemm", "p2p", "gemm", "gemm", "collective", "elementwise"]
    roles = analysis.op_roles(names, kinds)
    assert roles.tolist() == ["forward", "p2p", "backward_input", "backward_weight",
                              "backward_input", "stage"]
    # (op, microbatch, lane, start, end)
    spec = [(5, 0, 0, 0, 5), (0, 0, 0, 10, 20), (0, 0, 0, 20, 30), (1, 0, 2, 30, 40),
            (2, 0, 0, 40, 50), (4, 0, 1, 45, 70), (3, 0, 0, 50, 60), (2, 0, 0, 60, 70),
            (3, 1, 0, 70, 80)]
    rows = np.zeros(len(spec), dtype=TIMELINE_DTYPE)
    for i, (op, mb, lane, start, end) in enumerate(spec):
        rows[i]["op_id"], rows[i]["microbatch"], rows[i]["lane"] = op, mb, lane
        rows[i]["t_start_ns"], rows[i]["t_end_ns"], rows[i]["iteration"] = start, end, 2
    fused = analysis.schedule_actions({3: rows}, roles)
    assert [(a["microbatch"], a["phase"], a["t_start_ns"], a["t_end_ns"], a["ops"])
            for a in fused] == [
        (0, "forward", 10, 30, 2), (0, "backward", 40, 70, 3), (1, "backward", 70, 80, 1)]
    assert (fused["rank"] == 3).all() and (fused["iteration"] == 2).all()
    split = analysis.schedule_actions({3: rows}, roles, split_backward=True)
    assert [(a["microbatch"], a["phase"], a["t_start_ns"], a["t_end_ns"]) for a in split] == [
        (0, "forward", 10, 30), (0, "input", 40, 50), (0, "weight", 50, 60),
        (0, "input", 60, 70), (1, "weight", 70, 80)]


def test_schedule_command(train_run_path, tmp_path):
    out = tmp_path / "s.svg"
    done = analysis_cli("schedule", str(train_run_path), "--iteration", "2", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0 and b"<svg" in out.read_bytes()[:400]
    done = analysis_cli("schedule", str(train_run_path), "--iteration", "0", "-o", str(tmp_path / "w.png"))
    assert done.returncode == 2 and "no timed iteration 0" in done.stderr
    assert not (tmp_path / "w.png").exists()


def test_summary_prints_the_pipeline_table(train_run_path):
    run = load(str(train_run_path))
    done = analysis_cli("summary", str(train_run_path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("run") and "bubble" in line)
    assert lines[header].split() == ["run", "schedule", "mb", "recompute", "stage", "bubble",
                                     "theory", "sim", "p2p_exposed_ms", "dp_exposed_ms",
                                     "peak_act_MiB"]
    attrs = run.summary.attrs
    for p in (0, 1):
        cells = lines[header + 1 + p].split()
        k = f"stage{p}."
        assert cells == ["train.h5", "1f1b", "4", "none", str(p),
                         f"{attrs[k + 'bubble']:.3f}", f"{attrs['bubble_theory']:.3f}",
                         f"{attrs['bubble_simulated']:.3f}",
                         f"{attrs[k + 'p2p_exposed_ns'] / 1e6:.4f}",
                         f"{attrs[k + 'dp_exposed_ns'] / 1e6:.4f}",
                         f"{attrs[k + 'peak_activation_bytes'] / 2 ** 20:.2f}"]
    assert lines[header + 3].startswith("bubble: share of the iteration")


def test_summary_of_a_run_without_a_pipeline_has_no_table(run_path):
    done = analysis_cli("summary", str(run_path))
    assert done.returncode == 0, done.stderr
    assert "peak_act_MiB" not in done.stdout and "bubble" not in done.stdout
