"""Sweep analysis on /sweep/points tables: a sweep's scaling series along an axis, its crossovers
(where the interconnect becomes the step's ceiling, with the intervals that make one count as
found), the order of transports by measured bandwidth, and the join of several sweep files into
one. No I/O.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import schema
from .analysis import CEILINGS
from .reader import Run, Sweep, attr


# ---- scaling series of a sweep ----

#: Sweep axes whose values are integers (sorted numerically); the others sort as strings.
NUMERIC_AXES = ("tp", "batch", "seq", "context", "hidden", "ep")
#: Sweep axes whose values are shares, numbers from 0 to 1 (sorted numerically; NaN, a point
#: that is no mixed step, first): a mixed step's prefill share.
SHARE_AXES = ("prefill_share",)
#: Every axis a sweep can have, in the order the C++ side lists them (the schema's sweep_axis).
SWEEP_AXES = tuple(schema.ENUMS["sweep_axis"])


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
    """Numbers for the numeric and share axes (a share's NaN first), strings for the others."""
    if axis in SHARE_AXES:
        return (not math.isnan(float(value)), 0.0 if math.isnan(float(value)) else float(value))
    return float(value) if axis in NUMERIC_AXES else str(value)


def share_text(value: Any) -> str:
    """A share as the C++ side writes it (share_text()): to 1e-6, halves up, without trailing
    zeros ("0.25", "1"); "" for NaN (a point that is no mixed step)."""
    value = float(value)
    if math.isnan(value):
        return ""
    units = math.floor(value * 1e6 + 0.5)
    whole, fraction = divmod(units, 10**6)
    return f"{whole}.{fraction:06d}".rstrip("0").rstrip(".")


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
        keys = [axis_sort_key(axis, v) for v in rows[axis]]
        rows = rows[sorted(range(len(keys)), key=keys.__getitem__)]  # stable
        fixed = {a: axis_text(a, rows[0][a]) if a in SHARE_AXES else _value_text(rows[0][a])
                 for a in others}
        mine = [i for i, f in enumerate(fixed_of) if all(f.get(a) == v for a, v in fixed.items())]
        out.append(ScalingGroup(fixed, rows, crossovers[mine]))
    values = sorted({v.item() if isinstance(v, np.generic) else v for v in ok[axis]},
                    key=lambda v: axis_sort_key(axis, v))
    return Scaling(axis, axis in NUMERIC_AXES or axis in SHARE_AXES, values, out, crossovers)


# ---- crossovers (as src/app/sweep_analysis.cpp find_crossovers) ----

#: Fields of find_crossovers(), as /sweep/crossovers (string widths follow the contents).
CROSSOVER_FIELDS = ("axis", "fixed", "kind", "predicted", "before_value", "at_value",
                    "before_point", "at_point", "rising_ns", "falling_ns", "note", "status",
                    "rising_lo_ns", "rising_hi_ns", "falling_lo_ns", "falling_hi_ns")

#: How far a crossover is established (the C++ kCrossoverStatuses): found beyond both points'
#: intervals, within noise, measured once, predicted, or interconnect-bound from the first point.
CROSSOVER_STATUSES = ("found", "within noise", "unrepeated", "predicted", "from the first point")

#: An axis's order where it is not the text order: {"transport": {value: GB/s}}, fastest first.
AxisOrder = Dict[str, Dict[str, float]]


def axis_text(axis: str, value: Any) -> str:
    """An axis value as the C++ side writes it in `fixed`, `label` and the crossovers' values:
    integers for the numeric axes, shares as share_text(), the text for the others."""
    value = value.item() if isinstance(value, np.generic) else value
    if axis in SHARE_AXES:
        return share_text(value)
    return str(int(value)) if axis in NUMERIC_AXES else str(value)


def _describe(row: np.void, axes: Sequence[str], skip: str) -> str:
    """"a=1 b=2" over `axes` except `skip` (the C++ describe())."""
    return " ".join(f"{a}={axis_text(a, row[a])}" for a in axes if a != skip)


def _interval_text(median_ns: float, lo_ns: float, hi_ns: float) -> str:
    # The C++ "%.2f us [%.2f, %.2f]" of microseconds.
    return f"{median_ns / 1e3:.2f} us [{lo_ns / 1e3:.2f}, {hi_ns / 1e3:.2f}]"


def _crossover_table(rows: List[Tuple[Any, ...]]) -> np.ndarray:
    def width(i: int) -> int:
        return max([len(str(r[i])) for r in rows] + [1])

    text = {name: f"U{width(i)}" for i, name in enumerate(CROSSOVER_FIELDS)}
    numbers = ("rising_ns", "falling_ns", "rising_lo_ns", "rising_hi_ns", "falling_lo_ns",
               "falling_hi_ns")
    kinds = {"predicted": "<i8", "before_point": "<i8", "at_point": "<i8",
             **{name: "<f8" for name in numbers}}
    dtype = [(name, kinds.get(name, text[name])) for name in CROSSOVER_FIELDS]
    return np.array(rows, dtype=dtype)


def class_interval(row: np.void, ceiling: str) -> Tuple[float, float, float]:
    """(median, lo, hi) of one ceiling class's time at a /sweep/points row: its 95 % interval
    where the file has one (--repeats), else the value itself."""
    value = float(row[f"{ceiling}_ns"])
    names = row.dtype.names
    lo = float(row[f"{ceiling}_lo_ns"]) if f"{ceiling}_lo_ns" in names else value
    hi = float(row[f"{ceiling}_hi_ns"]) if f"{ceiling}_hi_ns" in names else value
    return value, lo, hi


def _apart(a: Tuple[float, float, float], b: Tuple[float, float, float]) -> bool:
    return a[1] > b[2] or b[1] > a[2]


def _repeats(row: np.void) -> int:
    return int(row["repeats"]) if "repeats" in row.dtype.names else 1


def axis_order_key(axis: str, value: Any, order: Optional[AxisOrder] = None) -> Any:
    """The C++ order of an axis's values: numbers numerically; where `order` ranks the axis
    (the transport by measured bandwidth), ranked values first, fastest link first, then the
    rest; text order otherwise and between equals."""
    if axis in NUMERIC_AXES:
        return (0, float(value), "")
    if axis in SHARE_AXES:
        return (0, float(value), "") if not math.isnan(float(value)) else (-1, 0.0, "")
    ranks = (order or {}).get(axis)
    if ranks is None:
        return (0, 0.0, str(value))
    text = str(value)
    return (0, -ranks[text], text) if text in ranks else (1, 0.0, text)


def find_crossovers(points: np.ndarray, axes: Sequence[str],
                    order: Optional[AxisOrder] = None) -> np.ndarray:
    """Measured crossovers among the ok rows of a /sweep/points table, by the rule of the C++
    find_crossovers (src/app/sweep_analysis.cpp), as a table with the /sweep/crossovers fields
    (CROSSOVER_FIELDS; predicted always 0).

    Along each axis of `axes`, in turn: the ok rows are grouped by the values of every other
    axis (`fixed`, "a=1 b=2"; groups in the text order of `fixed`), each group ordered by
    axis_order_key() (numerically for tp, batch, seq, context and hidden; a text axis by `order`
    where given, else by its text). Between each point and the next whose ceilings differ, with
    both ceilings one of the four classes and the new one not launch: the first step onto
    `interconnect` in the group that is not within noise is a crossover of kind "interconnect"
    (steps within noise before it are listed too), and every switch between `hbm` and `compute`
    one of the new class's kind; anything else (e.g. from interconnect back to hbm) is none.
    rising_ns is the new class's time at the later point, falling_ns the old class's time
    there, each with its interval. The status is "found" where the two classes' intervals are
    apart at both points, "within noise" where they overlap at one of them, "unrepeated" where a
    point has fewer than two repeats."""
    out: List[Tuple[Any, ...]] = []
    ok = points[points["status"] == "ok"]
    for axis in axes:
        groups: Dict[str, List[np.void]] = {}
        for row in ok:
            groups.setdefault(_describe(row, axes, axis), []).append(row)
        for fixed in sorted(groups):
            line = sorted(groups[fixed], key=lambda r: axis_order_key(axis, r[axis], order))
            interconnect_found = False
            for before, at in zip(line, line[1:]):
                if before["ceiling"] == at["ceiling"]:
                    continue
                old, new = str(before["ceiling"]), str(at["ceiling"])
                if old not in CEILINGS or new not in CEILINGS or new == "launch":
                    continue
                interconnect = new == "interconnect"
                memory_compute = {old, new} == {"hbm", "compute"}
                if not (interconnect or memory_compute) or (interconnect and interconnect_found):
                    continue
                rising, falling = class_interval(at, new), class_interval(at, old)
                before_old, before_new = class_interval(before, old), class_interval(before, new)
                held = _apart(rising, falling) and _apart(before_old, before_new)
                status = ("unrepeated" if min(_repeats(before), _repeats(at)) < 2
                          else "found" if held else "within noise")
                interconnect_found = interconnect_found or (interconnect and
                                                            status != "within noise")
                at_value, before_value = axis_text(axis, at[axis]), axis_text(axis, before[axis])
                note = (f"{new} {_interval_text(*rising)} vs {old} {_interval_text(*falling)} at "
                        f"{axis}={at_value}; {old} {_interval_text(*before_old)} vs {new} "
                        f"{_interval_text(*before_new)} at {axis}={before_value}")
                out.append((axis, fixed, new, 0, before_value, at_value, int(before["point"]),
                            int(at["point"]), rising[0], falling[0], note, status, rising[1],
                            rising[2], falling[1], falling[2]))
    return _crossover_table(out)


def transport_order(runs: Sequence[Run]) -> AxisOrder:
    """{"transport": {value: GB/s}} from each run's roofs: the all-reduce roof's fitted bus
    bandwidth at the largest group measured within a node (as the C++ interconnect_gbps()); a
    run without one ranks nothing. The first run of a transport gives its figure."""
    ranks: Dict[str, float] = {}
    for run in runs:
        if run.sweep is None or not run.sweep.points.size or run.roofs is None:
            continue
        rows = run.roofs.interconnect_rows("all_reduce", "intra")
        if not rows.size:
            continue
        transport = str(run.sweep.points["transport"][0])
        ranks.setdefault(transport, float(rows["beta_gbps"][np.argmax(rows["group_size"])]))
    return {"transport": ranks} if ranks else {}


# ---- joining sweep files (one per transport, say) ----

#: /config keys that must be equal in every file of a join (what the step computes, and on
#: what backend): their values are those of each file's first point (resolved, e.g. backend
#: "host" for "auto"). A key a file lacks is not compared.
JOIN_CONFIG_KEYS = ("model", "layers", "heads", "kv_heads", "ffn_hidden", "mlp", "pp",
                    "microbatches", "attention", "backend")


class JoinError(ValueError):
    """Files that cannot be joined into one sweep: not all sweep files, or a configuration that
    differs outside the axes."""


def _distinct(axis: str, column: np.ndarray) -> List[str]:
    return sorted({axis_text(axis, v) for v in column.tolist()})


def join_axes(sweeps: Sequence[Sweep]) -> List[str]:
    """The axes of a join: every file's axes (first file first, each in its order), then, in
    the C++ order of the sweep options (tp, batch, ..., transport, dtype), every other option
    that is one value within each file but not the same value in all of them (e.g. transport,
    one file per transport; or batch, one file per batch). Phase is never added: it resolves
    seq and context, so it is an axis only where a file swept it (join_sweeps refuses files
    that differ in it otherwise)."""
    axes: List[str] = []
    for sweep in sweeps:
        axes += [a for a in sweep.axes if a not in axes]
    for option in SWEEP_AXES:
        # Files written before an axis existed lack its field.
        if option in axes or option == "phase" or any(
                option not in (s.points.dtype.names or ()) for s in sweeps):
            continue
        per_file = [_distinct(option, s.points[option]) for s in sweeps if s.points.size]
        if all(len(v) == 1 for v in per_file) and len({v[0] for v in per_file}) > 1:
            axes.append(option)
    return axes


def _join_dtype(tables: Sequence[np.ndarray], label_width: int, file_width: int) -> np.dtype:
    names = tables[0].dtype.names
    fields = []
    for name in names:
        kinds = [t.dtype[name] for t in tables]
        try:
            common = np.result_type(*kinds)
        except TypeError:
            raise JoinError(f"/sweep/points field {name!r} has different types in the files "
                            f"({', '.join(sorted({str(k) for k in kinds}))})")
        if name == "label":
            common = np.dtype(f"U{max(label_width, common.itemsize // 4, 1)}")
        fields.append((name, common))
    return np.dtype([*fields, ("file", f"U{max(file_width, 1)}"), ("file_point", "<i8")])


def join_sweeps(runs: Sequence[Run]) -> Sweep:
    """Several sweep files (reader.load() of each) as one sweep, as `ridgeline report A.h5 B.h5`
    joins them: the union of their /sweep/points rows, each tagged with its file (`file`: the
    path it was loaded from; `file_point`: its point number there), renumbered 0, 1, ... in file
    order (`point`) and labelled by the join's axes ("tp=2 transport=nvlink"); the axes are
    join_axes(); the crossovers are find_crossovers() of the joined rows along those axes
    (measured only: the files' predicted crossovers belong to their own grids). One file gives
    its own /sweep unchanged.

    Raises JoinError when a file is not a sweep file, when a /config key of JOIN_CONFIG_KEYS
    differs between files, when phase differs without being an axis of any file (see
    join_axes()), when
    the points tables have different fields, or when two points have the same value of every
    axis (nothing tells them apart)."""
    if not runs:
        raise JoinError("no files to join")
    for run in runs:
        if run.sweep is None:
            raise JoinError(f"{run.path}: not a sweep file (command {run.command or '?'}); only "
                            "the files of `ridgeline sweep` join")
    if len(runs) == 1:
        return runs[0].sweep
    sweeps = [run.sweep for run in runs]
    first = runs[0]
    for run in runs[1:]:
        if run.sweep.points.dtype.names != first.sweep.points.dtype.names:
            raise JoinError(f"{run.path} and {first.path}: /sweep/points have different fields "
                            "(written by different versions)")
        mine = run.points[0].config if run.points else run.config
        theirs = first.points[0].config if first.points else first.config
        for key in JOIN_CONFIG_KEYS:
            if key in mine and key in theirs and mine[key] != theirs[key]:
                raise JoinError(f"{run.path} and {first.path} differ in {key} ({mine[key]} vs "
                                f"{theirs[key]}); only sweeps of one configuration join")
    axes = join_axes(sweeps)
    phases = {str(v) for s in sweeps for v in s.points["phase"].tolist()}
    if "phase" not in axes and len(phases) > 1:
        raise JoinError(f"{', '.join(r.path for r in runs)}: the files' phases differ "
                        f"({', '.join(sorted(phases))}) and phase is none of their axes; join "
                        "sweeps of one phase, or sweep --phase")
    labels = [" ".join(f"{a}={axis_text(a, p[a])}" for a in axes)
              for s in sweeps for p in s.points]
    dtype = _join_dtype([s.points for s in sweeps], max([len(x) for x in labels] + [1]),
                        max(len(r.path) for r in runs))
    points = np.zeros(len(labels), dtype=dtype)
    i = 0
    seen: Dict[Tuple[str, ...], str] = {}
    for run in runs:
        for p in run.sweep.points:
            for name in p.dtype.names:
                points[name][i] = p[name]
            key = tuple(axis_text(a, p[a]) for a in axes)
            where = f"{run.path} point {int(p['point'])}"
            if key in seen:
                raise JoinError(f"{seen[key]} and {where} have the same value of every axis "
                                f"({labels[i]}); nothing tells them apart")
            seen[key] = where
            points["point"][i] = i
            points["label"][i] = labels[i]
            points["file"][i] = run.path
            points["file_point"][i] = int(p["point"])
            i += 1
    attrs = {"axes": ",".join(axes), "points": int(points.size),
             "failed": int((points["status"] != "ok").sum()),
             "complete": int(all(attr(s.attrs, "complete", "flag", 1, "/sweep")
                                 for s in sweeps)),
             "joined": len(runs)}
    return Sweep(attrs, points, find_crossovers(points, axes, transport_order(runs)),
                 files=[r.path for r in runs])
