"""`python3 -m ridgeline_analysis latency`: the rates table of `ridgeline model --rates` read,
refused where it is missing or short of a column, and drawn one line per percentile."""
import json
from pathlib import Path

import pytest

from ridgeline_analysis import __main__ as cli
from ridgeline_analysis import plots


def _row(rate: float) -> dict:
    row = {"rate_per_s": rate, "goodput_per_s": rate * 0.9, "throughput_per_s": rate}
    for k, metric in enumerate(("ttft", "tpot")):
        for j, q in enumerate(("p50", "p95", "p99")):
            row[f"{metric}_{q}_ms"] = (k + 1) * (j + 1) * rate
    return row


def test_rows_drawn_in_rate_order(tmp_path: Path, monkeypatch):
    path = tmp_path / "rates.json"
    path.write_text(json.dumps({"rates": [_row(8), _row(2), _row(32)]}))
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, out: figures.append(fig) or out)
    assert cli.main(["latency", str(path), "-o", str(tmp_path / "l.png")]) == 0
    ttft, tpot, rates = figures[0].axes
    assert [line.get_label() for line in ttft.get_lines()] == ["p50", "p95", "p99"]
    assert [line.get_linestyle() for line in tpot.get_lines()] == ["-", "--", ":"]
    p95 = ttft.get_lines()[1]
    assert list(p95.get_xdata()) == [2, 8, 32]
    assert list(p95.get_ydata()) == [4, 16, 64]  # ttft p95 = 2 x rate
    assert [line.get_label() for line in rates.get_lines()] == [
        "throughput", "goodput (within the targets)"]


@pytest.mark.parametrize("document, message", [
    ({"latency": []}, "no `rates` table"),
    ({"rates": []}, "no `rates` table"),
    ({"rates": [{"rate_per_s": 1}]}, "rates row 0 lacks ttft_p50_ms"),
])
def test_refused(tmp_path: Path, capsys, document, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    assert cli.main(["latency", str(path)]) == 2
    assert message in capsys.readouterr().err
