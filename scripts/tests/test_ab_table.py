"""scripts/ab_table.py: the verdict of two builds' turns (within noise where one build's median
lies inside the other's spread, moved otherwise) and the checksum column, on hand-made --json
summaries laid out as `ridgeline run --json` writes them."""
import json

import ab_table


def _write(folder, case, who, turn, p50s_ms, checksum):
    summaries = {f"summary {s}": {"strategy": s, "step_p50_ns": ms * 1e6,
                                  "output_checksum": checksum}
                 for s, ms in p50s_ms.items()}
    (folder / f"{case}.{who}.t{turn}.json").write_text(json.dumps({"run": {}, **summaries}))


def test_verdicts_and_checksums(tmp_path, capsys, monkeypatch):
    # prefill: B's median (1.02) inside A's spread 0.98..1.05 -> within noise, one checksum.
    for t, (a, b) in enumerate([(1.00, 1.02), (0.98, 1.01), (1.05, 1.03)], start=1):
        _write(tmp_path, "prefill", "a", t, {"none": a}, "aaaa")
        _write(tmp_path, "prefill", "b", t, {"none": b}, "aaaa")
    # train: B 20 % slower in every turn, checksums differ between the builds.
    for t, (a, b) in enumerate([(2.00, 2.40), (2.02, 2.41), (1.99, 2.42)], start=1):
        _write(tmp_path, "train", "a", t, {"none": a}, "1111")
        _write(tmp_path, "train", "b", t, {"none": b}, "2222")
    monkeypatch.setattr("sys.argv", ["ab_table.py", str(tmp_path)])
    ab_table.main()
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in capsys.readouterr().out.splitlines()
            if line.startswith("| ") and not line.startswith("| workload")}
    assert rows["prefill"][5] == "within noise"
    assert rows["prefill"][6] == "identical"
    assert rows["prefill"][4] == f"{1.02 / 1.00:.4f}"
    assert rows["train"][5] == "moved"
    assert rows["train"][6] == "differ"
    assert rows["train"][4] == f"{2.41 / 2.00:.4f}"


def test_verdict_edges():
    assert ab_table.verdict([1, 2, 3], [2.5, 9, 10]) == "moved"  # medians 2 and 9
    assert ab_table.verdict([1, 2, 3], [3, 3, 3]) == "within noise"  # 3 is A's maximum
    assert ab_table.verdict([], [1]) == "-"
