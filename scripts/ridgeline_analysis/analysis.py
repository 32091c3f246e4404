"""Pure functions on timeline arrays (the /ranks/<r>/timeline compound rows): durations, per-op
percentiles, step times, exposed communication and the lane that bounds each step; and on the
attribution tables: the ridgeline plane's points and ridge lines, and a sweep's scaling series.
No I/O.

`timelines` is always a mapping rank -> structured array as reader.load() returns it.
Percentiles interpolate linearly (numpy's default), as the C++ summary does, so the results
here reproduce /summary exactly.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np

from .reader import Roofs, Sweep

LANES = ("compute", "comm", "p2p")
COMPUTE_LANE, COMM_LANE, P2P_LANE = 0, 1, 2

#: Fields of step_breakdown(); the four *_ns parts add up to span_ns.
BREAKDOWN_DTYPE = np.dtype([
    ("iteration", np.int32), ("rank", np.int32), ("span_ns", np.float64),
    ("compute_ns", np.float64), ("comm_exposed_ns", np.float64),
    ("p2p_exposed_ns", np.float64), ("idle_ns", np.float64), ("critical", "U7"),
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
    """(span, compute, comm exposed, p2p exposed, idle) of one rank's iteration. Each lane
    counts only where no lane before it (compute, then comm) is busy, so the parts add up."""
    span = float(rows["t_end_ns"].max() - rows["t_start_ns"].min())
    compute = covered_ns(*_lane_rows(rows, (COMPUTE_LANE,)))
    with_comm = covered_ns(*_lane_rows(rows, (COMPUTE_LANE, COMM_LANE)))
    busy = covered_ns(rows["t_start_ns"], rows["t_end_ns"])
    return span, compute, with_comm - compute, busy - with_comm, span - busy


def exposed_comm_by_rank_ns(timelines: Mapping[int, np.ndarray],
                            warmup: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """(iterations, exposed[rank index, iteration index]): time in the comm and p2p lanes not
    overlapped by any compute-lane interval of the same rank. Ranks in sorted order; NaN
    where a rank has no rows in an iteration."""
    iterations, _ = step_times_ns(timelines, warmup)
    column = {it: i for i, it in enumerate(iterations.tolist())}
    out = np.full((len(timelines), iterations.size), np.nan)
    for row, rank in enumerate(sorted(timelines)):
        for it, rows in _by_iteration(timed_rows(timelines[rank], warmup)):
            comm = _lane_rows(rows, (COMM_LANE, P2P_LANE))
            compute = _lane_rows(rows, (COMPUTE_LANE,))
            out[row, column[it]] = exposed_ns(comm[0], comm[1], compute[0], compute[1])
    return iterations, out


def exposed_comm_ns(timelines: Mapping[int, np.ndarray],
                    warmup: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """(iterations, exposed communication per step): the largest over ranks."""
    iterations, by_rank = exposed_comm_by_rank_ns(timelines, warmup)
    return iterations, np.nanmax(by_rank, axis=0) if by_rank.size else np.empty(0)


def classify_step(compute_ns: float, comm_exposed_ns: float, p2p_exposed_ns: float,
                  idle_ns: float) -> str:
    """The part that takes most of the step: 'compute', 'comm', 'p2p' or 'idle' (gaps between
    ops: launch and synchronisation overhead, or waiting for another rank)."""
    parts = (compute_ns, comm_exposed_ns, p2p_exposed_ns, idle_ns)
    return ("compute", "comm", "p2p", "idle")[int(np.argmax(parts))]


def step_breakdown(timelines: Mapping[int, np.ndarray], warmup: bool = False) -> np.ndarray:
    """Per iteration, on the rank with the longest span (the one that sets the step time):
    its span split into compute, exposed comm, exposed p2p and idle time, and the critical
    lane (classify_step). A structured array of BREAKDOWN_DTYPE."""
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
    all_reduce roof at the largest group size (ties: the roofs' transport, then the fastest).
    The floor beta is the lower envelope's bus bandwidth the attribution uses, so an op's
    interconnect intensity is measured against the same roof as its ceiling. ValueError if the
    roofs lack a GEMM peak or an HBM bandwidth."""
    peaks = roofs.peak_tflops()
    if not peaks:
        raise ValueError("the roofs have no GEMM peak")
    if dtype is None or dtype not in peaks:
        dtype = max(peaks, key=peaks.get)
    hbm = roofs.hbm_gbps()
    if not hbm > 0:
        raise ValueError("the roofs have no HBM copy bandwidth")
    net, source = math.nan, "no all_reduce interconnect roof"
    rows = roofs.interconnect_rows("all_reduce")
    rows = rows[np.isfinite(rows["floor_beta_gbps"]) & (rows["floor_beta_gbps"] > 0)]
    if rows.size:
        rows = rows[rows["group_size"] == rows["group_size"].max()]
        same = rows[rows["transport"] == roofs.transport]
        rows = same if same.size else rows
        row = rows[np.argmax(rows["floor_beta_gbps"])]
        net = float(row["floor_beta_gbps"]) * 1e9
        source = (f"all_reduce over {int(row['group_size'])} ranks ({row['transport']}): "
                  f"floor beta {float(row['floor_beta_gbps']):.4g} GB/s")
    return RidgeLines(dtype, peaks[dtype] * 1e12, hbm * 1e9, net, source)


# ---- scaling series of a sweep ----

#: Sweep axes whose values are numbers (sorted numerically); the others sort as strings.
NUMERIC_AXES = ("tp", "batch", "seq", "context", "hidden")
#: Every axis a sweep can have, in the order the C++ side lists them.
SWEEP_AXES = (*NUMERIC_AXES, "phase", "overlap", "transport", "dtype")


class ScalingGroup(NamedTuple):
    """The ok points that share the values of every other axis, sorted along the axis."""

    fixed: Dict[str, str]  # other axis -> value; empty for a one-axis sweep
    rows: np.ndarray       # /sweep/points rows: step_p50_ns, compute_ns, hbm_ns, ...
    crossovers: np.ndarray  # /sweep/crossovers rows of the axis for this group

    @property
    def name(self) -> str:
        """"batch=4 phase=decode", as the crossovers' `fixed` field; "" for a one-axis sweep."""
        return " ".join(f"{k}={v}" for k, v in self.fixed.items())


class Scaling(NamedTuple):
    axis: str
    numeric: bool
    values: List[Any]       # every ok value of the axis, sorted (positions of string axes)
    groups: List[ScalingGroup]
    crossovers: np.ndarray  # every /sweep/crossovers row of the axis


def axis_sort_key(axis: str, value: Any) -> Any:
    """Numbers for the numeric axes, strings for the others."""
    return float(value) if axis in NUMERIC_AXES else str(value)


def parse_fixed(fixed: str) -> Dict[str, str]:
    """"batch=64 context=1024" -> {"batch": "64", "context": "1024"}."""
    return dict(part.split("=", 1) for part in fixed.split() if "=" in part)


def _value_text(value: Any) -> str:
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value.item() if isinstance(value, np.generic) else value)


def scaling_series(sweep: Sweep, axis: str) -> Scaling:
    """The ok points of `sweep` along `axis`, grouped by the values of every other axis of the
    sweep (/sweep attribute `axes`), groups and points in sorted order, with the crossovers of
    the axis matched to their group by `fixed`. ValueError if `axis` is not one of the axes."""
    axes = sweep.axes
    if axis not in axes:
        raise ValueError(f"{axis!r} is not an axis of this sweep "
                         f"(axes: {', '.join(axes) or 'none'})")
    others = [a for a in axes if a != axis]
    ok = sweep.ok()
    groups: Dict[Tuple[Any, ...], List[int]] = {}
    for i, row in enumerate(ok):
        groups.setdefault(tuple(axis_sort_key(a, row[a]) for a in others), []).append(i)
    crossovers = sweep.crossovers[sweep.crossovers["axis"] == axis]
    fixed_of = [parse_fixed(str(c["fixed"])) for c in crossovers]
    out = []
    for key in sorted(groups):
        rows = ok[groups[key]]
        rows = rows[np.argsort([axis_sort_key(axis, v) for v in rows[axis]], kind="stable")]
        fixed = {a: _value_text(rows[0][a]) for a in others}
        mine = [i for i, f in enumerate(fixed_of) if all(f.get(a) == v for a, v in fixed.items())]
        out.append(ScalingGroup(fixed, rows, crossovers[mine]))
    values = sorted({v.item() if isinstance(v, np.generic) else v for v in ok[axis]},
                    key=lambda v: axis_sort_key(axis, v))
    return Scaling(axis, axis in NUMERIC_AXES, values, out, crossovers)
