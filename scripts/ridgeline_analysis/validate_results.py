"""The checks of the results a run file holds, as run_file_validate_results.cpp makes them, for
validate.py: summaries with their decode and pipeline figures, run repeats, collectives tables and
roofs. The tables and attributes come from the schema; the arithmetic is code.
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
                   moe_imbalance, nodes, lambda: _pipeline(f, base, found)):
        _section(found, checks)


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
