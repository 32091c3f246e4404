"""Tidy tables of ridgeline files for pandas (one row per observation, one column per variable),
and their files: CSV, Parquet, JSON. Every row carries its run's configuration, transport, ceiling
times and software stack, so that rows of many files filter and group without the HDF5 layout.

    timeline_frame(run)  one row per timeline row of each rank: an op instance of an iteration
    points_frame(run)    one row per /sweep/points row (sweep files)
    repeats_frame(run)   one row per /sweep/repeats row (sweep files that repeat their points)
    serving_steps_frame(run)     one row per /serving/steps row (trace runs): a step run
    serving_requests_frame(run)  one row per /serving/requests row (trace runs): a request

Every table starts with `file` (the path given to load()) and `complete` (False for a file whose
job ended before it finished). pandas is imported on first use: the rest of the package works
without it.
"""
from __future__ import annotations

import json
from typing import IO, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from . import output
from .analysis import LANES
from .reader import Run, SchemaError, register_frames

#: The tables, by the name `export --table` takes, and the file formats.
TABLES = ("timeline", "points", "repeats", "serving_steps", "serving_requests")
FORMATS = ("csv", "parquet", "json")
#: /stack attributes naming the versions a result depends on (absent on the host backend).
STACK_KEYS = ("driver", "cuda_runtime", "cublaslt", "nccl")
#: /summary attributes of the step: its ceiling and its time by ceiling (files with /roofs).
STEP_KEYS = ("ceiling", "step_compute_ns", "step_hbm_ns", "step_interconnect_ns",
             "step_launch_ns", "exposed_interconnect_ns")
#: /sweep/points fields that say which point a /sweep/repeats row repeats.
POINT_KEYS = ("label", "tp", "batch", "seq", "context", "hidden", "phase", "overlap",
              "transport", "dtype")
#: /config attributes become columns `config.<key>`: several share a name with a column of the
#: tables (tp, batch, transport, check, ...) and may differ from it (a sweep's base options).
CONFIG_PREFIX = "config."
TIMELINE_COLUMNS = ("file", "complete", "point", "rank", "iteration", "warmup", "lane", "op_id",
                    "op", "kind", "layer", "microbatch", "t_start_ns", "t_end_ns",
                    "duration_ns", "flops", "hbm_bytes", "comm_bytes")


class MissingPackage(ImportError):
    """pandas, or pyarrow for Parquet, is not installed; the message is one line."""


def pandas():
    try:
        import pandas as pd
    except ImportError as e:
        raise MissingPackage("tables need pandas: python3 -m pip install pandas (Debian: apt-get "
                             "install python3-pandas)") from e
    return pd


def _runs(run: Run) -> List[Tuple[Optional[int], Run]]:
    """(k, /points/<k>) for a file with points (its root holds point 0 again), else
    (None, the file)."""
    if run.points:
        return list(enumerate(run.points))
    return [(None, run)]


def _gpu_names(run: Run) -> Optional[str]:
    """The GPU models of the job's ranks, distinct, in rank order, comma-separated."""
    names = run.topology.get("gpu_name")
    if names is None or names.size == 0:
        return None
    return ",".join(dict.fromkeys(names.tolist()))


def _provenance(run: Run) -> Dict[str, Any]:
    """What produced the numbers: the command and build, the GPUs, the library versions."""
    out = {"command": run.command, "git_sha": run.attrs.get("git_sha"),
           "created_utc": run.attrs.get("created_utc"), "gpu_name": _gpu_names(run)}
    out.update({key: run.stack.get(key) for key in STACK_KEYS})
    return out


def _config(run: Run) -> Dict[str, Any]:
    return {CONFIG_PREFIX + key: value for key, value in run.config.items()}


def _transport(run: Run) -> Optional[str]:
    """The run's --transport (/config), else the one /stack or /roofs names (files written
    before the option)."""
    roofs = run.roofs.attrs if run.roofs is not None else {}
    for source in (run.config, run.stack, roofs):
        if source.get("transport") not in (None, ""):
            return str(source["transport"])
    return None


def _step(run: Run) -> Dict[str, Any]:
    attrs = run.summary.attrs if run.summary is not None else {}
    return {key: attrs.get(key) for key in STEP_KEYS}


def _timeline_columns(run: Run) -> Dict[str, np.ndarray]:
    ranks = sorted(run.timelines)
    rows = np.concatenate([run.timelines[r] for r in ranks])
    ops = rows["op_id"]
    return {
        "rank": np.repeat(ranks, [run.timelines[r].size for r in ranks]),
        "iteration": rows["iteration"], "warmup": rows["warmup"].astype(bool),
        "lane": np.array(LANES, dtype=object)[rows["lane"]], "op_id": ops,
        "op": run.op_names()[ops], "kind": run.op_kinds()[ops], "layer": rows["layer"],
        "microbatch": rows["microbatch"], "t_start_ns": rows["t_start_ns"],
        "t_end_ns": rows["t_end_ns"], "duration_ns": rows["t_end_ns"] - rows["t_start_ns"],
        "flops": rows["flops"], "hbm_bytes": rows["hbm_bytes"],
        "comm_bytes": rows["comm_bytes"],
    }


def timeline_frame(run: Run):
    """One row per timeline row of every rank, warm-up iterations too (`warmup` True), of the
    file or of each of its points that kept timelines (`point` k; empty for a file without
    points). Times are ns since the rank's epoch. Then the run's transport, its step's ceiling
    and time by ceiling (/summary), provenance and `config.*`."""
    pd = pandas()
    parts = [pd.DataFrame({"file": run.path, "complete": run.complete, "point": k,
                           **_timeline_columns(one), "transport": _transport(one),
                           **_step(one), **_provenance(one), **_config(one)})
             for k, one in _runs(run) if one.timelines]
    return _finish(pd, parts, TIMELINE_COLUMNS)


def _sweep_rows(pd, run: Run, table: np.ndarray, *more: Dict[str, np.ndarray]):
    """The rows of a /sweep table, after `file` and `complete`; then the columns of `more`, the
    provenance and the `config.*` of each row's point (/points/<point>)."""
    index = pd.RangeIndex(table.size)
    columns = {"file": run.path, "complete": run.complete,
               **{name: table[name] for name in table.dtype.names}}
    for extra in more:
        columns.update(extra)
    context = [{**_provenance(p), **_config(p)}
               for p in (run.points[k] for k in table["point"].tolist())]
    return pd.concat([pd.DataFrame(columns, index=index), pd.DataFrame(context, index=index)],
                     axis=1)


def points_frame(run: Run):
    """One row per /sweep/points row, every field as the file holds it (the 95 % interval
    columns `*_lo_ns`, `*_hi_ns` and `repeats` where written); no rows unless a sweep file."""
    pd = pandas()
    parts = [] if run.sweep is None else [_sweep_rows(pd, run, run.sweep.points)]
    return _finish(pd, parts, ("file", "complete", "point"))


def _point_fields(run: Run, repeats: np.ndarray) -> Dict[str, np.ndarray]:
    """Each repeat's point's label and axis values, from /sweep/points."""
    points = run.sweep.points
    row_of = {int(p): i for i, p in enumerate(points["point"].tolist())}
    missing = sorted(set(repeats["point"].tolist()) - set(row_of))
    if missing:
        raise SchemaError(f"{run.path}: /sweep/repeats names point(s) "
                          f"{', '.join(map(str, missing))}, which /sweep/points lacks")
    rows = [row_of[p] for p in repeats["point"].tolist()]
    return {key: points[key][rows] for key in POINT_KEYS
            if key in points.dtype.names and key not in repeats.dtype.names}


def repeats_frame(run: Run):
    """One row per /sweep/repeats row (point, repeat, status, the step's p50 and p99 and its
    time by ceiling), with its point's label and axis values; no rows unless the file has the
    table (sweeps written before points were repeated lack it)."""
    pd = pandas()
    repeats = run.sweep.repeats if run.sweep is not None else None
    parts = ([] if repeats is None
             else [_sweep_rows(pd, run, repeats, _point_fields(run, repeats))])
    return _finish(pd, parts, ("file", "complete", "point", "repeat"))


def _serving_rows(pd, run: Run, name: str):
    """The rows of each /serving table `name` ("steps" or "requests") of the file or its points,
    after `file`, `complete` and `point`; then the provenance and the `config.*` of the run."""
    parts = []
    for k, one in _runs(run):
        table = getattr(one.serving, name) if one.serving is not None else None
        if table is None:
            continue
        index = pd.RangeIndex(table.size)
        columns = {"file": run.path, "complete": run.complete, "point": k,
                   **{field: table[field] for field in table.dtype.names}}
        context = {**_provenance(one), **_config(one)}
        parts.append(pd.concat([pd.DataFrame(columns, index=index),
                                pd.DataFrame([context] * table.size, index=index)], axis=1))
    return parts


def serving_steps_frame(run: Run):
    """One row per /serving/steps row of a trace run (a step the scheduler ran: its clock in s,
    measured time and mix), every field as the file holds it; no rows for other files."""
    pd = pandas()
    return _finish(pd, _serving_rows(pd, run, "steps"), ("file", "complete", "point", "step"))


def serving_requests_frame(run: Run):
    """One row per /serving/requests row of a trace run (a request replayed: its lengths, times
    and latencies in s; tpot_s empty for one output token); no rows for other files."""
    pd = pandas()
    return _finish(pd, _serving_rows(pd, run, "requests"),
                   ("file", "complete", "point", "request"))


def _finish(pd, parts: List[Any], leading: Sequence[str]):
    """The parts as one frame (columns some parts lack are empty on their rows), `point` an
    integer column that may be empty; with no parts, no rows and the `leading` columns."""
    # Empty parts would only set column types: pandas is to stop letting them.
    parts = [part for part in parts if len(part)]
    frame = (pd.concat(parts, ignore_index=True, sort=False) if parts
             else pd.DataFrame(columns=list(leading)))
    frame["point"] = frame["point"].astype("Int64")
    return frame


FRAMES: Dict[str, Callable[[Run], Any]] = {
    "timeline": timeline_frame, "points": points_frame, "repeats": repeats_frame,
    "serving_steps": serving_steps_frame, "serving_requests": serving_requests_frame}
register_frames(FRAMES)


def frame(runs: Iterable[Run], table: str):
    """One table (a name of TABLES) of several files, their rows in file order."""
    return _finish(pandas(), [FRAMES[table](run) for run in runs], ("file", "complete", "point"))


def _csv(frame, f: IO) -> None:
    frame.to_csv(f, index=False)


def _json(frame, f: IO) -> None:
    # One object per row, each float as Python prints it (the shortest text that reads back to
    # the same float; pandas' own JSON keeps 15 digits at most), a missing value as null.
    records = frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
    json.dump(records, f, allow_nan=False)


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError as e:
        raise MissingPackage("--format parquet needs pyarrow: python3 -m pip install pyarrow "
                             "(Debian 12 has no package of it); csv and json need only "
                             "pandas") from e


def _parquet(frame, f: IO) -> None:
    _require_pyarrow()
    # Parquet columns have one type; a /config key may be text in one joined file and a number
    # in another: such a column is written as text.
    mixed = [name for name in frame.columns if frame[name].dtype == object
             and _text_and_more(frame[name].dropna())]
    if mixed:
        frame = frame.copy()
        for name in mixed:
            frame[name] = frame[name].map(lambda v: v if v is None else str(v))
    frame.to_parquet(f, index=False, engine="pyarrow")


def _text_and_more(values) -> bool:
    types = {type(v) for v in values}
    return str in types and len(types) > 1


#: Each format's writer (given the open file) and whether it writes bytes.
WRITERS: Dict[str, Tuple[Callable[[Any, IO], None], bool]] = {
    "csv": (_csv, False), "parquet": (_parquet, True), "json": (_json, False)}


def write(frame, path: str, fmt: str) -> str:
    """Writes `frame` to `path` in format `fmt` (of FORMATS) through output.write_file(): into
    a temporary file beside it, renamed to `path` once complete and synced, so that a failure
    leaves `path` as it was (output.WriteError)."""
    writer, binary = WRITERS[fmt]
    if fmt == "parquet":
        _require_pyarrow()  # before anything is created
    return output.write_file(path, lambda f: writer(frame, f), binary=binary)
