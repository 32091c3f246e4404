"""The checks of `ridgeline validate` (validate_run_file() in src/app/run_file_validate.cpp),
made in Python: reader.load() refuses a file with any problem, so that the analysis, plots and
exports only ever see files the binary itself would accept. The structure (groups, datasets, table
fields, attributes, enums) comes from the schema (schema.py, run_file_schema.json), as the C++
validator's does; the semantic checks (cross-dataset consistency, arithmetic) mirror
run_file_validate*.cpp and take their names from the schema too. As in C++, the results a file
holds (summaries, pipelines, collectives, roofs) are checked in validate_results.py; reading
and the generic checks are in validate_read.py.

problems(path) returns every problem as one line naming the object, in the order the C++
validator finds them (an unreadable object is one problem and never hides the others).
"""
from __future__ import annotations

import os
import stat
from typing import Any, Dict, List, Optional, Sequence

import h5py
import numpy as np

from . import schema

from .validate_read import (MAX_ROW_PROBLEMS, AttrKinds, Problem, _check_kinds, _dataset, _exists,
                            _group, _is_int, _number, _require, _require_attrs, _rows, _section,
                            _table, _text, attr_problem, column, read_attrs, read_table,
                            storage_problem, type_class)
from .validate_results import _collectives, _roof, _roofs, _summary

#: What other modules of the package use from here besides problems().
__all__ = ["SCHEMA_VERSION", "attr_problem", "problems", "storage_problem", "sweep_axes",
           "without_summary"]

SCHEMA_VERSION = schema.VERSION
ROOT_ATTRS = schema.required_attributes("root")
STACK_ATTRS = schema.required_attributes("stack")
#: The groups each file kind (root attribute `command`) must have; run files: "run".
GROUPS = schema.FILES
OP_KINDS = schema.ENUMS["op_kind"]
LANE_COUNT = 3
T = schema.TABLES
#: /ranks/<r>/timeline fields and their type class.
TIMELINE_FIELDS = tuple((f.name, f.value_class) for f in T["timeline"].fields)
#: The timeline's float fields: what an op instance moves or computes, finite and >= 0.
TIMELINE_AMOUNTS = tuple(f.name for f in T["timeline"].fields if f.value_class == "float")
#: Sweeps with repeats: each median of /sweep/points with its interval's fields.
SWEEP_MEDIANS = tuple((base, *schema.field_names("sweep_points", f"{base}_ns", f"{base}_lo_ns",
                                                 f"{base}_hi_ns"))
                      for base in ("step_p50", "compute", "hbm", "interconnect", "launch"))
#: A crossover's status (kCrossoverStatuses in src/app/sweep.hpp).
CROSSOVER_STATUSES = schema.ENUMS["crossover_status"]
#: As validate_contents() words a file whose job ended before it finished.
INCOMPLETE = ("incomplete: the job ended before it finished (complete = 0); what it holds is "
              "valid but partial")
#: Attributes whose type the schema gives, per group (see validate_read.AttrKinds).
ROOT_KINDS: AttrKinds = schema.typed_attributes("root")
CONFIG_KINDS: AttrKinds = schema.typed_attributes("config")
SWEEP_KINDS: AttrKinds = schema.typed_attributes("sweep")
POINT_KINDS: AttrKinds = schema.typed_attributes("point")
ROOFS_KINDS: AttrKinds = schema.typed_attributes("roofs")
#: The options a sweep may take as axes (kSweepAxes in src/app/sweep.hpp).
SWEEP_AXES = schema.ENUMS["sweep_axis"]
#: A sweep point's status when it has no summary: it failed, or an incomplete sweep had not run
#: it yet.
PENDING = "pending"


def problems(path: str, accept_incomplete: bool = False) -> List[str]:
    """Every problem of the file at `path`, as `ridgeline validate` would list them; empty for a
    valid file. A file whose job ended before it finished (root or /sweep attribute complete =
    0) is a problem unless `accept_incomplete` (what it holds is valid, but partial)."""
    if not os.path.exists(path):
        return [f"{path}: no such file"]
    kind = not_regular(path)
    if kind:
        # Opening a FIFO would block until something writes to it.
        return [f"{path}: is {kind}, not a regular file"]
    try:
        if not h5py.is_hdf5(path):
            return [f"{path}: not an HDF5 file"]
        with h5py.File(path, "r") as f:
            found: List[str] = []
            _contents(f, found, accept_incomplete)
            return found
    except Exception as e:  # an unreadable file: one line, never a traceback
        return [f"{path}: cannot read: {_text(e)}"]


def not_regular(path: str) -> str:
    """What `path` is when it exists but is not a regular file ("a directory", "a FIFO", "a
    device", "a socket"), as not_regular() in src/core/files.cpp words it; "" otherwise."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return ""
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


# ---- the checks, in the order of validate_contents() ----


def _contents(f: h5py.File, found: List[str], accept_incomplete: bool = False) -> None:
    root: Dict[str, Any] = {}

    def read_root() -> None:
        root.update(read_attrs(f, "/"))

    _section(found, read_root)
    _require_attrs(root, "/", ROOT_ATTRS, found)
    if "schema_version" in root:
        version = root["schema_version"]
        # Another major version may lay the file out differently: nothing else is checked.
        if not _is_int(version):
            found.append("/: schema_version is not an integer")
            return
        if version != SCHEMA_VERSION:
            found.append(f"/: schema_version {version} has major version {version}; this reader "
                         f"supports major version {SCHEMA_VERSION} only")
            return
    world_size = -1
    if "world_size" in root:
        if _is_int(root["world_size"]) and root["world_size"] >= 1:
            world_size = root["world_size"]
        else:
            found.append("/: world_size must be an integer >= 1")
    # A world_size the file does not hold would have the checks below loop over ranks that
    # are not there: it is held against /topology's length first.
    if world_size > 0:
        held = [world_size]

        def topology_ranks() -> None:
            held[0] = ranks_held(f, world_size)

        _section(found, topology_ranks)
        if held[0] != world_size:
            found.append(f"/: world_size {world_size} but /topology holds {held[0]} ranks")
            world_size = -1
    _check_kinds(root, "/", ROOT_KINDS, found)

    command = root.get("command")
    kind = command if command in GROUPS else "run"
    if kind == "collectives":
        _require_attrs(root, "/", schema.attributes_required_by("root", "collectives"), found)
    if not accept_incomplete:
        _incomplete(f, root, kind, found)
    present = set()
    for group in GROUPS[kind]:
        def require(group: str = group) -> None:
            if _require(f, group, "group", found):
                present.add(group)
        _section(found, require)
    if "/stack" in present:
        _section(found, lambda: _stack(f, found))
    if "/config" in present:
        _section(found, lambda: _config(f, "/config", found))
    if "/topology" in present:
        _section(found, lambda: _topology(f, world_size, found))
    op_count = [-1]

    def ops() -> None:
        op_count[0] = _ops(f, "/ops", found)

    if "/ops" in present:
        _section(found, ops)
    if "/ranks" in present:
        _section(found, lambda: _ranks(f, world_size, op_count[0], found))
    if "/summary" in present:
        _summary(f, "", found)
    if _exists(f, "/points"):
        _section(found, lambda: _points(f, world_size, found, root.get("predicted") == 1))
    if "/sweep" in present:
        _section(found, lambda: _sweep(f, found))
    if kind == "collectives":
        if "/collectives" in present:
            _section(found, lambda: _collectives(f, found))
        if "/roofs" in present:
            _section(found, lambda: _roof(f, found, envelope_required=False))
    elif _exists(f, "/roofs"):
        _section(found, lambda: _roofs(f, found))
    if _exists(f, "/roofs"):
        _section(found, lambda: _check_kinds(read_attrs(_group(f, "/roofs"), "/roofs"), "/roofs",
                                             ROOFS_KINDS, found))


def ranks_held(f: h5py.File, default: int) -> int:
    """How many ranks the file really holds: the length of /topology's first dataset (in the
    group's link order; its shape only, nothing read), `default` where it has no /topology or
    an empty one (ranks_held() in src/app/run_file_schema.hpp)."""
    if not _exists(f, "/topology"):
        return default
    group = _group(f, "/topology")
    for key in group:
        return _rows(_dataset(f, f"/topology/{key}"), f"/topology/{key}")
    return default


def _marked_incomplete(attrs: Dict[str, Any]) -> bool:
    """An integer attribute `complete` that is 0 (a job killed before its end wrote the file)."""
    value = attrs.get("complete")
    return _is_int(value) and value == 0


def _incomplete(f: h5py.File, root: Dict[str, Any], kind: str, found: List[str]) -> None:
    """The root, or a sweep file's /sweep, says the job ended before it finished."""
    if _marked_incomplete(root):
        found.append(f"/: {INCOMPLETE}")

    def sweep() -> None:
        if _marked_incomplete(read_attrs(_group(f, "/sweep"), "/sweep")):
            found.append(f"/sweep: {INCOMPLETE}")

    if kind == "sweep" and _exists(f, "/sweep"):
        _section(found, sweep)


def _config(f: h5py.File, path: str, found: List[str]) -> None:
    """A /config group (the file's or a point's): its attributes of a known kind."""
    _check_kinds(read_attrs(_group(f, path), path), path, CONFIG_KINDS, found)


def _stack(f: h5py.File, found: List[str]) -> None:
    stack = read_attrs(_group(f, "/stack"), "/stack")
    _require_attrs(stack, "/stack", STACK_ATTRS, found)
    # cuDNN's plans are recorded only beside the version of the cuDNN that chose them.
    if "cudnn_plans" in stack and "cudnn" not in stack:
        found.append("/stack: cudnn_plans without cudnn (the loaded cuDNN version)")
    _table(f, T["stack_env"].path, T["stack_env"], (), found)


def _topology(f: h5py.File, world_size: int, found: List[str]) -> None:
    group = _group(f, "/topology")
    for key in group:
        def one(key: str = key) -> None:
            path = f"/topology/{key}"
            dataset = _dataset(f, path)
            size = _rows(dataset, path)
            if type_class(dataset.dtype) is None:
                raise Problem(f"{path}: unsupported element type (not integer, float or string)")
            if world_size >= 0 and size != world_size:
                found.append(f"{path}: {size} values, expected world_size {world_size}")
        _section(found, one)


def _ops(f: h5py.File, path: str, found: List[str]) -> int:
    """The op table at `path`; returns the number of ops (the valid op_id range)."""
    table = _table(f, path, T["ops"], (), found)
    if table is None:
        return -1
    ids = column(table, "id", "int", path)
    kinds = column(table, "kind", "string", path)
    for i, (op_id, kind) in enumerate(zip(ids.tolist(), kinds.tolist())):
        if op_id != i:
            found.append(f"{path}: row {i}: id {op_id}, expected {i}")
        if kind not in OP_KINDS:
            found.append(f"{path}: row {i}: unknown kind '{kind}'")
    return int(ids.size)


def _timeline(f: h5py.File, path: str, op_count: int, found: List[str]) -> None:
    if not _require(f, path, "dataset", found):
        return
    dataset = _dataset(f, path)
    _rows(dataset, path)
    names = dataset.dtype.names or ()
    if not names:
        raise Problem(f"{path}: not a compound dataset")
    for name, kind in TIMELINE_FIELDS:
        if name not in names:
            raise Problem(f"{path}: field '{name}' missing")
        if type_class(dataset.dtype[name]) != kind:
            raise Problem(f"{path}: field '{name}' has the wrong type class")
    rows = dataset.fields(["op_id", "lane", "warmup", "t_start_ns", "t_end_ns",
                           *TIMELINE_AMOUNTS])[()]
    op_id = rows["op_id"].astype(np.int64)
    lane = rows["lane"].astype(np.int64)
    warmup = rows["warmup"].astype(np.int64)
    checks = [
        (op_id < 0) | ((op_id >= op_count) if op_count >= 0 else False),
        rows["t_start_ns"] < 0,
        rows["t_end_ns"] < rows["t_start_ns"],
        (lane < 0) | (lane >= LANE_COUNT),
        (warmup < 0) | (warmup > 1),
        *(~(np.isfinite(rows[name]) & (rows[name] >= 0)) for name in TIMELINE_AMOUNTS),
    ]
    total = int(sum(int(np.count_nonzero(c)) for c in checks))
    listed = 0
    for i in np.flatnonzero(np.logical_or.reduce(checks)).tolist():
        if listed >= MAX_ROW_PROBLEMS:
            break
        whats = []
        if checks[0][i]:
            upper = str(op_count) if op_count >= 0 else "?"
            whats.append(f"op_id {op_id[i]} outside [0, {upper})")
        if checks[1][i]:
            whats.append(f"t_start_ns {int(rows['t_start_ns'][i])} < 0")
        if checks[2][i]:
            whats.append("t_end_ns < t_start_ns")
        if checks[3][i]:
            whats.append(f"lane {lane[i]} not in {{0, 1, 2}}")
        if checks[4][i]:
            whats.append(f"warmup {warmup[i]} not in {{0, 1}}")
        for name, bad in zip(TIMELINE_AMOUNTS, checks[5:]):
            if bad[i]:
                whats.append(f"{name} {_number(float(rows[name][i]))}, expected a finite "
                             "value >= 0")
        for what in whats[:MAX_ROW_PROBLEMS - listed]:
            found.append(f"{path}: row {i}: {what}")
            listed += 1
    if total > MAX_ROW_PROBLEMS:
        found.append(f"{path}: {total - MAX_ROW_PROBLEMS} more row problems")


def _samples(f: h5py.File, path: str, found: List[str]) -> None:
    if not _exists(f, path):
        return
    _table(f, path, T["samples"], (), found)
    table = read_table(f, path)
    if "t_ns" not in table.dtype.names:
        return
    if type_class(table.dtype["t_ns"]) != "int":
        found.append(f"{path}: t_ns is not an integer field")
        return
    t = table["t_ns"]
    decreasing = np.flatnonzero(t[1:] < t[:-1])
    if decreasing.size:
        found.append(f"{path}: t_ns decreases at row {int(decreasing[0]) + 1}")


def _expected_ranks(children: Sequence[str], world_size: int, where: str,
                    found: List[str]) -> set:
    """The names "0" .. world_size-1 that `where` (a /ranks group with `children`) must hold,
    each missing one a problem. A world_size far beyond the groups the file holds is one
    problem, and only the groups held are expected: nothing is counted out to world_size."""
    if world_size > len(children) + MAX_ROW_PROBLEMS:
        found.append(f"{where}: {len(children)} groups, expected world_size {world_size} (one "
                     "per rank)")
        return {name for name in children if name.isdigit() and str(int(name)) == name
                and int(name) < world_size}
    expected = {str(r) for r in range(max(world_size, 0))}
    for name in sorted(expected):
        if name not in children:
            found.append(f"{where}/{name}: missing group")
    return expected


def linked_file_problem(f: h5py.File, group: str, name: str) -> Optional[str]:
    """The per-node layout: `group`/`name` behind an external link to a node file that is
    missing, or is not a regular file (opening a FIFO blocks), is named by that file
    (validate_links) and must not be opened; None for anything else."""
    node = f.get(group)
    link = node.get(name, getlink=True) if isinstance(node, h5py.Group) else None
    if not isinstance(link, h5py.ExternalLink):
        return None
    target = os.path.join(os.path.dirname(os.path.abspath(f.filename)), link.filename)
    if not os.path.exists(target):
        return f"{group}/{name}: the linked node file '{link.filename}' does not exist"
    kind = not_regular(target)
    if kind:
        return (f"{group}/{name}: the linked node file '{link.filename}' is {kind}, not a "
                "regular file")
    return None


def _ranks(f: h5py.File, world_size: int, op_count: int, found: List[str]) -> None:
    children = list(_group(f, "/ranks"))
    expected = _expected_ranks(children, world_size, "/ranks", found)
    for name in children:
        if world_size >= 0 and name not in expected:
            found.append(f"/ranks/{name}: unexpected (world_size is {world_size})")
            continue

        def one(name: str = name) -> None:
            problem = linked_file_problem(f, f"/ranks/{name}", "timeline")
            if problem is not None:
                found.append(problem)
                return
            _timeline(f, f"/ranks/{name}/timeline", op_count, found)
            if linked_file_problem(f, f"/ranks/{name}", "samples") is None:
                _samples(f, f"/ranks/{name}/samples", found)

        _section(found, one)


def _points(f: h5py.File, world_size: int, found: List[str],
            predicted_file: bool = False) -> None:
    """Every /points/<k>: its config; a summary as /summary's unless the point failed; where
    its ops were kept, the op table and a timeline per rank. A predicted point (attribute
    predicted = 1, on every point of a file whose root says predicted = 1) has a prediction
    table instead of a summary."""
    for k in _group(f, "/points"):
        base = f"/points/{k}"
        if _require(f, f"{base}/config", "group", found):
            _section(found, lambda base=base: _config(f, f"{base}/config", found))
        attrs = read_attrs(_group(f, base), base)
        _check_kinds(attrs, base, POINT_KINDS, found)
        failed = without_summary(attrs.get("status"))
        predicted = attrs.get("predicted") == 1
        if predicted_file and not predicted:
            found.append(f"{base}: a point of a predicted file lacks predicted = 1")
        if predicted:
            if _exists(f, f"{base}/summary"):
                found.append(f"{base}: a predicted point holds a measured summary")
            if not failed:
                _section(found, lambda base=base: _table(
                    f, f"{base}/prediction", T["prediction"], ("predicted",), found))
        elif not failed and _require(f, f"{base}/summary", "group", found):
            _summary(f, base, found)
        if not _exists(f, f"{base}/ops"):
            continue
        op_count = [-1]

        def ops(base: str = base) -> None:
            op_count[0] = _ops(f, f"{base}/ops", found)

        _section(found, ops)
        ranks = f"{base}/ranks"
        node = f[ranks] if _exists(f, ranks) else None
        held = list(node) if isinstance(node, h5py.Group) else []
        if world_size > len(held) + MAX_ROW_PROBLEMS:
            found.append(f"{ranks}: {len(held)} groups, expected world_size {world_size} (one "
                         "per rank)")
            continue
        for r in range(max(world_size, 0)):
            problem = linked_file_problem(f, f"{ranks}/{r}", "timeline")
            if problem is not None:
                found.append(problem)
                continue
            _section(found, lambda r=r, base=base: _timeline(
                f, f"{base}/ranks/{r}/timeline", op_count[0], found))


def _sweep(f: h5py.File, found: List[str]) -> None:
    """The point and crossover tables (with their repeats' fields where the sweep was measured
    with repeats: the attribute `repeats`), one /points group per row (validate_sweep())."""
    attrs = read_attrs(_group(f, "/sweep"), "/sweep")
    repeats, axes = schema.attr_names("sweep", "repeats", "axes")
    held = ("repeats",) if repeats in attrs else ()
    tables: Dict[str, Optional[np.ndarray]] = {}
    for spec in (T["sweep_points"], T["sweep_crossovers"]):
        def one(spec: schema.Table = spec) -> None:
            tables[spec.id] = _table(f, spec.path, spec, held, found)
        _section(found, one)
    points = T["sweep_points"].path
    if not _exists(f, points):
        return
    rows = read_table(f, points).size
    groups = len(_group(f, "/points")) if _exists(f, "/points") else 0
    if rows != groups:
        found.append(f"{points}: {rows} rows but {groups} groups under /points")
    _require_attrs(attrs, "/sweep", schema.required_attributes("sweep"), found)
    if axes in attrs:
        _sweep_axes(f, attrs[axes], found)
    _check_kinds(attrs, "/sweep", SWEEP_KINDS, found)
    if held:
        _section(found, lambda: _sweep_repeats(f, attrs, tables.get("sweep_points"),
                                               tables.get("sweep_crossovers"), found))


def _sweep_axes(f: h5py.File, axes: Any, found: List[str]) -> None:
    """The /sweep attribute `axes`: text naming sweep axes (SWEEP_AXES), each a field of
    /sweep/points."""
    if not isinstance(axes, str):
        found.append("/sweep: axes must be a string")
        return
    fields = read_table(f, "/sweep/points").dtype.names or ()
    for axis in sweep_axes(axes):
        if axis not in SWEEP_AXES:
            found.append(f"/sweep: axes names '{axis}', which is not a sweep axis")
        elif axis not in fields:
            found.append(f"/sweep: axes names '{axis}', which is not a field of /sweep/points")


def without_summary(status: Any) -> bool:
    """Whether a point of this status has no summary: it failed ("failed: <reason>"), or an
    incomplete sweep had not run it yet (PENDING)."""
    return isinstance(status, str) and (status.startswith("failed") or status == PENDING)


def sweep_axes(text: str) -> List[str]:
    """The /sweep attribute `axes` ("tp,batch") as a list of names."""
    return [a.strip() for a in text.split(",") if a.strip()]


def _sweep_repeats(f: h5py.File, attrs: Dict[str, Any], points: Optional[np.ndarray],
                   crossovers: Optional[np.ndarray], found: List[str]) -> None:
    """Every repeat in /sweep/repeats, each ok point's medians inside their 95 % intervals of
    finite times >= 0, and each crossover's status one of CROSSOVER_STATUSES; the points and
    crossovers only where their tables have every field (else they were reported)."""
    _require_attrs(attrs, "/sweep", schema.attributes_required_by("sweep", "repeats"), found)
    _section(found, lambda: _table(f, T["sweep_repeats"].path, T["sweep_repeats"], ("repeats",),
                                   found))
    if points is not None:
        status = column(points, "status", "string", "/sweep/points")
        ok = status == "ok"
        complete = not _marked_incomplete(attrs)
        for i in range(points.size):
            if ok[i] and points["repeats"][i] < 1:
                found.append(f"/sweep/points: row {i}: an ok point with no repeat")
            if status[i] == PENDING and complete:
                found.append(f"/sweep/points: row {i}: a point not run (pending) in a sweep "
                             "marked complete")
        for base, *names in SWEEP_MEDIANS:
            mid, lo, hi = (points[name].astype(float) for name in names)
            bad = ok & ~((lo >= 0) & (lo <= mid) & (mid <= hi) & np.isfinite(hi))
            for i in np.flatnonzero(bad):
                found.append(f"/sweep/points: row {i}: {base} must lie in its interval [lo, hi] "
                             f"of finite times >= 0, found {mid[i]:g} in [{lo[i]:g}, {hi[i]:g}]")
    if crossovers is not None and crossovers.size:
        for status in column(crossovers, "status", "string", "/sweep/crossovers"):
            if status not in CROSSOVER_STATUSES:
                found.append(f"/sweep/crossovers: unknown status '{status}'")
