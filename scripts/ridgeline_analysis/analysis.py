"""Pure functions on timeline arrays (the /ranks/<r>/timeline compound rows): durations, per-op
percentiles, step times, communication not hidden under compute and the lane that bounds each
step; the exposed communication the C++ side stored (exposure()); and on the attribution
tables: the ridgeline plane's points and ridge lines (a sweep's scaling series, crossovers and
join are in sweeps.py). No I/O.

`timelines` is always a mapping rank -> structured array as reader.load() returns it.
Percentiles interpolate linearly (numpy's default), as the C++ summary does, so the results
here reproduce /summary exactly.

Exposed communication is what the C++ side measured and stored (/summary `exposed_comm_ns` and
`exposed_interconnect_ns`, /sweep/points `exposed_interconnect_ns`): read it with exposure().
The timeline functions unhidden_comm_ns() and step_breakdown() measure something else, the
comm and p2p lane time of the instrumented run that no compute-lane op overlaps, and are not
a substitute for it.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .reader import Roofs, Run, attr

LANES = ("compute", "comm", "p2p")
COMPUTE_LANE, COMM_LANE, P2P_LANE = 0, 1, 2

#: Fields of step_breakdown(); the four *_ns parts add up to span_ns.
BREAKDOWN_DTYPE = np.dtype([
    ("iteration", np.int32), ("rank", np.int32), ("span_ns", np.float64),
    ("compute_ns", np.float64), ("comm_unhidden_ns", np.float64),
    ("p2p_unhidden_ns", np.float64), ("idle_ns", np.float64), ("critical", "U7"),
])


def timed_rows(timeline: np.ndarray, warmup: bool = False) -> np.ndarray:
    """Rows of the timed iterations (or, with warmup=True, of the warm-up iterations)."""
    return timeline[(timeline["warmup"] != 0) == warmup]


def durations_ns(rows: np.ndarray) -> np.ndarray:
    return rows["t_end_ns"] - rows["t_start_ns"]


def op_durations_ns(timeline: np.ndarray, op_id: int) -> np.ndarray:
    """Every timed instance of one op on one rank, in recorded order."""
    rows = timed_rows(timeline)
    return durations_ns(rows[rows["op_id"] == op_id])


def op_p50_per_rank_ns(timelines: Mapping[int, np.ndarray], n_ops: int) -> np.ndarray:
    """Median instance time of each op on each rank: shape (ranks in sorted order, n_ops),
    NaN where a rank never ran the op."""
    out = np.full((len(timelines), n_ops), np.nan)
    for row, rank in enumerate(sorted(timelines)):
        for op_id in range(n_ops):
            d = op_durations_ns(timelines[rank], op_id)
            if d.size:
                out[row, op_id] = np.percentile(d, 50)
    return out


def op_instance_times_ns(timelines: Mapping[int, np.ndarray], op_id: int,
                         max_over_ranks: bool) -> np.ndarray:
    """One time per op instance, an instance being (layer, microbatch, iteration, rank).

    With max_over_ranks (collectives, p2p) the rank is left out of the key: a collective
    lasts until its slowest rank is done. Repeats under one key count as their maximum.
    """
    keys, times = [], []
    for rank, timeline in timelines.items():
        rows = timed_rows(timeline)
        rows = rows[rows["op_id"] == op_id]
        rank_key = np.full(rows.size, -1 if max_over_ranks else rank, dtype=np.int64)
        keys.append(np.stack([rows["layer"], rows["microbatch"], rows["iteration"], rank_key],
                             axis=1).astype(np.int64))
        times.append(durations_ns(rows).astype(np.float64))
    key = np.concatenate(keys) if keys else np.empty((0, 4), np.int64)
    time = np.concatenate(times) if times else np.empty(0)
    if time.size == 0:
        return time
    _, inverse = np.unique(key, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    out = np.zeros(inverse.max() + 1)
    np.maximum.at(out, inverse, time)
    return out


def op_p50_ns(timelines: Mapping[int, np.ndarray], n_ops: int,
              comm_op_ids: Iterable[int]) -> np.ndarray:
    """Median instance time of each op over all ranks (NaN if never run): the p50_ns of
    /summary/ops. `comm_op_ids` are the ops timed as a maximum over ranks."""
    comm = set(comm_op_ids)
    out = np.full(n_ops, np.nan)
    for op_id in range(n_ops):
        t = op_instance_times_ns(timelines, op_id, op_id in comm)
        if t.size:
            out[op_id] = np.percentile(t, 50)
    return out


def _by_iteration(rows: np.ndarray) -> Iterable[Tuple[int, np.ndarray]]:
    """Rows grouped by iteration, in ascending iteration order."""
    rows = rows[np.argsort(rows["iteration"], kind="stable")]
    iterations, first = np.unique(rows["iteration"], return_index=True)
    return zip(iterations.tolist(), np.split(rows, first[1:]))


def step_spans_ns(timeline: np.ndarray, warmup: bool = False) -> Dict[int, int]:
    """One rank's span of each iteration: its last op end minus its first op start."""
    return {it: int(rows["t_end_ns"].max() - rows["t_start_ns"].min())
            for it, rows in _by_iteration(timed_rows(timeline, warmup))}


def step_times_ns(timelines: Mapping[int, np.ndarray],
                  warmup: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """(iterations, step times): a step lasts as long as its slowest rank's span."""
    steps: Dict[int, int] = {}
    for timeline in timelines.values():
        for it, span in step_spans_ns(timeline, warmup).items():
            steps[it] = max(steps.get(it, 0), span)
    iterations = np.array(sorted(steps), dtype=np.int64)
    return iterations, np.array([steps[i] for i in iterations.tolist()], dtype=np.float64)


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Union of intervals [start, end) as sorted, disjoint rows (k, 2); touching ones merge."""
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    if starts.size == 0:
        return np.empty((0, 2))
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    first = np.flatnonzero(np.r_[True, s[1:] > reach[:-1]])
    return np.stack([s[first], np.maximum.reduceat(e, first)], axis=1)


def covered_ns(starts: np.ndarray, ends: np.ndarray) -> float:
    """Length of the union of intervals: time during which at least one is open."""
    merged = merge_intervals(starts, ends)
    return float((merged[:, 1] - merged[:, 0]).sum())


def exposed_ns(starts: np.ndarray, ends: np.ndarray,
               hiding_starts: np.ndarray, hiding_ends: np.ndarray) -> float:
    """Time covered by the first intervals and by none of the hiding ones:
    |A \\ H| = |A u H| - |H|."""
    return (covered_ns(np.r_[starts, hiding_starts], np.r_[ends, hiding_ends])
            - covered_ns(hiding_starts, hiding_ends))


def _lane_rows(rows: np.ndarray, lanes: Tuple[int, ...]) -> Tuple[np.ndarray, np.ndarray]:
    sel = rows[np.isin(rows["lane"], lanes)]
    return sel["t_start_ns"], sel["t_end_ns"]


def _breakdown(rows: np.ndarray) -> Tuple[float, float, float, float, float]:
    """(span, compute, comm unhidden, p2p unhidden, idle) of one rank's iteration. Each lane
    counts only where no lane before it (compute, then comm) is busy, so the parts add up."""
    span = float(rows["t_end_ns"].max() - rows["t_start_ns"].min())
    compute = covered_ns(*_lane_rows(rows, (COMPUTE_LANE,)))
    with_comm = covered_ns(*_lane_rows(rows, (COMPUTE_LANE, COMM_LANE)))
    busy = covered_ns(rows["t_start_ns"], rows["t_end_ns"])
    return span, compute, with_comm - compute, busy - with_comm, span - busy


def unhidden_comm_by_rank_ns(timelines: Mapping[int, np.ndarray],
                             warmup: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """(iterations, unhidden[rank index, iteration index]): time in the comm and p2p lanes not
    overlapped by any compute-lane interval of the same rank, in the instrumented timelines.
    Ranks in sorted order; NaN where a rank has no rows in an iteration. Not the exposed
    communication of /summary (see exposure())."""
    iterations, _ = step_times_ns(timelines, warmup)
    column = {it: i for i, it in enumerate(iterations.tolist())}
    out = np.full((len(timelines), iterations.size), np.nan)
    for row, rank in enumerate(sorted(timelines)):
        for it, rows in _by_iteration(timed_rows(timelines[rank], warmup)):
            comm = _lane_rows(rows, (COMM_LANE, P2P_LANE))
            compute = _lane_rows(rows, (COMPUTE_LANE,))
            out[row, column[it]] = exposed_ns(comm[0], comm[1], compute[0], compute[1])
    return iterations, out


def unhidden_comm_ns(timelines: Mapping[int, np.ndarray],
                     warmup: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """(iterations, unhidden communication per step): the largest over ranks."""
    iterations, by_rank = unhidden_comm_by_rank_ns(timelines, warmup)
    return iterations, np.nanmax(by_rank, axis=0) if by_rank.size else np.empty(0)


#: A TP layer's GEMMs and the collective each is paired with (pair, GEMM op, collective ops):
#: under sequence parallelism an all-gather feeds each column-parallel GEMM (qkv, fc1) and a
#: reduce-scatter follows each row-parallel one (proj, fc2); without it only the row-parallel
#: ones pair, with an all-reduce. The pairs of PyTorch's fused async-TP ops.
TP_PAIRS = (
    ("qkv", "qkv_gemm", ("allgather_attn",)),
    ("proj", "proj_gemm", ("reducescatter_attn", "allreduce_attn")),
    ("fc1", "fc1_gemm", ("allgather_mlp",)),
    ("fc2", "fc2_gemm", ("reducescatter_mlp", "allreduce_mlp")),
)


# The op after each reduce-scatter pair: where a strategy that leaves the pair's sum to the next
# op (the copy-engine ring at TP2 adds the peer's partial inside the norm that follows) pays it.
TP_PAIR_NEXT = {"proj": "residual1_norm2", "fc2": "residual2"}


def _rank_instances(run: Run, op_ids: List[int]):
    """Per rank, the timed rows of `op_ids` and the instance (layer, microbatch, iteration) of
    each: yields (rows, the instances' keys, each row's index into them)."""
    for timeline in run.timelines.values():
        rows = timed_rows(timeline)
        rows = rows[np.isin(rows["op_id"], op_ids)]
        if rows.size == 0:
            continue
        key = np.stack([rows["layer"], rows["microbatch"], rows["iteration"]], axis=1)
        uniq, inverse = np.unique(key.astype(np.int64), axis=0, return_inverse=True)
        yield rows, list(map(tuple, uniq.tolist())), inverse.reshape(-1)


def _slowest_rank(per: Dict[Tuple[int, ...], float], keys: List[Tuple[int, ...]],
                  values: np.ndarray, keep: Optional[np.ndarray] = None) -> None:
    """Folds one rank's value per instance into `per`, the largest over the ranks so far."""
    for i, (k, v) in enumerate(zip(keys, values.tolist())):
        if keep is None or keep[i]:
            per[k] = max(per.get(k, 0.0), v)


def _in_instance_order(per: Dict[Tuple[int, ...], float]) -> np.ndarray:
    return np.array([per[k] for k in sorted(per)], dtype=np.float64)


def op_total_per_instance_ns(run: Run, name: str) -> np.ndarray:
    """One op's time per instance (layer, microbatch, iteration), found by name: the sum of its
    rows' durations on a rank (all its pieces, where op_instance_times_ns keeps the longest),
    the largest over the ranks; timed iterations only. Empty when the op is not in the file."""
    ids = {op.name: op.id for op in run.ops}
    if name not in ids:
        return np.zeros(0)
    per: Dict[Tuple[int, ...], float] = {}
    for rows, keys, inverse in _rank_instances(run, [ids[name]]):
        sums = np.zeros(len(keys))
        np.add.at(sums, inverse, durations_ns(rows).astype(np.float64))
        _slowest_rank(per, keys, sums)
    return _in_instance_order(per)


def pair_times_ns(run: Run) -> Dict[str, np.ndarray]:
    """Each GEMM + collective pair of TP_PAIRS that ran with its collective: one time per
    instance (layer, microbatch, iteration), the span on a rank from the first start to the
    last end of the pair's rows (every chunk of the GEMM and of the collective, on either lane,
    the reduction of a copy-engine reduce-scatter among them), the largest over the ranks, as
    a collective lasts until its slowest rank is done. Timed iterations of the instrumented run
    (each op between its own events). Instances without a collective row are left out."""
    ids = {op.name: op.id for op in run.ops}
    out: Dict[str, np.ndarray] = {}
    for pair, gemm, collectives in TP_PAIRS:
        comm_ids = [ids[c] for c in collectives if c in ids]
        if gemm not in ids or not comm_ids:
            continue
        spans: Dict[Tuple[int, ...], float] = {}
        for rows, keys, inverse in _rank_instances(run, [ids[gemm], *comm_ids]):
            first = np.full(len(keys), np.inf)
            last = np.full(len(keys), -np.inf)
            paired = np.zeros(len(keys), dtype=bool)
            np.minimum.at(first, inverse, rows["t_start_ns"].astype(np.float64))
            np.maximum.at(last, inverse, rows["t_end_ns"].astype(np.float64))
            np.logical_or.at(paired, inverse, np.isin(rows["op_id"], comm_ids))
            _slowest_rank(spans, keys, last - first, paired)
        if spans:
            out[pair] = _in_instance_order(spans)
    return out


class Exposure(NamedTuple):
    """A run's (or point's) exposed communication, as the C++ side defined and stored it.

    comm_ns: /summary `exposed_comm_ns`, the uninstrumented step minus the same schedule run
    with collectives skipped (eager runs). interconnect_ns: /summary `exposed_interconnect_ns`,
    the p50 step minus the compute-lane ops' per-step time, at most the collectives' own time
    (runs attributed against roofs). Each source says where the value came from: "stored";
    else a recomputation, because the file stores none: "timelines" (comm_ns: the median over
    timed steps of unhidden_comm_ns(), a different measure, on the instrumented run),
    "summary ops" (interconnect_ns: the C++ rule split_step() on /summary/ops, the same
    definition); "none" (NaN) where neither can be had."""

    comm_ns: float
    comm_source: str
    interconnect_ns: float
    interconnect_source: str


def exposed_interconnect_from_ops(step_ns: float, kinds: Sequence[str],
                                  per_step_ns: Sequence[float]) -> float:
    """The exposed interconnect time by the rule of split_step() in models/attribution.cpp:
    the step time the compute-lane ops (every kind but collective and p2p) leave, after scaling
    them down to the step if they exceed it, and at most the collective and p2p ops' time."""
    comm = np.isin(np.asarray(kinds, dtype=object), ("collective", "p2p"))
    per_step = np.asarray(per_step_ns, dtype=np.float64)
    compute_lane = float(per_step[~comm].sum())
    comm_lane = float(per_step[comm].sum())
    scale = step_ns / compute_lane if compute_lane > step_ns and compute_lane > 0 else 1.0
    left = max(0.0, step_ns - compute_lane * scale)
    return min(left, comm_lane)


def exposure(run: Run) -> Exposure:
    """The exposed communication of `run` (a run file or one point of it) from its /summary;
    recomputed (and marked so in the sources) only where the file stores no value: runs of
    captured graphs store no exposed_comm_ns, runs with --roofs none no exposed_interconnect_ns,
    and files written before either stored neither."""
    attrs = run.summary.attrs if run.summary is not None else {}
    where = f"{run.path}: /summary"
    if "exposed_comm_ns" in attrs:
        comm, comm_source = attr(attrs, "exposed_comm_ns", "number", where=where), "stored"
    else:
        _, per_step = unhidden_comm_ns(run.timelines)
        per_step = per_step[np.isfinite(per_step)]
        comm, comm_source = ((float(np.percentile(per_step, 50)), "timelines") if per_step.size
                             else (math.nan, "none"))
    if "exposed_interconnect_ns" in attrs:
        net = attr(attrs, "exposed_interconnect_ns", "number", where=where)
        net_source = "stored"
    elif (run.summary is not None and not run.config_attr("graphs", "int", 0)
          and "p50_ns" in attrs):
        # A captured graph hides its ops: the C++ side then splits the step by the roofs'
        # bounds, which a file without roofs cannot give.
        ops = run.summary.ops
        net = exposed_interconnect_from_ops(attr(attrs, "p50_ns", "number", where=where),
                                            ops["kind"].tolist(),
                                            ops["per_step_p50_ns"].tolist())
        net_source = "summary ops"
    else:
        net, net_source = math.nan, "none"
    return Exposure(comm, comm_source, net, net_source)


def classify_step(compute_ns: float, comm_unhidden_ns: float, p2p_unhidden_ns: float,
                  idle_ns: float) -> str:
    """The part that takes most of the step: 'compute', 'comm', 'p2p' or 'idle' (gaps between
    ops: launch and synchronisation overhead, or waiting for another rank)."""
    parts = (compute_ns, comm_unhidden_ns, p2p_unhidden_ns, idle_ns)
    return ("compute", "comm", "p2p", "idle")[int(np.argmax(parts))]


def step_breakdown(timelines: Mapping[int, np.ndarray], warmup: bool = False) -> np.ndarray:
    """Per iteration, on the rank with the longest span (the one that sets the step time):
    its span split into compute, comm and p2p not hidden under compute (in the instrumented
    timelines: not the stored exposed communication, see exposure()) and idle time, and the
    critical lane (classify_step). A structured array of BREAKDOWN_DTYPE."""
    best: Dict[int, Tuple[int, Tuple[float, ...]]] = {}
    for rank in sorted(timelines):
        for it, rows in _by_iteration(timed_rows(timelines[rank], warmup)):
            parts = _breakdown(rows)
            if it not in best or parts[0] > best[it][1][0]:
                best[it] = (rank, parts)
    out = np.empty(len(best), dtype=BREAKDOWN_DTYPE)
    for i, it in enumerate(sorted(best)):
        rank, parts = best[it]
        out[i] = (it, rank, *parts, classify_step(*parts[1:]))
    return out


def compare_op_p50(base: Mapping[str, float], other: Mapping[str, float]) -> np.ndarray:
    """Per-op p50 of two runs side by side: fields name, base_p50_ns, other_p50_ns and
    ratio = other / base (> 1: slower in `other`). Ops of one run only get NaN."""
    names = list(base) + [n for n in other if n not in base]
    width = max([len(n) for n in names] + [1])
    out = np.empty(len(names), dtype=[("name", f"U{width}"), ("base_p50_ns", np.float64),
                                      ("other_p50_ns", np.float64), ("ratio", np.float64)])
    for i, name in enumerate(names):
        a = float(base.get(name, np.nan))
        b = float(other.get(name, np.nan))
        out[i] = (name, a, b, b / a if a > 0 else np.nan)
    return out


# ---- pipeline schedules (train phase, prefill with --schedule) ----

#: What an op is in a pipeline schedule: forward, the backward's input gradient (B), its weight
#: gradient (W), a pipeline transfer, or an op of the stage as a whole.
PIPELINE_ROLES = ("forward", "backward_input", "backward_weight", "p2p", "stage")
#: The stage's own ops (docs/SCHEMA.md, /ops): gradient zeroing, data-parallel reduction, the
#: SGD step and the end-of-iteration flush.
STAGE_OPS = ("grad_zero", "dp_allreduce", "dp_reducescatter", "sgd_update", "pp_flush")

#: Rows of schedule_actions(): one action of a rank, from its first op to its last.
ACTION_DTYPE = np.dtype([
    ("rank", np.int32), ("iteration", np.int32), ("microbatch", np.int32), ("phase", "U8"),
    ("t_start_ns", np.int64), ("t_end_ns", np.int64), ("ops", np.int32),
])


def pipeline_role(name: str, kind: str) -> str:
    """The role of op `name` of kind `kind`: p2p ops (`pp_exchange`, `pp_wait`, and the
    unscheduled stage loop's `pp_send`/`pp_recv`), the stage's own ops, `*_wgrad` (backward_weight),
    `*_dgrad` and `*_bwd` (backward_input: GEMM input gradients, the other backward ops and the
    all-reduces of input gradients), else forward."""
    if kind == "p2p":
        return "p2p"
    if name in STAGE_OPS:
        return "stage"
    if name.endswith("_wgrad"):
        return "backward_weight"
    if name.endswith(("_dgrad", "_bwd")):
        return "backward_input"
    return "forward"


def op_roles(op_names: Sequence[str], op_kinds: Sequence[str]) -> np.ndarray:
    """pipeline_role() of every op, indexed by op id."""
    return np.array([pipeline_role(str(n), str(k)) for n, k in zip(op_names, op_kinds)],
                    dtype=object)


def schedule_actions(timelines: Mapping[int, np.ndarray], roles: np.ndarray,
                     split_backward: bool = False) -> np.ndarray:
    """The actions of each rank (ACTION_DTYPE): maximal runs of its compute-lane ops of one
    iteration, one microbatch and one phase, in time order, that no p2p op or compute-lane
    stage op interrupts. Phases: "forward" and "backward" (B and W ops together: a fused
    backward interleaves them layer by layer), or with `split_backward` (zb-h1, whose B and W
    are separate actions) "forward", "input" and "weight". Collective-lane ops (TP all-reduces,
    data-parallel buckets, the flush) neither join nor split them."""
    out: List[Tuple[Any, ...]] = []
    for rank in sorted(timelines):
        rows = timelines[rank]
        rows = rows[np.argsort(rows["t_start_ns"], kind="stable")]
        current: Optional[List[Any]] = None
        for row in rows:
            role = roles[int(row["op_id"])]
            lane = int(row["lane"])
            if role == "p2p" or (role == "stage" and lane == COMPUTE_LANE):
                current = None
                continue
            if role == "stage" or lane != COMPUTE_LANE:
                continue
            if role == "forward":
                phase = "forward"
            elif split_backward:
                phase = "input" if role == "backward_input" else "weight"
            else:
                phase = "backward"
            key = (int(row["iteration"]), int(row["microbatch"]), phase)
            if current is not None and tuple(current[1:4]) == key:
                current[5] = max(current[5], int(row["t_end_ns"]))
                current[6] += 1
                continue
            current = [rank, *key, int(row["t_start_ns"]), int(row["t_end_ns"]), 1]
            out.append(current)
    return np.array([tuple(a) for a in out], dtype=ACTION_DTYPE)


#: Rows of pipeline_stages(): the figures of one stage (docs/SCHEMA.md, /summary).
PIPELINE_DTYPE = np.dtype([
    ("stage", np.int64), ("bubble", np.float64), ("bubble_theory", np.float64),
    ("bubble_simulated", np.float64), ("p2p_exposed_ns", np.float64), ("dp_exposed_ns", np.float64),
    ("peak_activation_bytes", np.float64),
])


def pipeline_stages(attrs: Mapping[str, Any]) -> Optional[np.ndarray]:
    """The per-stage figures of a scheduled pipeline's summary attributes (stage<p>.* for
    p = 0, 1, ... while present), each with the schedule's theory bubble and its simulated one
    at the measured action times (NaN where the run has none); None for a summary
    without them (not a train or scheduled run, or a file written before them)."""
    if "bubble_theory" not in attrs or "stage0.bubble" not in attrs:
        return None
    def number(key: str, *default: float) -> float:
        return attr(attrs, key, "number", *default, where="/summary")

    rows = []
    p = 0
    while f"stage{p}.bubble" in attrs:
        key = f"stage{p}."
        rows.append((p, number(key + "bubble"), number("bubble_theory"),
                     number("bubble_simulated", np.nan), number(key + "p2p_exposed_ns"),
                     number(key + "dp_exposed_ns"), number(key + "peak_activation_bytes")))
        p += 1
    return np.array(rows, dtype=PIPELINE_DTYPE)


# ---- ridgeline plane (Checconi, Tithi and Petrini 2022, arXiv:2209.01368) ----

#: The ceiling classes of the attribution, in the order the C++ side numbers them.
CEILINGS = ("compute", "hbm", "interconnect", "launch")

#: Rows of ridgeline_points(): x = FLOP per HBM byte, y = FLOP per interconnect byte (+inf without
#: interconnect bytes, NaN without FLOPs); `what` is "op" or "step"; time_ns the op's p50 or the
#: step's p50.
RIDGELINE_DTYPE = np.dtype([
    ("name", "U64"), ("what", "U4"), ("x", np.float64), ("y", np.float64),
    ("flops", np.float64), ("hbm_bytes", np.float64), ("comm_bytes", np.float64),
    ("time_ns", np.float64), ("ceiling", "U12"),
])


def intensity(flops: float, nbytes: float) -> float:
    """FLOPs per byte: +inf when no bytes move, NaN when there are no FLOPs (no place on the
    plane)."""
    if not flops > 0:
        return math.nan
    return math.inf if not nbytes > 0 else flops / nbytes


def ridgeline_points(summary_ops: Optional[np.ndarray], summary_attrs: Optional[Mapping[str, Any]],
                     step_name: str = "step") -> np.ndarray:
    """Points of the ridgeline plane: one per op of /summary/ops (flops, hbm_bytes, comm_bytes per
    instance, time p50_ns, its `ceiling`) then one for the step from the /summary attributes
    step_flops, step_hbm_bytes, step_comm_bytes, p50_ns and ceiling (left out when the summary
    has no step_flops). Ceilings absent from older files read "none"."""
    rows = []
    if summary_ops is not None:
        has_ceiling = "ceiling" in (summary_ops.dtype.names or ())
        for op in summary_ops:
            rows.append((op["name"], "op", op["flops"], op["hbm_bytes"], op["comm_bytes"],
                         op["p50_ns"], op["ceiling"] if has_ceiling else "none"))
    if summary_attrs is not None and "step_flops" in summary_attrs:
        a = summary_attrs
        rows.append((step_name, "step", a["step_flops"], a.get("step_hbm_bytes", 0.0),
                     a.get("step_comm_bytes", 0.0), a.get("p50_ns", math.nan),
                     a.get("ceiling", "none")))
    return _ridgeline_rows(rows)


def sweep_step_points(points: np.ndarray) -> np.ndarray:
    """The step of every ok point of /sweep/points as a ridgeline point named by its label."""
    ok = points[points["status"] == "ok"]
    return _ridgeline_rows([(p["label"], "step", p["step_flops"], p["step_hbm_bytes"],
                             p["step_comm_bytes"], p["step_p50_ns"], p["ceiling"]) for p in ok])


def _ridgeline_rows(rows: List[Tuple[Any, ...]]) -> np.ndarray:
    out = np.empty(len(rows), dtype=RIDGELINE_DTYPE)
    for i, (name, what, flops, hbm, comm, time_ns, ceiling) in enumerate(rows):
        flops, hbm, comm = float(flops), float(hbm), float(comm)
        out[i] = (name, what, intensity(flops, hbm), intensity(flops, comm), flops, hbm, comm,
                  float(time_ns), ceiling)
    return out


class RidgeLines(NamedTuple):
    """The roofs as lines of the plane. Bandwidths in bytes/s, peak in FLOP/s; net_bw and y_ridge
    are NaN when the roofs have no usable interconnect row (a one-rank job)."""

    dtype: str
    peak_flops: float
    hbm_bw: float
    net_bw: float
    net_source: str  # which /roofs/interconnect row gave net_bw, in words

    @property
    def x_ridge(self) -> float:
        """FLOP per HBM byte at which compute time equals HBM time."""
        return self.peak_flops / self.hbm_bw

    @property
    def y_ridge(self) -> float:
        """FLOP per interconnect byte at which compute time equals interconnect time."""
        return self.peak_flops / self.net_bw if self.net_bw > 0 else math.nan

    def diagonal(self, x: Any) -> Any:
        """y = x * hbm_bw / net_bw: where HBM time equals interconnect time."""
        return np.asarray(x, dtype=np.float64) * self.hbm_bw / self.net_bw

    def region(self, x: float, y: float) -> str:
        """The roof that bounds a point: the largest of F/peak, F/(x hbm_bw), F/(y net_bw)."""
        times = (1.0 / self.peak_flops, 1.0 / (x * self.hbm_bw) if x > 0 else math.inf,
                 1.0 / (y * self.net_bw) if y > 0 and self.net_bw > 0 else 0.0)
        return CEILINGS[int(np.argmax(times))]


def ridge_lines(roofs: Roofs, dtype: Optional[str] = None) -> RidgeLines:
    """The ridge lines of `roofs`: peak = the GEMM peak of `dtype` (default: the highest peak),
    hbm_bw = the copy bandwidth at the largest measured size, net_bw = floor_beta_gbps of the
    all_reduce roof within a node at the largest group size (ties: the roofs' transport, then
    the fastest). The floor beta is the lower envelope's bus bandwidth the attribution uses, so
    an op's interconnect intensity is measured against the same roof as its ceiling. ValueError
    if the roofs lack a GEMM peak or an HBM bandwidth."""
    peaks = roofs.peak_tflops()
    if not peaks:
        raise ValueError("the roofs have no GEMM peak")
    if dtype is None or dtype not in peaks:
        dtype = max(peaks, key=peaks.get)
    hbm = roofs.hbm_gbps()
    if not hbm > 0:
        raise ValueError("the roofs have no HBM copy bandwidth")
    net, source = math.nan, "no all_reduce interconnect roof"
    rows = roofs.interconnect_rows("all_reduce", "intra")
    rows = rows[np.isfinite(rows["floor_beta_gbps"]) & (rows["floor_beta_gbps"] > 0)]
    if rows.size:
        rows = rows[rows["group_size"] == rows["group_size"].max()]
        same = rows[rows["transport"] == roofs.transport]
        rows = same if same.size else rows
        row = rows[np.argmax(rows["floor_beta_gbps"])]
        net = float(row["floor_beta_gbps"]) * 1e9
        source = (f"all_reduce over {int(row['group_size'])} ranks within a node "
                  f"({row['transport']}): "
                  f"floor beta {float(row['floor_beta_gbps']):.4g} GB/s")
    return RidgeLines(dtype, peaks[dtype] * 1e12, hbm * 1e9, net, source)
