"""The scaling curve with predicted points: `ridgeline model --validate` on a measured sweep,
then plot_scaling draws the predicted step dashed beside the measured one."""
from pathlib import Path

from ridgeline_analysis import plots, reader, sweeps

from conftest import raw_result, run_ridgeline

MEASURED = raw_result("h200x1-2026-11-23", "h5/sweep_gpt-h8192_prefill_nvlink.h5")


def test_predicted_points_are_dashed_beside_measured(tmp_path: Path, monkeypatch):
    run_ridgeline(tmp_path, "model", "--validate", str(MEASURED), "--out", "model.h5")
    measured = reader.load(str(MEASURED))
    predicted = reader.load(str(tmp_path / "model.h5"))
    assert all(str(c) == "predicted" for c in predicted.sweep.points["check"])
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or path)
    plots.plot_scaling(sweeps.scaling_series(measured.sweep, "seq"), str(tmp_path / "s.png"),
                       predicted=sweeps.scaling_series(predicted.sweep, "seq"))
    lines = [line for ax in figures[0].axes for line in ax.get_lines()]
    dashed = [line for line in lines if line.get_label() == "step predicted"]
    solid = [line for line in lines if line.get_label() == "step p50"]
    assert len(dashed) == 1 and dashed[0].get_linestyle() == "--"
    assert len(solid) == 1 and solid[0].get_linestyle() == "-"
    assert list(dashed[0].get_xdata()) == list(solid[0].get_xdata()) == [512, 2048, 8192, 16384]
