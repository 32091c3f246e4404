"""A trace run's /serving (docs/SCHEMA.md): a real run file given a small replayed trace by h5py
(three requests scheduled by hand as models/serving.cpp's scheduler would, in four steps), which
`ridgeline validate` and the package both accept, the package reads and exports; then each rule
of the checks broken once, both validators finding the same problems, the expected one among
them."""
import shutil

import h5py
import numpy as np
import pytest

from conftest import analysis_cli, ridgeline_validate
from ridgeline_analysis import load, schema, validate

#: The scheduler's limits and the trace: arrival (s), prompt and output tokens of each request.
TOKEN_BUDGET, CHUNK, MAX_BATCH, KV_CAPACITY = 64, 32, 4, 1024
ARRIVALS = [0.0, 0.001, 0.002]
PROMPTS = [40, 10, 20]
OUTPUTS = [3, 1, 2]
#: The schedule: each step's measured time (ns) and mix (prefill tokens, decode tokens, prefill
#: sequences, decode sequences, decode contexts). Step 0 prefills a chunk of request 0 (the only
#: one arrived); step 1 the rest of its prompt and the prompts of requests 1 and 2, giving each
#: its first token; step 2 decodes requests 0 (context 40) and 2 (20), finishing 2; step 3
#: decodes request 0 (41), finishing it.
STEPS = [(2e6, 32, 0, 1, 0, []), (3e6, 38, 0, 3, 0, []), (1e6, 0, 2, 0, 2, [40, 20]),
         (1e6, 0, 1, 0, 1, [41])]
FIRST_STEP = [1, 1, 1]  # the step giving each request its first token
LAST_STEP = [3, 1, 2]   # and its last


def _table(table_id, columns):
    """A structured array of the schema table's fields, in its order and dtypes."""
    fields = [f for f in schema.TABLES[table_id].fields if f.required is True or f.name in columns]
    rows = len(next(iter(columns.values())))
    out = np.zeros(rows, dtype=[(f.name, h5py.string_dtype() if f.dtype == "string"
                                 else np.dtype(f.dtype)) for f in fields])
    for name, values in columns.items():
        out[name] = values
    return out


# Each step's output against the TP=1 model's (relative L2), the largest 3e-7.
CHECK_ERRORS = [1e-7, 3e-7, 2e-7, 1e-7, 2e-7, 1e-7, 1e-7, 2e-7]


def serving_data():
    """(/serving attributes, /serving/steps, /serving/requests) of the schedule above."""
    start, end, now = [], [], 0.0
    for step_ns, *_ in STEPS:
        start.append(now)
        now = now + step_ns / 1e9
        end.append(now)
    contexts = [s[5] for s in STEPS]
    steps = _table("serving_steps", {
        "step": range(len(STEPS)), "start_s": start, "end_s": end,
        "step_ns": [s[0] for s in STEPS], "prepare_ns": [1500.0 + i for i in range(len(STEPS))],
        "prefill_tokens": [s[1] for s in STEPS], "decode_tokens": [s[2] for s in STEPS],
        "prefill_sequences": [s[3] for s in STEPS], "decode_sequences": [s[4] for s in STEPS],
        "context_min": [min(c, default=0) for c in contexts],
        "context_max": [max(c, default=0) for c in contexts],
        "context_mean": [sum(c) / len(c) if c else 0.0 for c in contexts],
        "check_rel_error": CHECK_ERRORS[:len(STEPS)]})
    first = [end[k] for k in FIRST_STEP]
    finish = [end[k] for k in LAST_STEP]
    tpot = [(b - a) / (n - 1) if n > 1 else np.nan for a, b, n in zip(first, finish, OUTPUTS)]
    requests = _table("serving_requests", {
        "request": range(len(ARRIVALS)), "arrival_s": ARRIVALS, "prompt_tokens": PROMPTS,
        "output_tokens": OUTPUTS, "first_token_s": first, "finish_s": finish,
        "ttft_s": [f - a for f, a in zip(first, ARRIVALS)],
        "e2e_s": [f - a for f, a in zip(finish, ARRIVALS)], "tpot_s": tpot})
    span = max(finish) - min(ARRIVALS)
    attrs = {"source": "--trace-gen rate=1000,requests=3", "requests": np.int64(3),
             "steps": np.int64(len(STEPS)), "token_budget": np.int64(TOKEN_BUDGET),
             "chunk": np.int64(CHUNK), "max_batch": np.int64(MAX_BATCH),
             "kv_capacity_tokens": np.int64(KV_CAPACITY), "duration_s": 0.0,
             "warmup_passes": np.int64(1), "slo_ttft_s": 0.0,
             "slo_tpot_s": 0.0, "good": np.int64(3), "span_s": span,
             "goodput_per_s": 3 / span, "throughput_per_s": 3 / span,
             "step_time": "the slowest rank's forward of the step", "check": "passed",
             "check_steps": np.int64(len(STEPS)),
             "check_max_rel_error": max(CHECK_ERRORS[:len(STEPS)]), "check_tolerance": 1e-4}
    values = {"ttft": requests["ttft_s"], "e2e": requests["e2e_s"],
              "tpot": requests["tpot_s"][requests["output_tokens"] > 1]}
    for metric, column in values.items():
        for p in (50, 95, 99):
            attrs[f"{metric}_p{p}_s"] = float(np.percentile(column, p))
    return attrs, steps, requests


def write_serving(f, attrs, steps, requests, trace_gen="rate=1000,requests=3"):
    """The trace run's /config options and /serving (None: that part left out)."""
    config = f["config"].attrs
    config["phase"] = "mixed"
    config["trace"] = ""
    config["trace_gen"] = trace_gen
    config["token_budget"] = np.int64(TOKEN_BUDGET)
    config["max_batch"] = np.int64(MAX_BATCH)
    config["kv_capacity"] = np.int64(KV_CAPACITY)
    for key in ("duration_s", "slo_ttft_ms", "slo_tpot_ms"):
        config[key] = 0.0
    if attrs is None:
        return
    group = f.create_group("serving")
    for key, value in attrs.items():
        group.attrs[key] = value
    for name, table in (("steps", steps), ("requests", requests)):
        if table is not None:
            group.create_dataset(name, data=table)


@pytest.fixture
def trace_file(run_path, tmp_path):
    """Writes a copy of the real run file given `data` (serving_data(), as changed)."""
    def make(name, data, **options):
        path = tmp_path / f"{name}.h5"
        shutil.copy(run_path, path)
        with h5py.File(path, "r+") as f:
            write_serving(f, *data, **options)
        return path
    return make


def _cpp_problems(path):
    done = ridgeline_validate(path)
    lines = done.stderr.splitlines()
    assert (done.returncode == 0) == (not lines), (done.returncode, done.stderr)
    return [line.split(": ", 1)[1] for line in lines]


def test_trace_run_is_valid_and_read(trace_file, tmp_path):
    path = trace_file("valid", serving_data())
    assert validate.problems(str(path)) == []
    assert _cpp_problems(path) == []
    attrs, steps, requests = serving_data()
    run = load(str(path))
    assert run.serving is not None
    assert run.serving.attrs["good"] == 3 and run.serving.attrs["source"] == attrs["source"]
    assert run.serving.steps.dtype.names == steps.dtype.names
    assert run.serving.steps.tolist() == steps.tolist()
    np.testing.assert_array_equal(run.serving.requests["tpot_s"], requests["tpot_s"])
    # /serving is the run's, not one of the tables outside the layout.
    assert not any(p.startswith("/serving") for p in run.tables)
    frame = run.serving_requests_dataframe()
    assert frame["request"].tolist() == [0, 1, 2] and frame["point"].isna().all()
    assert frame["file"].tolist() == [str(path)] * 3
    assert frame["config.trace_gen"].tolist() == ["rate=1000,requests=3"] * 3
    assert run.serving_steps_dataframe()["prefill_tokens"].sum() == sum(PROMPTS)
    out = tmp_path / "steps.csv"
    done = analysis_cli("export", str(path), "--format", "csv", "-o", str(out), "--table",
                        "serving_steps")
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) == 1 + len(STEPS)


def test_runs_without_a_trace_have_no_serving(run, trace_file):
    assert run.serving is None and len(run.serving_steps_dataframe()) == 0
    # Trace options given but empty: not a trace run, nothing required.
    path = trace_file("empty_trace", (None, None, None), trace_gen="")
    assert validate.problems(str(path)) == [] and _cpp_problems(path) == []


def _set(table, field, row, value):
    table[field][row] = value


def _shift_step_2(attrs, steps, requests):
    # Step 2 moved 0.5 ms earlier, its duration kept: it starts before step 1 ends.
    steps["start_s"][2] -= 0.0005
    steps["end_s"][2] -= 0.0005


def _decode_one_more(attrs, steps, requests):
    steps["decode_tokens"][3] = 2
    steps["decode_sequences"][3] = 2


def _more_prefill_sequences(attrs, steps, requests):
    attrs["max_batch"] = np.int64(64)
    steps["prefill_sequences"][0] = 40


#: (what is broken, the change to serving_data()'s (attrs, steps, requests), the problem).
DAMAGES = [
    ("steps_attribute", lambda a, s, r: a.update(steps=np.int64(5)),
     "/serving/steps: 4 rows but /serving steps is 5"),
    ("requests_attribute", lambda a, s, r: a.update(requests=np.int64(2)),
     "/serving/requests: 3 rows but /serving requests is 2"),
    ("step_number", lambda a, s, r: _set(s, "step", 2, 5),
     "/serving/steps: row 2: step 5, expected 2"),
    ("start_before_zero", lambda a, s, r: _set(s, "start_s", 0, -0.5),
     "/serving/steps: row 0: expected 0 <= start_s <= end_s, found -0.5, 0.002"),
    ("steps_overlap", _shift_step_2,
     "/serving/steps: row 1: end_s 0.005 is after the next step's start_s 0.0045"),
    ("step_ns_zero", lambda a, s, r: _set(s, "step_ns", 3, 0.0),
     "/serving/steps: row 3: step_ns must be > 0, found 0"),
    ("step_ns_not_the_clock", lambda a, s, r: _set(s, "step_ns", 0, 2.5e6),
     "/serving/steps: row 0: end_s - start_s is 0.002 s but step_ns is 2.5e+06"),
    ("prepare_negative", lambda a, s, r: _set(s, "prepare_ns", 1, -1.0),
     "/serving/steps: row 1: prepare_ns must be >= 0, found -1"),
    ("over_the_budget", lambda a, s, r: a.update(token_budget=np.int64(32)),
     "/serving/steps: row 1: expected 1 <= prefill_tokens + decode_tokens <= token_budget 32, "
     "found 38"),
    ("over_max_batch", lambda a, s, r: a.update(max_batch=np.int64(2)),
     "/serving/steps: row 1: prefill_sequences + decode_sequences 3 is more than max_batch 2"),
    ("decode_tokens_per_sequence", lambda a, s, r: _set(s, "decode_sequences", 2, 1),
     "/serving/steps: row 2: decode_tokens 2 but decode_sequences 1 (one token each)"),
    ("prefill_sequences_without_tokens", _more_prefill_sequences,
     "/serving/steps: row 0: prefill_tokens 32 fewer than prefill_sequences 40"),
    ("context_mean_out_of_range", lambda a, s, r: _set(s, "context_mean", 2, 50.0),
     "/serving/steps: row 2: expected context_min <= context_mean <= context_max, found 20, "
     "50, 40"),
    ("context_without_decode", lambda a, s, r: _set(s, "context_max", 0, 5),
     "/serving/steps: row 0: context_min, context_mean and context_max must be 0 without "
     "decode sequences, found 0, 0, 5"),
    ("request_number", lambda a, s, r: _set(r, "request", 1, 7),
     "/serving/requests: row 1: request 7, expected 1"),
    ("arrival_negative", lambda a, s, r: _set(r, "arrival_s", 0, -1.0),
     "/serving/requests: row 0: arrival_s must be >= 0, found -1"),
    ("arrivals_out_of_order", lambda a, s, r: _set(r, "arrival_s", 2, 0.0005),
     "/serving/requests: row 2: arrival_s 0.0005 is before the previous request's 0.001"),
    ("first_token_after_finish", lambda a, s, r: _set(r, "first_token_s", 2, 0.0065),
     "/serving/requests: row 2: expected arrival_s <= first_token_s <= finish_s, found 0.002, "
     "0.0065, 0.006"),
    ("ttft", lambda a, s, r: _set(r, "ttft_s", 0, 0.005001),
     "/serving/requests: row 0: ttft_s 0.005001, expected first_token_s - arrival_s = 0.005"),
    ("e2e", lambda a, s, r: _set(r, "e2e_s", 1, 0.01),
     "/serving/requests: row 1: e2e_s 0.01, expected finish_s - arrival_s = 0.004"),
    ("tpot_of_one_token", lambda a, s, r: _set(r, "tpot_s", 1, 0.0),
     "/serving/requests: row 1: tpot_s must be NaN for one output token, found 0"),
    ("tpot", lambda a, s, r: _set(r, "tpot_s", 0, np.nan),
     "/serving/requests: row 0: tpot_s nan, expected (finish_s - first_token_s) / "
     "(output_tokens - 1) = 0.001"),
    ("prompt_empty", lambda a, s, r: _set(r, "prompt_tokens", 1, 0),
     "/serving/requests: row 1: prompt_tokens must be >= 1, found 0"),
    ("output_empty", lambda a, s, r: _set(r, "output_tokens", 1, 0),
     "/serving/requests: row 1: output_tokens must be >= 1, found 0"),
    ("prefill_not_the_prompts", lambda a, s, r: _set(s, "prefill_tokens", 1, 39),
     "/serving/steps: the steps prefill 71 tokens but the requests' prompts hold 70"),
    ("decode_not_the_outputs", _decode_one_more,
     "/serving/steps: the steps decode 4 tokens but the requests' output tokens after their "
     "first are 3"),
    ("ttft_percentile", lambda a, s, r: a.update(ttft_p95_s=0.006),
     "/serving: ttft_p95_s is 0.006, but /serving/requests ttft_s gives 0.0049"),
    ("tpot_percentile", lambda a, s, r: a.update(tpot_p50_s=0.0),
     "/serving: tpot_p50_s is 0, but /serving/requests tpot_s gives 0.001"),
    ("good_beyond_requests", lambda a, s, r: a.update(good=np.int64(4)),
     "/serving: expected 0 <= good <= requests, found 4, 3"),
    ("span", lambda a, s, r: a.update(span_s=0.008),
     "/serving: span_s is 0.008, but /serving/requests spans 0.007 (first arrival to last "
     "finish)"),
    ("throughput", lambda a, s, r: a.update(throughput_per_s=1.0),
     "/serving: throughput_per_s is 1, expected requests / span_s = 428.571"),
    ("goodput", lambda a, s, r: a.update(goodput_per_s=1.0),
     "/serving: goodput_per_s is 1, expected good / span_s = 428.571"),
    ("check_status", lambda a, s, r: a.update(check="fine"),
     '/serving: check is "fine", expected passed, failed or skipped: <why>'),
    ("check_steps", lambda a, s, r: a.update(check_steps=np.int64(1)),
     "/serving: check_steps is 1, expected steps 4"),
    ("check_passed_beyond_tolerance", lambda a, s, r: a.update(check_max_rel_error=0.5),
     "/serving: check is passed but check_max_rel_error 0.5 against check_tolerance 0.0001"),
    ("check_step_missing", lambda a, s, r: _set(s, "check_rel_error", 1, np.nan),
     "/serving/steps: check_rel_error is NaN in 1 step(s) but /serving check compared every "
     "step"),
    ("check_largest", lambda a, s, r: _set(s, "check_rel_error", 2, 4e-7),
     "/serving/steps: the largest check_rel_error is 4e-07 but /serving check_max_rel_error is "
     "3e-07"),
    ("check_infinite", lambda a, s, r: _set(s, "check_rel_error", 2, np.inf),
     "/serving/steps: the largest check_rel_error is inf but /serving check_max_rel_error is "
     "3e-07"),
    ("check_skipped_with_errors",
     lambda a, s, r: a.update(check="skipped: --check off", check_steps=np.int64(0)),
     "/serving/steps: check_rel_error holds 4 compared step(s) but /serving check is skipped"),
    ("attribute_missing", lambda a, s, r: a.pop("good"), "/serving: missing attribute 'good'"),
    ("attribute_type", lambda a, s, r: a.update(steps="4"),
     "/serving: steps must be an integer, found the string '4'"),
]


@pytest.mark.parametrize("index", range(len(DAMAGES)), ids=[d[0] for d in DAMAGES])
def test_broken_serving_is_refused(trace_file, index):
    name, damage, expected = DAMAGES[index]
    attrs, steps, requests = serving_data()
    damage(attrs, steps, requests)
    path = trace_file(name, (attrs, steps, requests))
    found = validate.problems(str(path))
    assert expected in found, found
    assert _cpp_problems(path) == found


def test_missing_serving_objects_are_refused(trace_file):
    attrs, steps, requests = serving_data()
    path = trace_file("no_group", (None, None, None))
    assert validate.problems(str(path)) == ["/serving: missing group (a trace run)"]
    assert _cpp_problems(path) == ["/serving: missing group (a trace run)"]
    path = trace_file("no_steps", (attrs, None, requests))
    assert validate.problems(str(path)) == ["/serving/steps: missing dataset"]
    assert _cpp_problems(path) == ["/serving/steps: missing dataset"]
    field = [n for n in requests.dtype.names if n != "tpot_s"]
    path = trace_file("no_tpot", (attrs, steps, requests[field]))
    assert validate.problems(str(path)) == ["/serving/requests: missing field 'tpot_s'"]
    assert _cpp_problems(path) == ["/serving/requests: missing field 'tpot_s'"]
    path = trace_file("no_rows", (attrs, steps[:0], requests))
    expected = ["/serving/steps: 0 rows but /serving steps is 4", "/serving/steps: empty",
                "/serving/steps: the steps prefill 0 tokens but the requests' prompts hold 70",
                "/serving/steps: the steps decode 0 tokens but the requests' output tokens "
                "after their first are 3"]
    assert validate.problems(str(path)) == expected
    assert _cpp_problems(path) == expected


def test_row_problems_are_capped(trace_file):
    attrs, steps, requests = serving_data()
    # Three problems in each of the four rows: ten listed, two counted.
    steps["prepare_ns"] = -1.0
    steps["step"] = 9
    steps["decode_sequences"] = steps["decode_tokens"] + 1
    path = trace_file("many_rows", (attrs, steps, requests))
    found = validate.problems(str(path))
    rows = [p for p in found if p.startswith("/serving/steps: row ")]
    assert len(rows) == 10 and found[-1] == "/serving/steps: 2 more row problems", found
    assert _cpp_problems(path) == found


def test_latency_draws_measured_trace_runs(trace_file, run_path, tmp_path, monkeypatch, capsys):
    """`latency --measured`: each trace run's /serving percentiles as markers at its
    --trace-gen rate, beside the predicted lines; a file that replayed no trace refused."""
    import json

    from ridgeline_analysis import __main__ as cli
    from ridgeline_analysis import plots
    path = trace_file("measured", serving_data())
    rates = tmp_path / "rates.json"
    row = {"rate_per_s": 500.0, "goodput_per_s": 1.0, "throughput_per_s": 1.0}
    row.update({f"{m}_{q}_ms": 1.0 for m in ("ttft", "tpot") for q in ("p50", "p95", "p99")})
    rates.write_text(json.dumps({"rates": [row, dict(row, rate_per_s=2000.0)]}))
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, out: figures.append(fig) or out)
    assert cli.main(["latency", str(rates), "--measured", str(path),
                     "-o", str(tmp_path / "l.png")]) == 0
    ttft, tpot, _ = figures[0].axes
    attrs = serving_data()[0]
    marks = {line.get_label(): line for line in tpot.get_lines()}
    assert list(marks["p95 measured"].get_xdata()) == [1000.0]  # the --trace-gen rate
    assert list(marks["p95 measured"].get_ydata()) == pytest.approx([1e3 * attrs["tpot_p95_s"]])
    assert [line.get_label() for line in ttft.get_lines()][3:] == [
        "p50 measured", "p95 measured", "p99 measured"]
    assert cli.main(["latency", str(rates), "--measured", str(run_path)]) == 2
    assert "no /serving: not a trace run" in capsys.readouterr().err
