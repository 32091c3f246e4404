"""A sweep of mixed steps along their prefill share: the share's text as the C++ side writes it,
the real file's axis, scaling series and crossovers (the Python rule against the C++ one on the
same rows), and the picture of the step by ceiling along the share."""
import math

import numpy as np

from conftest import analysis_cli
from ridgeline_analysis import load, plots, sweeps


def test_share_text_is_the_cpp_text():
    cases = {0: "0", 1: "1", 0.25: "0.25", 1 / 3: "0.333333", 0.4999996: "0.5",
             0.0000004: "0", 0.75: "0.75"}
    for value, text in cases.items():
        assert sweeps.share_text(value) == text, value
        assert sweeps.axis_text("prefill_share", np.float64(value)) == text, value
    assert sweeps.share_text(math.nan) == ""


def test_the_share_sorts_numerically_with_no_share_first():
    values = [1.0, math.nan, 0.25, 0.0]
    ordered = sorted(values, key=lambda v: sweeps.axis_order_key("prefill_share", v))
    assert math.isnan(ordered[0]) and ordered[1:] == [0.0, 0.25, 1.0]
    ordered = sorted(values, key=lambda v: sweeps.axis_sort_key("prefill_share", v))
    assert math.isnan(ordered[0]) and ordered[1:] == [0.0, 0.25, 1.0]


def test_the_real_mixed_sweep_along_the_share(mixed_sweep_path):
    run = load(str(mixed_sweep_path))
    sweep = run.sweep
    assert sweep.axes == ["prefill_share"]
    points = sweep.points
    assert points["prefill_share"].tolist() == [0.0, 0.5, 1.0]
    assert points["label"].tolist() == ["prefill_share=0", "prefill_share=0.5",
                                        "prefill_share=1"]
    assert set(points["status"].tolist()) == {"ok"}
    assert all(str(c).startswith("passed") for c in points["check"])
    # Each point's step: round(share x 24) prefill tokens, the rest decode tokens.
    for k, prefill in enumerate((0, 12, 24)):
        attrs = run.points[k].summary.attrs
        assert (attrs["mix_prefill_tokens"], attrs["mix_decode_tokens"]) == (prefill, 24 - prefill)
    series = sweeps.scaling_series(sweep, "prefill_share")
    assert series.numeric and series.values == [0.0, 0.5, 1.0]
    assert [g.name for g in series.groups] == [""]
    assert series.groups[0].rows["prefill_share"].tolist() == [0.0, 0.5, 1.0]
    # The Python rule finds the crossovers the C++ side wrote, on the same rows.
    mine = sweeps.find_crossovers(points, sweep.axes)
    fields = ("axis", "fixed", "kind", "before_value", "at_value", "status")
    assert [tuple(str(c[f]) for f in fields) for c in mine] == \
        [tuple(str(c[f]) for f in fields) for c in sweep.crossovers]


def test_the_share_picture(mixed_sweep_path, tmp_path):
    run = load(str(mixed_sweep_path))
    series = sweeps.scaling_series(run.sweep, "prefill_share")
    path = plots.plot_scaling(series, str(tmp_path / "share.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    out = tmp_path / "cli.svg"
    done = analysis_cli("scaling", str(mixed_sweep_path), "--axis", "prefill_share", "-o",
                        str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "<svg" in text and "prefill share" in text
