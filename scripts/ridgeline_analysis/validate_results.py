"""The checks of the results a run file holds, as run_file_validate_results.cpp makes them, for
validate.py: summaries with their decode, pipeline and serving figures, run repeats, collectives
tables and roofs. The tables and attributes come from the schema; the arithmetic is code.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence

import h5py
import numpy as np

from . import schema
from .validate_read import (MAX_ROW_PROBLEMS, AttrKinds, Problem, _check_kinds, _exists, _group,
                            _is_int, _number, _number_attr, _require, _require_attrs, _section,
                            _table, column, read_attrs, read_table, read_vector)

T = schema.TABLES
#: The /summary output checksum (added within version 1): its algorithm and format.
CHECKSUM_ALGORITHM = schema.ENUMS["checksum_algorithm"][0]
CHECKSUM_FORMAT = re.compile(r"[0-9a-f]{16}")
#: Collectives files: /collectives/<name> and <name>_samples_ns, /roofs/interconnect.
SAMPLES_SUFFIX = T["collective_samples"].path.rsplit("<name>", 1)[1]
ROOF_PATH = T["roofs_interconnect"].path
SUMMARY_KINDS: AttrKinds = schema.typed_attributes("summary")
#: /summary/ops figures that must be finite and >= 0 (validate_summary), in its order: the first
#: of an op's that is not is its problem.
OP_FIGURES = schema.field_names("summary_ops", "p50_ns", "mean_ns", "per_step_p50_ns", "share",
                                "flops", "hbm_bytes", "comm_bytes", "bound_ns", "efficiency")
#: Scheduled pipelines (/config phase train, or a schedule): the schedule names, the summary's
#: figures of every stage p (stage<p><field>), the measured action times, and the ops a train
#: run records (models/layer_plan.hpp), besides those its configuration adds (tp, rotary, dp,
#: sgd_lr).
SCHEDULE_NAME = re.compile("|".join(re.escape(n).replace(re.escape("<V>"), "[1-9][0-9]{0,8}")
                                    for n in schema.ENUMS["schedule"]))
STAGE_FIELDS = tuple(a.name.split("<p>", 1)[1] for a in schema.ATTRIBUTES["summary"][1]
                     if "<p>" in a.name)
ACTION_ATTRS = schema.attr_names("summary", "action_forward_ns", "action_backward_ns",
                                 "action_backward_input_ns", "action_backward_weight_ns")
SCHEDULED_OPS = ("pp_exchange", "pp_flush")
#: Trace runs: /serving's attribute types, and the percentiles of its latency attributes
#: (<metric>_p<p>_s).
SERVING_KINDS: AttrKinds = schema.typed_attributes("serving")
SERVING_PERCENTILES = (50, 95, 99)
TRAIN_OPS = ("fc2_dgrad", "fc2_wgrad", "activation_bwd", "fc1_dgrad", "fc1_wgrad", "norm2_bwd",
             "residual2_bwd", "proj_dgrad", "proj_wgrad", "attention_bwd", "qkv_dgrad",
             "qkv_wgrad", "norm1_bwd", "residual1_bwd", "grad_zero")


def checksum_problems(attrs: Dict[str, Any], where: str) -> List[str]:
    """The output checksum's format: 16 lowercase hex digits and the algorithm's name (both
    absent in files written before it)."""
    out = []
    has_sum, has_algorithm = "output_checksum" in attrs, "output_checksum_algorithm" in attrs
    if not has_sum and not has_algorithm:
        return out
    if not has_sum:
        out.append(f"{where}: missing attribute 'output_checksum' (output_checksum_algorithm is "
                   "given)")
    else:
        value = attrs["output_checksum"]
        if not (isinstance(value, str) and CHECKSUM_FORMAT.fullmatch(value)):
            out.append(f"{where}: output_checksum must be 16 lowercase hexadecimal digits, "
                       f"found '{value}'")
    if not has_algorithm:
        out.append(f"{where}: missing attribute 'output_checksum_algorithm'")
    elif attrs["output_checksum_algorithm"] != CHECKSUM_ALGORITHM:
        out.append(f"{where}: output_checksum_algorithm '{attrs['output_checksum_algorithm']}' "
                   f"is not {CHECKSUM_ALGORITHM}")
    return out


def _op_figures(table: np.ndarray, path: str, found: List[str]) -> None:
    """Every op's OP_FIGURES (those the table has) are finite and >= 0: the first of an op's
    that is not is one problem, naming the op."""
    names = column(table, "name", "string", path)
    figures = [name for name in OP_FIGURES if name in table.dtype.names]
    values = {name: table[name].astype(np.float64) for name in figures}
    for i in range(table.size):
        for name in figures:
            value = float(values[name][i])
            if not (np.isfinite(value) and value >= 0):
                found.append(f"{path}: op {names[i]}: {name} is {_number(value)}, expected a "
                             "finite value >= 0")
                break


def _summary(f: h5py.File, base: str, found: List[str]) -> None:
    """`base`/summary ("" for /summary, or a point's group)."""
    group = f"{base}/summary"

    def steps() -> None:
        path = base + schema.DATASETS["step_time"]["path"]
        if not _require(f, path, "dataset", found):
            return
        values = read_vector(f, path, "float")
        if values.size == 0:
            found.append(f"{path}: empty")
        bad = np.flatnonzero(~(values > 0))
        if bad.size:
            i = int(bad[0])
            found.append(f"{path}: value {i} is {_number(float(values[i]))}, expected > 0")

    def warmup() -> None:
        path = base + schema.DATASETS["warmup_step_time"]["path"]
        if not _require(f, path, "dataset", found):
            return
        values = read_vector(f, path, "float")
        bad = np.flatnonzero(~(values > 0))
        if bad.size:
            i = int(bad[0])
            found.append(f"{path}: value {i} is {_number(float(values[i]))}, expected > 0")

    def attrs() -> None:
        values = read_attrs(_group(f, group), group)
        _require_attrs(values, group, schema.required_attributes("summary"), found)
        _check_kinds(values, group, SUMMARY_KINDS, found)
        found.extend(checksum_problems(values, group))
        attention = values.get("attention")
        if attention is not None and attention not in schema.ENUMS["attention"]:
            found.append(f"{group}: attention is '{attention}', expected "
                         f"{schema.one_of(schema.ENUMS['attention'])}")
        if not all(k in values for k in ("p50_ns", "p95_ns", "p99_ns")):
            return
        p50, p95, p99 = (_number_attr(values, k, group) for k in ("p50_ns", "p95_ns", "p99_ns"))
        if not (p50 <= p95 <= p99):
            found.append(f"{group}: expected p50_ns <= p95_ns <= p99_ns, found {_number(p50)}, "
                         f"{_number(p95)}, {_number(p99)}")

    def ops() -> None:
        path = base + T["summary_ops"].path
        table = _table(f, path, T["summary_ops"], (), found)
        if table is not None:
            _op_figures(table, path, found)

    def decode() -> None:
        # --decode-steps: the keys of every timed iteration and the per-token bins.
        steps = 0
        if _exists(f, f"{base}/config"):
            value = read_attrs(_group(f, f"{base}/config"), f"{base}/config").get("decode_steps")
            steps = value if isinstance(value, int) else 0
        ctx_path = base + schema.DATASETS["decode_context"]["path"]
        if steps <= 0 and not _exists(f, ctx_path):
            return
        if not _require(f, ctx_path, "dataset", found):
            return
        ctx = read_vector(f, ctx_path, "int")
        # One entry per timed iteration (a missing step_time_ns was reported by itself).
        steps_path = base + schema.DATASETS["step_time"]["path"]
        timed = read_vector(f, steps_path, "float").size if _exists(f, steps_path) else ctx.size
        if ctx.size != timed:
            found.append(f"{ctx_path}: {ctx.size} entries but {timed} timed iterations")
        bad = np.flatnonzero(ctx < 1)
        if bad.size:
            i = int(bad[0])
            found.append(f"{ctx_path}: entry {i} is {int(ctx[i])}, expected >= 1")
        bins_path = base + T["decode_bins"].path
        table = _table(f, bins_path, T["decode_bins"], ("decode",), found)
        if table is None:
            return
        first = column(table, "context_first", "int", bins_path)
        last = column(table, "context_last", "int", bins_path)
        tokens = column(table, "tokens", "int", bins_path)
        p50, p95, p99 = (column(table, k, "float", bins_path)
                         for k in ("p50_ns", "p95_ns", "p99_ns"))
        for i in range(table.size):
            row = f"{bins_path}: row {i}: "
            if not 1 <= first[i] <= last[i]:
                found.append(row + "expected 1 <= context_first <= context_last")
            if tokens[i] < 1:
                found.append(row + "tokens must be >= 1")
            if not 0 < p50[i] <= p95[i] <= p99[i]:
                found.append(row + "expected 0 < p50_ns <= p95_ns <= p99_ns")
        if int(tokens.sum()) != ctx.size:
            found.append(f"{bins_path}: the bins hold {int(tokens.sum())} tokens but "
                         f"decode_context has {ctx.size}")

    def moe_imbalance() -> None:
        # An MoE point: what the summary's moe_imbalance_steps and moe_rank_imbalance_max say
        # of the per-step ratios, each at least 1.
        path = base + schema.DATASETS["moe_rank_imbalance_per_step"]["path"]
        if not _exists(f, path):
            return
        steps = read_vector(f, path, "float")
        values = read_attrs(_group(f, group), group)
        count = values.get("moe_imbalance_steps")
        if isinstance(count, int) and count != steps.size:
            found.append(f"{path}: {steps.size} entries but moe_imbalance_steps is {count}")
        bad = np.flatnonzero(~(steps >= 1))
        if bad.size:
            i = int(bad[0])
            found.append(f"{path}: entry {i} is {_number(float(steps[i]))}, expected >= 1 (the "
                         "busiest rank's rows over the mean's)")
        most = values.get("moe_rank_imbalance_max")
        if isinstance(most, float) and steps.size and float(steps.max()) != most:
            found.append(f"{path}: its largest entry is not moe_rank_imbalance_max {most:g}")

    def nodes() -> None:
        path = base + T["summary_nodes"].path
        if not _exists(f, path):
            return
        table = _table(f, path, T["summary_nodes"], (), found)
        if table is None:
            return
        ranks, slow = column(table, "ranks", "int", path), column(table, "slow", "int", path)
        for i in range(table.size):
            row = f"{path}: row {i}: "
            if ranks[i] < 1:
                found.append(row + "ranks must be >= 1")
            if slow[i] not in (0, 1):
                found.append(row + "slow must be 0 or 1")
            for lo, p50, hi in (("compute_lo_ns", "compute_p50_ns", "compute_hi_ns"),
                                ("span_lo_ns", "span_p50_ns", "span_hi_ns")):
                if not (column(table, lo, "float", path)[i] <= column(table, p50, "float", path)[i]
                        <= column(table, hi, "float", path)[i]):
                    found.append(row + f"expected {lo} <= {p50} <= {hi}")

    for checks in (steps, warmup, attrs, ops, lambda: _run_repeats(f, base, found), decode,
                   moe_imbalance, nodes, lambda: _pipeline(f, base, found),
                   lambda: _serving(f, base, found)):
        _section(found, checks)


def _close(a: float, b: float, rel: float, abs_: float) -> bool:
    """Whether `a` and `b` agree within `rel` of the larger or `abs_`, whichever is more (NaN
    never; close_to() in src/app/run_file_validate_serving.cpp)."""
    return bool(abs(a - b) <= max(abs_, rel * max(abs(a), abs(b))))


def _int_if(attrs: Dict[str, Any], key: str) -> Optional[int]:
    """The integer attribute `key`, where present and an integer (else the generic checks said
    so)."""
    value = attrs.get(key)
    return value if _is_int(value) else None


def _number_if(attrs: Dict[str, Any], key: str) -> Optional[float]:
    value = attrs.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


class _RowProblems:
    """Row problems of one table, the first MAX_ROW_PROBLEMS listed and the rest counted
    (finish(); RowProblems)."""

    def __init__(self, path: str, found: List[str]) -> None:
        self.path, self.found, self.count = path, found, 0

    def add(self, row: int, what: str) -> None:
        self.count += 1
        if self.count <= MAX_ROW_PROBLEMS:
            self.found.append(f"{self.path}: row {row}: {what}")

    def finish(self) -> None:
        if self.count > MAX_ROW_PROBLEMS:
            self.found.append(f"{self.path}: {self.count - MAX_ROW_PROBLEMS} more row problems")


def _serving(f: h5py.File, base: str, found: List[str]) -> None:
    """A trace run (`base`/config trace or trace_gen not empty: the condition "serving"):
    `base`/serving with its attributes and both tables, checked against each other. A /serving
    of another run is checked as far as it goes (its tables where present; validate_serving())."""
    trace = False
    config = f"{base}/config"
    if _exists(f, config):
        attrs = read_attrs(_group(f, config), config)
        trace = any(isinstance(attrs.get(k), str) and attrs[k]
                    for k in schema.attr_names("config", "trace", "trace_gen"))
    group = base + schema.ATTRIBUTES["serving"][0]
    if not trace and not _exists(f, group):
        return
    if not _require(f, group, "group (a trace run)", found):
        return
    held = ("serving",) if trace else ()
    attrs = read_attrs(_group(f, group), group)
    _require_attrs(attrs, group, schema.required_attributes("serving", held), found)
    _check_kinds(attrs, group, SERVING_KINDS, found)
    steps_path = base + T["serving_steps"].path
    requests_path = base + T["serving_requests"].path
    tables: Dict[str, Optional[np.ndarray]] = {"steps": None, "requests": None}
    for key, path, spec in (("steps", steps_path, T["serving_steps"]),
                            ("requests", requests_path, T["serving_requests"])):
        if trace or _exists(f, path):
            def one(key: str = key, path: str = path, spec: schema.Table = spec) -> None:
                tables[key] = _table(f, path, spec, held, found)
            _section(found, one)
    # Rows as the attributes count them, at least one of each.
    for key, path in (("steps", steps_path), ("requests", requests_path)):
        table = tables[key]
        if table is None:
            continue
        expected = _int_if(attrs, key)
        if expected is not None and table.size != expected:
            found.append(f"{path}: {table.size} rows but {group} {key} is {expected}")
        if table.size == 0:
            found.append(f"{path}: empty")
    steps, requests = tables["steps"], tables["requests"]
    if steps is not None:
        _section(found, lambda: _serving_steps(steps, steps_path, attrs, found))
    if requests is not None:
        _section(found, lambda: _serving_requests(requests, requests_path, found))
    if steps is not None and requests is not None:
        _section(found, lambda: _serving_totals(steps, steps_path, requests, requests_path, attrs,
                                                group, found))
    if steps is not None:
        _section(found, lambda: _serving_check(steps, steps_path, attrs, group, found))


def _serving_steps(table: np.ndarray, path: str, attrs: Dict[str, Any],
                   found: List[str]) -> None:
    """/serving/steps row by row: steps in order on the scheduler's clock, each lasting its
    measured time, its mix within the scheduler's limits (validate_serving_steps())."""
    ints = {name: column(table, name, "int", path).tolist() for name in schema.field_names(
        "serving_steps", "step", "prefill_tokens", "decode_tokens", "prefill_sequences",
        "decode_sequences", "context_min", "context_max")}
    floats = {name: column(table, name, "float", path).astype(np.float64).tolist()
              for name in schema.field_names("serving_steps", "start_s", "end_s", "step_ns",
                                             "prepare_ns", "context_mean")}
    step, start, end = ints["step"], floats["start_s"], floats["end_s"]
    step_ns, prepare, mean = floats["step_ns"], floats["prepare_ns"], floats["context_mean"]
    prefill, decode = ints["prefill_tokens"], ints["decode_tokens"]
    prefill_seqs, decode_seqs = ints["prefill_sequences"], ints["decode_sequences"]
    low, high = ints["context_min"], ints["context_max"]
    budget = _int_if(attrs, "token_budget")
    max_batch = _int_if(attrs, "max_batch")
    rows = _RowProblems(path, found)
    n = len(step)
    for i in range(n):
        if step[i] != i:
            rows.add(i, f"step {step[i]}, expected {i}")
        if not 0 <= start[i] <= end[i]:
            rows.add(i, f"expected 0 <= start_s <= end_s, found {_number(start[i])}, "
                        f"{_number(end[i])}")
        if i + 1 < n and not end[i] <= start[i + 1]:
            rows.add(i, f"end_s {_number(end[i])} is after the next step's start_s "
                        f"{_number(start[i + 1])}")
        if not step_ns[i] > 0:
            rows.add(i, f"step_ns must be > 0, found {_number(step_ns[i])}")
        elif not _close(end[i] - start[i], step_ns[i] * 1e-9, 1e-6, 1e-12):
            rows.add(i, f"end_s - start_s is {_number(end[i] - start[i])} s but step_ns is "
                        f"{_number(step_ns[i])}")
        if not prepare[i] >= 0:
            rows.add(i, f"prepare_ns must be >= 0, found {_number(prepare[i])}")
        if min(prefill[i], decode[i], prefill_seqs[i], decode_seqs[i]) < 0:
            rows.add(i, "prefill_tokens, decode_tokens, prefill_sequences and decode_sequences "
                        "must be >= 0")
        tokens = prefill[i] + decode[i]
        if budget is not None and not 1 <= tokens <= budget:
            rows.add(i, f"expected 1 <= prefill_tokens + decode_tokens <= token_budget {budget}, "
                        f"found {tokens}")
        if max_batch is not None and prefill_seqs[i] + decode_seqs[i] > max_batch:
            rows.add(i, f"prefill_sequences + decode_sequences {prefill_seqs[i] + decode_seqs[i]} "
                        f"is more than max_batch {max_batch}")
        if decode[i] != decode_seqs[i]:
            rows.add(i, f"decode_tokens {decode[i]} but decode_sequences {decode_seqs[i]} (one "
                        "token each)")
        if prefill[i] < prefill_seqs[i]:
            rows.add(i, f"prefill_tokens {prefill[i]} fewer than prefill_sequences "
                        f"{prefill_seqs[i]}")
        contexts = f", found {low[i]}, {_number(mean[i])}, {high[i]}"
        if decode_seqs[i] == 0:
            if low[i] != 0 or mean[i] != 0 or high[i] != 0:
                rows.add(i, "context_min, context_mean and context_max must be 0 without decode "
                            "sequences" + contexts)
        elif not low[i] <= mean[i] <= high[i]:
            rows.add(i, "expected context_min <= context_mean <= context_max" + contexts)
    rows.finish()


def _serving_requests(table: np.ndarray, path: str, found: List[str]) -> None:
    """/serving/requests row by row: requests in the trace's order, each one's times in order
    and its latencies what its times say (validate_serving_requests())."""
    request, prompt, output = (column(table, name, "int", path).tolist() for name in
                               schema.field_names("serving_requests", "request", "prompt_tokens",
                                                  "output_tokens"))
    arrival, first, finish, ttft, e2e, tpot = (
        column(table, name, "float", path).astype(np.float64).tolist()
        for name in schema.field_names("serving_requests", "arrival_s", "first_token_s",
                                       "finish_s", "ttft_s", "e2e_s", "tpot_s"))
    rows = _RowProblems(path, found)
    for i in range(len(request)):
        if request[i] != i:
            rows.add(i, f"request {request[i]}, expected {i}")
        if not arrival[i] >= 0:
            rows.add(i, f"arrival_s must be >= 0, found {_number(arrival[i])}")
        if i > 0 and not arrival[i] >= arrival[i - 1]:
            rows.add(i, f"arrival_s {_number(arrival[i])} is before the previous request's "
                        f"{_number(arrival[i - 1])}")
        if not arrival[i] <= first[i] <= finish[i]:
            rows.add(i, f"expected arrival_s <= first_token_s <= finish_s, found "
                        f"{_number(arrival[i])}, {_number(first[i])}, {_number(finish[i])}")
        if not _close(ttft[i], first[i] - arrival[i], 1e-9, 1e-12):
            rows.add(i, f"ttft_s {_number(ttft[i])}, expected first_token_s - arrival_s = "
                        f"{_number(first[i] - arrival[i])}")
        if not _close(e2e[i], finish[i] - arrival[i], 1e-9, 1e-12):
            rows.add(i, f"e2e_s {_number(e2e[i])}, expected finish_s - arrival_s = "
                        f"{_number(finish[i] - arrival[i])}")
        if prompt[i] < 1:
            rows.add(i, f"prompt_tokens must be >= 1, found {prompt[i]}")
        if output[i] < 1:
            rows.add(i, f"output_tokens must be >= 1, found {output[i]}")
        elif output[i] == 1:
            if not np.isnan(tpot[i]):
                rows.add(i, f"tpot_s must be NaN for one output token, found {_number(tpot[i])}")
        else:
            expected = (finish[i] - first[i]) / (output[i] - 1)
            if not _close(tpot[i], expected, 1e-9, 1e-12):
                rows.add(i, f"tpot_s {_number(tpot[i])}, expected (finish_s - first_token_s) / "
                            f"(output_tokens - 1) = {_number(expected)}")
    rows.finish()


def _serving_totals(steps: np.ndarray, steps_path: str, requests: np.ndarray,
                    requests_path: str, attrs: Dict[str, Any], group: str,
                    found: List[str]) -> None:
    """What /serving's attributes say of its tables: the tokens the steps ran against the
    requests' (each prompt token prefilled once; the first output token comes with the step
    finishing the prompt, every later one from a decode entry), the latency percentiles (numpy's
    default, linear, as percentiles() in models/serving.hpp; TPOT over the requests of more than
    one output token), good requests, the span and the rates over it
    (validate_serving_totals())."""
    output = column(requests, "output_tokens", "int", requests_path).astype(np.int64)
    prefilled = int(column(steps, "prefill_tokens", "int", steps_path).astype(np.int64).sum())
    decoded = int(column(steps, "decode_tokens", "int", steps_path).astype(np.int64).sum())
    prompts = int(column(requests, "prompt_tokens", "int", requests_path).astype(np.int64).sum())
    later_outputs = int((output - 1).sum())
    if prefilled != prompts:
        found.append(f"{steps_path}: the steps prefill {prefilled} tokens but the requests' "
                     f"prompts hold {prompts}")
    if decoded != later_outputs:
        found.append(f"{steps_path}: the steps decode {decoded} tokens but the requests' output "
                     f"tokens after their first are {later_outputs}")
    values = {name: column(requests, name, "float", requests_path).astype(np.float64)
              for name in ("ttft_s", "tpot_s", "e2e_s")}
    values["tpot_s"] = values["tpot_s"][output > 1]
    for metric in ("ttft", "tpot", "e2e"):
        name = f"{metric}_s"
        # A value that is not a finite time was a row's problem: no percentile to compare.
        if not np.all(np.isfinite(values[name])):
            continue
        expected = (np.percentile(values[name], SERVING_PERCENTILES).tolist() if values[name].size
                    else [0.0] * len(SERVING_PERCENTILES))
        for p, want in zip(SERVING_PERCENTILES, expected):
            key = f"{metric}_p{p}_s"
            got = _number_if(attrs, key)
            if got is not None and not _close(got, want, 1e-9, 0):
                found.append(f"{group}: {key} is {_number(got)}, but {requests_path} {name} "
                             f"gives {_number(want)}")
    count = int(requests.size)
    good = _int_if(attrs, "good")
    if good is not None and not 0 <= good <= count:
        found.append(f"{group}: expected 0 <= good <= requests, found {good}, {count}")
    span = _number_if(attrs, "span_s")
    if span is None:
        return
    if count > 0:
        arrival = column(requests, "arrival_s", "float", requests_path).astype(np.float64)
        finish = column(requests, "finish_s", "float", requests_path).astype(np.float64)
        expected = float(finish.max() - arrival.min())
        if not _close(span, expected, 1e-9, 1e-12):
            found.append(f"{group}: span_s is {_number(span)}, but {requests_path} spans "
                         f"{_number(expected)} (first arrival to last finish)")
    if not span > 0:
        return
    throughput = _number_if(attrs, "throughput_per_s")
    if throughput is not None and not _close(throughput, count / span, 1e-9, 0):
        found.append(f"{group}: throughput_per_s is {_number(throughput)}, expected requests / "
                     f"span_s = {_number(count / span)}")
    goodput = _number_if(attrs, "goodput_per_s")
    if good is not None and goodput is not None and not _close(goodput, good / span, 1e-9, 0):
        found.append(f"{group}: goodput_per_s is {_number(goodput)}, expected good / span_s = "
                     f"{_number(good / span)}")


def _serving_check(steps: np.ndarray, steps_path: str, attrs: Dict[str, Any], group: str,
                   found: List[str]) -> None:
    """The check of a trace run's steps (/serving check, check_steps, check_max_rel_error,
    check_tolerance; /serving/steps check_rel_error): a status of its three kinds, every step
    compared unless skipped, the status the errors and the tolerance give, and the steps'
    errors (NaN where not compared) whose largest is check_max_rel_error
    (validate_serving_check())."""
    status = attrs.get("check")
    if not isinstance(status, str):
        return
    compared = status in ("passed", "failed")
    if not compared and not status.startswith("skipped: "):
        found.append(f'{group}: check is "{status}", expected passed, failed or skipped: <why>')
        return
    checked, run = _int_if(attrs, "check_steps"), _int_if(attrs, "steps")
    worst = _number_if(attrs, "check_max_rel_error")
    tolerance = _number_if(attrs, "check_tolerance")
    if checked is not None and run is not None and checked != (run if compared else 0):
        want = f"steps {run}" if compared else "0 (skipped)"
        found.append(f"{group}: check_steps is {checked}, expected {want}")
    if (compared and worst is not None and tolerance is not None
            and (worst <= tolerance) != (status == "passed")):
        found.append(f"{group}: check is {status} but check_max_rel_error {_number(worst)} "
                     f"against check_tolerance {_number(tolerance)}")
    if "check_rel_error" not in (steps.dtype.names or ()):
        return
    errors = column(steps, "check_rel_error", "float", steps_path).astype(np.float64)
    missing = int(np.isnan(errors).sum())
    if not compared and missing != errors.size:
        found.append(f"{steps_path}: check_rel_error holds {errors.size - missing} compared "
                     f"step(s) but /serving check is skipped")
    if compared and missing > 0:
        found.append(f"{steps_path}: check_rel_error is NaN in {missing} step(s) but /serving "
                     f"check compared every step")
    if compared and missing == 0 and errors.size and worst is not None:
        largest = float(errors.max())
        # An infinite error (an output that is not finite) only matches an infinite largest one.
        if (np.isfinite(largest) != np.isfinite(worst)
                or (np.isfinite(worst) and not _close(largest, worst, 1e-9, 0))):
            found.append(f"{steps_path}: the largest check_rel_error is {_number(largest)} but "
                         f"{group} check_max_rel_error is {_number(worst)}")


def _run_repeats(f: h5py.File, base: str, found: List[str]) -> None:
    """`run --repeats R` (R > 1): the summary's median over the repeats within its interval, the
    repeat kept among them, and /repeats holding R rows per strategy (validate_run_repeats() in
    src/app/run_file_validate_results.cpp)."""
    group = f"{base}/summary"
    values = read_attrs(_group(f, group), group)
    if "repeat_used" not in values:
        return
    for key in ("repeats", "repeat_used"):
        if key not in values:
            raise Problem(f"{group}: missing attribute '{key}'")
        if not _is_int(values[key]):
            raise Problem(f"{group}: attribute '{key}' is not an integer")
    repeats, used = int(values["repeats"]), int(values["repeat_used"])
    if repeats < 2 or used < 0 or used >= repeats:
        found.append(f"{group}: repeats {repeats} and repeat_used {used}: expected repeats >= 2 "
                     "and 0 <= repeat_used < repeats")
    for key in ("step_p50_median_ns", "step_p50_lo_ns", "step_p50_hi_ns"):
        if key not in values:
            raise Problem(f"{group}: missing attribute '{key}'")
    median, lo, hi = (_number_attr(values, k, group)
                      for k in ("step_p50_median_ns", "step_p50_lo_ns", "step_p50_hi_ns"))
    if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo <= median <= hi):
        found.append(f"{group}: expected 0 < step_p50_lo_ns <= step_p50_median_ns <= "
                     f"step_p50_hi_ns, found {_number(lo)}, {_number(median)}, {_number(hi)}")
    if not _require(f, T["repeats"].path, "dataset (run --repeats)", found):
        return
    table = _table(f, T["repeats"].path, T["repeats"], ("run-repeats",), found)
    if table is None:
        return
    names = column(table, "strategy", "string", "/repeats")
    p50 = column(table, "step_p50_ns", "float", "/repeats")
    for i, value in enumerate(p50):
        if not (np.isfinite(value) and value > 0):
            found.append(f"/repeats: row {i}: step_p50_ns is {_number(float(value))}, expected > 0")
            return
    rows = sum(1 for n in names if n == names[0]) if len(names) else 0
    if rows != repeats:
        first = names[0] if len(names) else "-"
        found.append(f"/repeats: {rows} row(s) of strategy '{first}', expected {repeats} "
                     f"({group} repeats)")


def pipeline_keys(held: Sequence[str], pp: int) -> List[str]:
    """The summary attributes a scheduled pipeline of `pp` stages requires under `held`, in the
    schema's order, each stage<p> family once per stage, stage-major (pipeline_keys() in
    src/app/run_file_validate_results.cpp)."""
    keys: List[str] = []
    stage_at = -1
    for a in schema.ATTRIBUTES["summary"][1]:
        if not isinstance(a.required, str) or a.required not in held:
            continue
        if "<p>" in a.name:
            stage_at = len(keys) if stage_at < 0 else stage_at
        else:
            keys.append(a.name)
    stages = [f"stage{p}{field}" for p in range(pp) for field in STAGE_FIELDS]
    at = stage_at if stage_at >= 0 else len(keys)
    return keys[:at] + stages + keys[at:]


def is_schedule_name(name: str) -> bool:
    """gpipe, 1f1b, zb-h1 or interleaved:V (V >= 2), as schedule_name() writes them."""
    if not SCHEDULE_NAME.fullmatch(name):
        return False
    return not name.startswith("interleaved:") or int(name.split(":")[1]) >= 2


def _pipeline(f: h5py.File, base: str, found: List[str]) -> None:
    """Scheduled pipelines (`base`/config phase train, or a schedule given): the schedule's
    summary attributes, the four per-stage figures of every stage, bubbles in [0, 1], what the
    check compared; for train, the backward ops (and the stage's own) in the op table where
    it was kept (validate_pipeline)."""
    config_path = f"{base}/config"
    if not _exists(f, config_path):
        return
    config = read_attrs(_group(f, config_path), config_path)
    phase_key, schedule_key, pp_key = schema.attr_names("config", "phase", "schedule", "pp")
    phase = config.get(phase_key) if isinstance(config.get(phase_key), str) else ""
    train = phase == "train"
    if not train and not (isinstance(config.get(schedule_key), str) and config[schedule_key]):
        return
    group = f"{base}/summary"
    attrs = read_attrs(_group(f, group), group)
    pp = config.get(pp_key)
    if not _is_int(pp) or pp < 1:
        found.append(f"{config_path}: pp must be an integer >= 1 (a scheduled pipeline's stages)")
        return
    # Each stage has its figures: a pp far beyond the stages the summary holds is one problem,
    # not one per stage counted out to pp.
    held = sum(1 for key in attrs if key.startswith("stage") and key.endswith(STAGE_FIELDS[0]))
    if pp > held + MAX_ROW_PROBLEMS:
        found.append(f"{group}: {config_path} pp is {pp} but the summary holds the figures of "
                     f"{held} stage(s)")
        return
    _pipeline_attrs(attrs, group, config_path, phase, pp, found)
    _pipeline_ops(f, f"{base}/ops", config, train, found)


def _pipeline_attrs(attrs: Dict[str, Any], group: str, config_path: str, phase: str, pp: int,
                    found: List[str]) -> None:
    """The scheduled pipeline's summary attributes at `group`: present, of their ranges, what
    the check compared against the phase (validate_pipeline_attrs())."""
    train = phase == "train"
    # Train with a pipeline: the measured action times and the simulated bubble.
    held = ["pipeline"]
    if train and pp > 1:
        held.append("pipeline-actions")
        if attrs.get("schedule") == "zb-h1":
            held.append("pipeline-split")
    action_keys = [key for key in ACTION_ATTRS
                   if schema.attribute("summary", key).required in held]
    _require_attrs(attrs, group, pipeline_keys(held, pp), found)

    def string(key: str) -> Optional[str]:
        if key not in attrs:
            return None
        if isinstance(attrs[key], str):
            return attrs[key]
        found.append(f"{group}: attribute '{key}' is not a string")
        return None

    schedule, recompute, compares, microbatches, bubble_theory, bubble_simulated = \
        schema.attr_names("summary", "schedule", "recompute", "check_compares", "microbatches",
                          "bubble_theory", "bubble_simulated")
    value = string(schedule)
    if value is not None and not is_schedule_name(value):
        found.append(f"{group}: schedule is '{value}', expected gpipe, 1f1b, interleaved:V "
                     "(V >= 2) or zb-h1")
    value = string(recompute)
    if value is not None and value not in schema.ENUMS["recompute"]:
        found.append(f"{group}: recompute is '{value}', expected "
                     f"{schema.one_of(schema.ENUMS['recompute'])}")
    value = string(compares)
    if value is not None:
        expected = "gradients" if train else "outputs"
        if value not in schema.ENUMS["check_compares"]:
            found.append(f"{group}: check_compares is '{value}', expected "
                         f"{schema.one_of(schema.ENUMS['check_compares'])}")
        elif value != expected:
            found.append(f"{group}: check_compares is '{value}' but {config_path} phase is "
                         f"{phase} (expected {expected})")
    if microbatches in attrs:
        value = attrs[microbatches]
        if not _is_int(value) or value < 1:
            shown = _number(value) if isinstance(value, float) else value
            found.append(f"{group}: microbatches must be an integer >= 1, found '{shown}'")

    def number(key: str) -> Optional[float]:
        if key not in attrs:
            return None
        value = attrs[key]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        found.append(f"{group}: attribute '{key}' is not a number")
        return None

    def fraction(key: str) -> None:
        x = number(key)
        if x is not None and not 0 <= x <= 1:
            found.append(f"{group}: {key} must be in [0, 1], found {_number(x)}")

    def non_negative(key: str) -> None:
        x = number(key)
        if x is not None and not x >= 0:
            found.append(f"{group}: {key} must be >= 0, found {_number(x)}")

    fraction(bubble_theory)
    fraction(bubble_simulated)
    for key in action_keys:
        x = number(key)
        if x is not None and not x > 0:
            found.append(f"{group}: {key} must be > 0, found {_number(x)}")
    for p in range(pp):
        fraction(f"stage{p}{STAGE_FIELDS[0]}")
        for field in STAGE_FIELDS[1:]:
            non_negative(f"stage{p}{field}")


def _pipeline_ops(f: h5py.File, ops_path: str, config: Dict[str, Any], train: bool,
                  found: List[str]) -> None:
    """The ops a scheduled pipeline records in the op table at `ops_path`, where it was kept:
    the stage's own, and for train every backward op its configuration runs
    (validate_pipeline_ops())."""
    if not _exists(f, ops_path):
        return
    rotary, tp, sequence_parallel, dp, dp_shard, sgd_lr = schema.attr_names(
        "config", "rotary", "tp", "sequence_parallel", "dp", "dp_shard", "sgd_lr")

    def integer(key: str, fallback: int) -> int:
        value = config.get(key)
        return value if _is_int(value) else fallback

    (name,) = schema.field_names("ops", "name")
    present = set(column(read_table(f, ops_path), name, "string", ops_path).tolist())
    required = list(SCHEDULED_OPS)
    if train:
        required += TRAIN_OPS
        if config.get(rotary) == "on":
            required.append("rotary_bwd")
        if integer(tp, 1) > 1 and integer(sequence_parallel, 0) != 0:
            required += ["allgather_mlp_bwd", "reducescatter_mlp_bwd", "allgather_attn_bwd",
                         "reducescatter_attn_bwd", "allreduce_norm_grads"]
        elif integer(tp, 1) > 1:
            required += ["allreduce_mlp_bwd", "allreduce_attn_bwd"]
        if integer(dp, 1) > 1:
            required.append("dp_reducescatter" if integer(dp_shard, 0) != 0
                            else "dp_allreduce")
        rate = config.get(sgd_lr)
        if isinstance(rate, float) and rate > 0:
            required.append("sgd_update")
    what = "a train run" if train else "a scheduled pipeline"
    for op in required:
        if op not in present:
            found.append(f"{ops_path}: missing op '{op}' ({what} records it)")


def _result_table(f: h5py.File, path: str, found: List[str]) -> None:
    table = _table(f, path, T["collective_result"], (), found)
    if table is None:
        return
    size_bytes, wrong, iters, *times = schema.field_names(
        "collective_result", "size_bytes", "wrong", "iters", "time_min_ns", "time_p50_ns",
        "time_p95_ns", "time_p99_ns")
    for i in range(table.size):
        row = table[i]
        where = f"{path}: row {i}: "
        if row[size_bytes] <= 0:
            found.append(where + f"{size_bytes} must be > 0")
        if row[wrong] < 0:
            found.append(where + f"{wrong} must be >= 0")
        if row[iters] <= 0:
            found.append(where + f"{iters} must be > 0")
        t = [float(row[k]) for k in times]
        if not (0 < t[0] <= t[1] <= t[2] <= t[3]):
            found.append(where + f"expected 0 < {' <= '.join(times)}, found "
                         f"{', '.join(_number(x) for x in t)}")


def _samples_table(f: h5py.File, path: str, found: List[str]) -> None:
    table = _table(f, path, T["collective_samples"], (), found)
    if table is None:
        return
    (time_ns,) = schema.field_names("collective_samples", "time_ns")
    bad = np.flatnonzero(~(table[time_ns] > 0))
    if bad.size:
        found.append(f"{path}: row {int(bad[0])}: {time_ns} must be > 0")


def _collectives(f: h5py.File, found: List[str]) -> None:
    children = list(_group(f, "/collectives"))
    if not children:
        found.append("/collectives: empty")
    for name in children:
        path = f"/collectives/{name}"
        if name.endswith(SAMPLES_SUFFIX):
            _section(found, lambda path=path: _samples_table(f, path, found))
        else:
            _section(found, lambda path=path: _result_table(f, path, found))


def _roof(f: h5py.File, found: List[str], envelope_required: bool) -> None:
    spec = T["roofs_interconnect"]
    table = _table(f, ROOF_PATH, spec, ("envelope",) if envelope_required else (), found)
    if table is None:
        return
    alpha_us, beta_gbps, floor_alpha_us, floor_beta_gbps = schema.field_names(
        spec.id, "alpha_us", "beta_gbps", "floor_alpha_us", "floor_beta_gbps")
    envelope = envelope_required or floor_alpha_us in table.dtype.names
    (scope,) = schema.field_names(spec.id, "scope")
    if scope in table.dtype.names:
        for i, text in enumerate(column(table, scope, "string", ROOF_PATH)):
            if text not in schema.ENUMS["scope"]:
                found.append(f"{ROOF_PATH}: row {i}: {scope} '{text}' is not "
                             f"{schema.one_of(schema.ENUMS['scope'])}")
    for i in range(table.size):
        alpha, beta = float(table[alpha_us][i]), float(table[beta_gbps][i])
        if not (alpha >= 0 and beta > 0):
            found.append(f"{ROOF_PATH}: row {i}: expected {alpha_us} >= 0 and {beta_gbps} > 0, "
                         f"found {_number(alpha)}, {_number(beta)}")
        if not envelope:
            continue
        floor_alpha = float(column(table, floor_alpha_us, "float", ROOF_PATH)[i])
        floor_beta = float(column(table, floor_beta_gbps, "float", ROOF_PATH)[i])
        if not (floor_alpha >= 0 and floor_beta > 0):
            found.append(f"{ROOF_PATH}: row {i}: expected {floor_alpha_us} >= 0 and "
                         f"{floor_beta_gbps} > 0, found {_number(floor_alpha)}, "
                         f"{_number(floor_beta)}")


def _roofs(f: h5py.File, found: List[str]) -> None:
    for spec in (T["roofs_gemm"], T["roofs_memory"], T["roofs_launch"]):
        def one(spec: schema.Table = spec) -> None:
            table = _table(f, spec.path, spec, (), found)
            if table is None:
                return
            for field in spec.fields:
                if not field.positive:
                    continue
                values = column(table, field.name, "float", spec.path)
                for i in np.flatnonzero(~(values > 0)).tolist():
                    found.append(f"{spec.path}: row {i}: {field.name} must be > 0, found "
                                 f"{_number(float(values[i]))}")
        _section(found, one)
    _section(found, lambda: _roof(f, found, envelope_required=True))
    # Each GPU's own figures: optional, but complete where present.
    gpus = T["roofs_gpus"]
    if _exists(f, gpus.path):
        _section(found, lambda: _table(f, gpus.path, gpus, (), found))
