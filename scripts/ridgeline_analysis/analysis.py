"""Pure functions on timeline arrays (the /ranks/<r>/timeline compound rows): durations, per-op
percentiles, step times, exposed communication and the lane that bounds each step. No I/O.

`timelines` is always a mapping rank -> structured array as reader.load() returns it.
Percentiles interpolate linearly (numpy's default), as the C++ summary does, so the results
here reproduce /summary exactly.
"""
from __future__ import annotations

from typing import Dict, Iterable, Mapping, Tuple

import numpy as np

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
