"""Reads a ridgeline HDF5 file (schema version 1, docs/SCHEMA.md) into plain Python and numpy:
run files, sweep files (`ridgeline sweep`), roofs files and collectives files.

One reader for every tool in this package: analysis, plots and exporters take what it returns.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

import h5py
import numpy as np

from . import validate

#: The schema major version this reader understands; minor versions only add objects.
SUPPORTED_MAJOR = validate.SCHEMA_VERSION

#: /ranks/<r>/timeline rows (src/core/timeline.hpp TimelineRecord). lane: 0 compute, 1 comm,
#: 2 p2p; warmup: 1 for warm-up iterations; times in ns since the rank's epoch.
TIMELINE_DTYPE = np.dtype([
    ("op_id", "<i4"), ("layer", "<i4"), ("microbatch", "<i4"), ("iteration", "<i4"),
    ("lane", "u1"), ("warmup", "u1"), ("t_start_ns", "<i8"), ("t_end_ns", "<i8"),
    ("flops", "<f8"), ("hbm_bytes", "<f8"), ("comm_bytes", "<f8"),
])

# Groups every run (or every sweep point) has; a sweep file's root may lack them.
_RUN_GROUPS = ("stack", "config", "topology", "ops", "ranks", "summary")
# `ridgeline collectives` files have no timelines: their results are tables (see Run.tables).
_TABLE_FILE_GROUPS = ("stack", "config", "topology")
# What each file kind (root attribute `command`) must have besides; run files: _RUN_GROUPS.
_FILE_GROUPS = {
    "collectives": _TABLE_FILE_GROUPS,
    "roofs": (*_TABLE_FILE_GROUPS, "roofs"),
    "sweep": (*_TABLE_FILE_GROUPS, "sweep"),
}

#: The four /roofs tables with their fields (empty arrays of these stand in for absent tables).
ROOF_TABLE_DTYPES = {
    "gemm": np.dtype([("dtype", "U8"), ("label", "U16"), ("m", "<i8"), ("n", "<i8"),
                      ("k", "<i8"), ("reps", "<i8"), ("best_ns", "<f8"), ("p50_ns", "<f8"),
                      ("tflops", "<f8"), ("sm_clock_mhz", "<f8")]),
    "memory": np.dtype([("kind", "U8"), ("bytes", "<i8"), ("reps", "<i8"), ("best_ns", "<f8"),
                        ("p50_ns", "<f8"), ("gbps", "<f8"), ("sm_clock_mhz", "<f8")]),
    "launch": np.dtype([("kind", "U16"), ("launches", "<i8"), ("ns_per_launch", "<f8"),
                        ("sm_clock_mhz", "<f8")]),
    "interconnect": np.dtype([("collective", "U16"), ("group_size", "<i8"), ("dtype", "U8"),
                              ("transport", "U8"), ("alpha_us", "<f8"), ("beta_gbps", "<f8"),
                              ("floor_alpha_us", "<f8"), ("floor_beta_gbps", "<f8"),
                              ("fit_min_bytes", "<i8"), ("fit_max_bytes", "<i8"),
                              ("scope", "U8"), ("group_nodes", "<i8")]),
}

#: Values of /roofs/interconnect fields that files written before them lack: every row was
#: measured within one node.
INTERCONNECT_DEFAULTS = {"scope": "intra", "group_nodes": 1}


class SchemaError(Exception):
    """The file is not a ridgeline file this reader can interpret: `ridgeline validate` would
    reject it. The message is one line."""


_ABSENT = object()


def attr(attrs: Mapping[str, Any], key: str, kind: str, default: Any = _ABSENT,
         where: str = "") -> Any:
    """attrs[key] checked before use: of `kind` ("int", "count" (an integer >= 1), "flag" (0 or
    1), "number" (returned as a float) or "text"; validate.attr_problem()), `default` when
    absent (SchemaError without one). SchemaError, one line naming `where` (the file and
    group), for a value of another kind: a file load() read has passed these checks already,
    so this guards what validate does not list (and Run objects made in Python)."""
    if key not in attrs:
        if default is _ABSENT:
            raise SchemaError(f"{where}: missing attribute '{key}'")
        return default
    value = attrs[key]
    problem = validate.attr_problem(value, key, kind, where)
    if problem is not None:
        raise SchemaError(problem)
    return float(value) if kind == "number" else value


class Op(NamedTuple):
    """One row of /ops: timeline rows refer to it by `id`."""

    id: int
    name: str
    kind: str


@dataclass
class Summary:
    """/summary as the C++ side computed it when the run was written."""

    step_time_ns: np.ndarray
    warmup_step_time_ns: np.ndarray
    attrs: Dict[str, Any]
    ops: np.ndarray  # structured array, string fields decoded to str
    # --decode-steps: keys each timed iteration attended to, and the per-token time by context
    # range (empty without it).
    decode_context: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    decode_bins: Optional[np.ndarray] = None
    # An MoE model: per layer step in the order run, the busiest EP rank's rows over the mean
    # rank's (empty for a dense model and in files written before it).
    moe_rank_imbalance_per_step: np.ndarray = field(default_factory=lambda: np.empty(0))
    # A run across nodes: each node's compute time and span per step, and whether it is slow
    # (/summary/nodes; None on one node and in files written before it).
    nodes: Optional[np.ndarray] = None


@dataclass
class Serving:
    """/serving of a trace run (`run --phase mixed --trace` or `--trace-gen`): the group's
    attributes (the scheduler's limits, the latency percentiles in s, goodput, the check of its
    steps), a row per step run (`steps`: its clock, measured time, mix and error against the
    TP=1 model) and a row per request replayed (`requests`: its lengths, times and latencies in
    s; tpot_s NaN for one output token)."""

    attrs: Dict[str, Any]
    #: None only where a run that replayed no trace holds a /serving without them.
    steps: Optional[np.ndarray]
    requests: Optional[np.ndarray]


@dataclass
class Roofs:
    """/roofs: the machine's measured roofs (group attributes and the four tables, string fields
    decoded; an absent table is an empty array with its fields)."""

    attrs: Dict[str, Any]
    gemm: np.ndarray
    memory: np.ndarray
    launch: np.ndarray
    interconnect: np.ndarray  # may have no rows (a one-rank job)

    @property
    def backend(self) -> str:
        return attr(self.attrs, "backend", "text", "", "/roofs")

    @property
    def transport(self) -> str:
        return attr(self.attrs, "transport", "text", "", "/roofs")

    def peak_tflops(self) -> Dict[str, float]:
        """dtype -> peak GEMM TFLOP/s: the `gemm_peak_tflops.<dtype>` attributes, and for a dtype
        without one the best `tflops` of its /roofs/gemm rows."""
        peaks = {key.split(".", 1)[1]: attr(self.attrs, key, "number", where="/roofs")
                 for key in self.attrs if key.startswith("gemm_peak_tflops.")}
        for dtype in np.unique(self.gemm["dtype"]).tolist():
            if dtype not in peaks:
                peaks[dtype] = float(self.gemm["tflops"][self.gemm["dtype"] == dtype].max())
        return peaks

    def hbm_gbps(self) -> float:
        """HBM (host: DRAM) copy bandwidth in GB/s: the copy row with the largest bytes (caches make
        smaller working sets faster), else the `hbm_copy_gbps` attribute; NaN if neither."""
        copy = self.memory[self.memory["kind"] == "copy"]
        if copy.size:
            return float(copy["gbps"][np.argmax(copy["bytes"])])
        return attr(self.attrs, "hbm_copy_gbps", "number", np.nan, "/roofs")

    def launch_floor_ns(self) -> float:
        """Device-side cost of one kernel: graph_node where measured, else eager (as the C++
        Roofs::launch_floor_ns); NaN if neither."""
        for kind in ("graph_node", "eager"):
            rows = self.launch[self.launch["kind"] == kind]
            if rows.size:
                return float(rows["ns_per_launch"].min())
            if f"launch_{kind}_ns" in self.attrs:
                return attr(self.attrs, f"launch_{kind}_ns", "number", where="/roofs")
        return float("nan")

    def interconnect_rows(self, collective: Optional[str] = None,
                          scope: Optional[str] = None) -> np.ndarray:
        """/roofs/interconnect rows, all or those of one collective (e.g. "all_reduce") and of
        one scope ("intra": groups within a node; "inter": one rank per node; "hier": several
        nodes, several ranks on some)."""
        rows = self.interconnect
        if collective is not None:
            rows = rows[rows["collective"] == collective]
        if scope is not None:
            rows = rows[rows["scope"] == scope]
        return rows


@dataclass
class Sweep:
    """/sweep of a `ridgeline sweep` file: one /sweep/points row per point (failed ones too) and
    the crossovers the C++ side found (measured) or extrapolated (predicted == 1). Also the view
    sweeps.join_sweeps() makes of several files: then `files` names them, the points have the
    fields `file` and `file_point` besides, and the crossovers are computed in Python."""

    attrs: Dict[str, Any]
    points: np.ndarray
    crossovers: np.ndarray
    #: The files of a joined sweep, in join order; empty for one file's /sweep.
    files: List[str] = field(default_factory=list)
    #: /sweep/repeats, one row per repeat of each point (point, repeat, status, the step's p50
    #: and p99 and its time by ceiling); None in files written before points were repeated.
    repeats: Optional[np.ndarray] = None

    @property
    def axes(self) -> List[str]:
        """The options given more than one value, in the sweep's order (tp, batch, seq, ...)."""
        return validate.sweep_axes(attr(self.attrs, "axes", "text", "", "/sweep"))

    def ok(self) -> np.ndarray:
        """The /sweep/points rows whose status is "ok"."""
        return self.points[self.points["status"] == "ok"]


@dataclass
class Run:
    """One run: a whole file, or one point of a sweep file (then `points` is empty)."""

    path: str
    attrs: Dict[str, Any]
    stack: Dict[str, Any]
    env: Dict[str, str]
    config: Dict[str, Any]
    topology: Dict[str, np.ndarray]
    ops: List[Op]
    timelines: Dict[int, np.ndarray]
    summary: Summary | None
    points: List["Run"] = field(default_factory=list)
    #: Compound datasets outside the run layout by path, e.g. "/collectives/all_reduce" and
    #: "/roofs/interconnect" of `ridgeline collectives` files; string fields decoded.
    tables: Dict[str, np.ndarray] = field(default_factory=dict)
    #: NVML samples of each rank's GPU (/ranks/<r>/samples: t_ns on the top-level timelines'
    #: epoch, sm_clock_mhz, mem_clock_mhz, power_w, power_avg_w, temp_c, clock_event_reasons);
    #: empty on the host backend or with --sample-ms 0.
    samples: Dict[int, np.ndarray] = field(default_factory=dict)
    #: /roofs, or None when the file has none (`--roofs none`, older files). Sweep points share
    #: their file's.
    roofs: Optional[Roofs] = None
    #: /sweep of a sweep file (root attribute command == "sweep"), else None.
    sweep: Optional[Sweep] = None
    #: /serving of a trace run (its steps and requests), else None.
    serving: Optional[Serving] = None

    def root_attr(self, key: str, kind: str, default: Any = _ABSENT) -> Any:
        """A root (or point) attribute checked before use: attr()."""
        return attr(self.attrs, key, kind, default, f"{self.path}: /")

    def config_attr(self, key: str, kind: str, default: Any = _ABSENT) -> Any:
        """A /config attribute checked before use: attr()."""
        return attr(self.config, key, kind, default, f"{self.path}: /config")

    @property
    def command(self) -> str:
        return self.root_attr("command", "text", "")

    @property
    def status(self) -> str:
        """A sweep point's status ("ok" or "failed: <reason>"); "ok" for anything else."""
        return self.root_attr("status", "text", "ok")

    @property
    def label(self) -> str:
        """A sweep point's label (e.g. "tp=2 batch=64"); "" for anything else."""
        return self.root_attr("label", "text", "")

    @property
    def file_layout(self) -> str:
        """How the timelines were written: "single" (one file) or "per-node" (node files beside
        this one, reached through external links); files written before layouts existed: single."""
        return self.root_attr("file_layout", "text", "single")

    @property
    def world_size(self) -> int:
        return self.root_attr("world_size", "count", len(self.timelines))

    @property
    def complete(self) -> bool:
        """False when the job ended before it finished: the root or /sweep attribute `complete`
        is 0 (files rewritten as they go: sweeps, collectives). What such a file holds is
        valid but partial."""
        marks = [self.root_attr("complete", "flag", 1)]
        if self.sweep is not None:
            marks.append(attr(self.sweep.attrs, "complete", "flag", 1, f"{self.path}: /sweep"))
        return all(mark != 0 for mark in marks)

    def to_dataframe(self):
        """pandas DataFrame, one row per timeline row of every rank (of every point that kept
        its timelines): tidy.timeline_frame()."""
        return _frame("timeline", self)

    def points_dataframe(self):
        """pandas DataFrame, one row per /sweep/points row (sweep files): tidy.points_frame()."""
        return _frame("points", self)

    def repeats_dataframe(self):
        """pandas DataFrame, one row per /sweep/repeats row (sweep files with repeats):
        tidy.repeats_frame()."""
        return _frame("repeats", self)

    def serving_steps_dataframe(self):
        """pandas DataFrame, one row per /serving/steps row (trace runs):
        tidy.serving_steps_frame()."""
        return _frame("serving_steps", self)

    def serving_requests_dataframe(self):
        """pandas DataFrame, one row per /serving/requests row (trace runs):
        tidy.serving_requests_frame()."""
        return _frame("serving_requests", self)

    def op_names(self) -> np.ndarray:
        """Op names indexed by op id (for labelling timeline rows)."""
        return np.array([op.name for op in self.ops], dtype=object)

    def op_kinds(self) -> np.ndarray:
        """Op kinds indexed by op id."""
        return np.array([op.kind for op in self.ops], dtype=object)

    def summary_op_p50(self) -> Dict[str, float]:
        """op name -> p50_ns from /summary/ops (the input of analysis.compare_op_p50)."""
        if self.summary is None:
            return {}
        ops = self.summary.ops
        return dict(zip(ops["name"].tolist(), ops["p50_ns"].tolist()))

    def comm_op_ids(self) -> set:
        """Ids of ops whose instance time is a maximum over ranks (collectives and p2p)."""
        return {op.id for op in self.ops if op.kind in ("collective", "p2p")}


# The tables built from a Run, by name ("timeline", "points", ...): tidy registers its makers
# when the package is imported, so that the reader stays below what is built from it.
_FRAMES: Dict[str, Callable[["Run"], Any]] = {}


def register_frames(frames: Mapping[str, Callable[["Run"], Any]]) -> None:
    """Makes `frames` (table name -> maker of its pandas DataFrame from a Run) the makers of the
    Run's *_dataframe() methods."""
    _FRAMES.update(frames)


def _frame(name: str, run: "Run"):
    if name not in _FRAMES:
        raise RuntimeError(f"no maker of the {name} table: import ridgeline_analysis (its tidy "
                           "module registers them)")
    return _FRAMES[name](run)


def check(path: str, accept_incomplete: bool = False) -> None:
    """Raises SchemaError, with the first problem on one line, unless `ridgeline validate`
    would accept the file at `path` (the checks of validate.problems()); with
    `accept_incomplete`, a file whose job ended before it finished is accepted too."""
    found = validate.problems(path, accept_incomplete)
    if not found:
        return
    first = found[0] if found[0].startswith(path) else f"{path}: {found[0]}"
    more = f" (and {len(found) - 1} more: ridgeline validate {path})" if len(found) > 1 else ""
    raise SchemaError(first + more)


def load(path: str) -> Run:
    """Reads the whole file at `path`. Raises SchemaError (one line) for a file that `ridgeline
    validate` rejects: a missing file, another schema major version, a missing part, op ids
    outside /ops, step times that are not positive numbers, an attribute of the wrong kind, a
    dataset larger than the file stores, ... (see check()). A file whose job ended before it
    finished is read (Run.complete is False): what it holds is valid but partial."""
    check(path, accept_incomplete=True)
    with h5py.File(path, "r") as f:
        attrs = _attrs(f)
        command = attr(attrs, "command", "text", "", f"{path}: /")
        is_sweep = command == "sweep"
        required = _FILE_GROUPS.get(command, _RUN_GROUPS)
        world_size = attr(attrs, "world_size", "count", where=f"{path}: /")
        try:
            run = _read_run(f, path, attrs, required, world_size)
            run.tables = _tables(f)
            run.roofs = _roofs(f["roofs"]) if "roofs" in f else None
            run.sweep = _sweep(f["sweep"]) if is_sweep else None
            if "points" in f:
                run.points = [
                    _read_point(f["points"][key], f"{path}:/points/{key}", run, world_size)
                    for key in sorted(f["points"], key=_point_order)
                ]
        except (KeyError, ValueError, TypeError, OSError) as e:
            # A valid file never gets here; say which file it was rather than fail obscurely.
            raise SchemaError(f"{path}: malformed run file: {_one_line(e)}") from e
    return run


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _point_order(key: str) -> Tuple[int, int, str]:
    # Points are numbered 0, 1, ..., 10: numeric order, not text order.
    return (0, int(key), "") if key.isdigit() else (1, 0, key)


def _read_point(group: h5py.Group, where: str, parent: Run, world_size: int) -> Run:
    """A point (a strategy of a run, a point of a sweep): what it does not store itself (e.g.
    the stack) is the file's. A point needs a config, and a summary unless its status says it
    failed or it is predicted; its timelines may be left out (a sweep keeps them only on request)."""
    own = _attrs(group)
    attrs = {**parent.attrs, **own}
    failed = validate.without_summary(own.get("status"))
    # A predicted point (`ridgeline model`) measured nothing: it has no summary.
    predicted = own.get("predicted") == 1
    required: Tuple[str, ...] = ("config",) if failed or predicted else ("config", "summary")
    point = _read_run(group, where, attrs, required, world_size)
    for name in ("stack", "env", "config", "topology", "ops", "roofs"):
        if not getattr(point, name):
            setattr(point, name, getattr(parent, name))
    return point


def _read_run(group: h5py.Group, where: str, attrs: Dict[str, Any],
              required: Tuple[str, ...], world_size: int) -> Run:
    missing = [name for name in required if name not in group]
    if missing:
        raise SchemaError(f"{where}: missing group(s) {', '.join('/' + m for m in missing)}")
    stack = group.get("stack")
    return Run(
        path=where,
        attrs=attrs,
        stack=_attrs(stack) if stack is not None else {},
        env=_env(stack) if stack is not None and "env" in stack else {},
        config=_attrs(group["config"]) if "config" in group else {},
        topology=_topology(group["topology"]) if "topology" in group else {},
        ops=_ops(group["ops"]) if "ops" in group else [],
        timelines=(_timelines(group["ranks"], where, world_size)
                   if "ranks" in group and "ops" in group else {}),
        summary=_summary(group["summary"]) if "summary" in group else None,
        samples={int(k): _linked(g, "samples", where) for k, g in group["ranks"].items()
                 if g.get("samples", getlink=True) is not None} if "ranks" in group else {},
        serving=_serving(group["serving"]) if "serving" in group else None,
    )


def _read(dataset: h5py.Dataset) -> Any:
    """The whole dataset, once its shape is checked against the bytes the file stores for it
    (validate.storage_problem()): nothing is allocated by a size only the file's metadata
    claims."""
    problem = validate.storage_problem(dataset, dataset.name)
    if problem is not None:
        raise SchemaError(f"{dataset.file.filename}: {problem}")
    return dataset[()]


def _scalar(value: Any) -> Any:
    """numpy scalars and bytes as plain Python values, so attrs compare and print naturally."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        return value.item()
    return value


def _attrs(obj: h5py.HLObject) -> Dict[str, Any]:
    return {key: _scalar(value) for key, value in obj.attrs.items()}


def _decode_table(data: np.ndarray) -> np.ndarray:
    """A compound table with its variable-length string fields (bytes objects) turned into
    fixed-width str fields, so that string columns compare like numpy arrays. A table with no
    rows may be stored with a null dataspace: it reads as an empty array of its fields."""
    if isinstance(data, h5py.Empty):
        data = np.empty(0, dtype=data.dtype)
    fields = []
    columns = []
    for name in data.dtype.names:
        column = data[name]
        if column.dtype.kind in ("O", "S"):
            column = np.array([_scalar(v) for v in column], dtype=str)
        fields.append((name, column.dtype))
        columns.append(column)
    out = np.empty(len(data), dtype=fields)
    for (name, _), column in zip(fields, columns):
        out[name] = column
    return out


def _env(stack: h5py.Group) -> Dict[str, str]:
    table = _decode_table(_read(stack["env"]))
    return dict(zip(table["name"].tolist(), table["value"].tolist()))


def _topology(group: h5py.Group) -> Dict[str, np.ndarray]:
    out = {}
    for key, dataset in group.items():
        values = _read(dataset)
        if values.dtype.kind in ("O", "S"):
            values = np.array([_scalar(v) for v in values], dtype=str)
        out[key] = values
    return out


def _ops(dataset: h5py.Dataset) -> List[Op]:
    table = _decode_table(_read(dataset))
    ops = [Op(int(i), str(n), str(k)) for i, n, k in zip(table["id"], table["name"], table["kind"])]
    for row, op in enumerate(ops):
        if op.id != row:
            raise SchemaError(f"{dataset.name}: row {row} has id {op.id}; ids must be 0, 1, 2, ...")
    return ops


def _linked(group: h5py.Group, name: str, where: str) -> np.ndarray:
    """group[name] read whole; an external link (the per-node layout: node files beside the
    master file) whose file cannot be opened becomes a SchemaError naming that file."""
    try:
        return _read(group[name])
    except KeyError as e:
        link = group.get(name, getlink=True)
        if isinstance(link, h5py.ExternalLink):
            raise SchemaError(
                f"{where}: {group.name}/{name} is an external link to {link.path} in "
                f"{link.filename}, which cannot be opened (node files must sit beside the master "
                f"file, complete: `ridgeline validate` checks them)") from e
        raise


def _timelines(group: h5py.Group, where: str, world_size: int) -> Dict[int, np.ndarray]:
    """Ranks 0 .. world_size-1 (validated: each has a timeline with every field)."""
    if world_size > len(group):
        raise SchemaError(f"{where}: {len(group)} groups under /ranks, expected world_size "
                          f"{world_size}")
    out = {}
    for rank in range(world_size):
        key = str(rank)
        # A link is checked, not followed: a dangling external link is reported by _linked.
        if key not in group or group[key].get("timeline", getlink=True) is None:
            raise SchemaError(f"{where}: /ranks/{rank} has no timeline")
        out[rank] = _linked(group[key], "timeline", where)
    return out


def _tables(f: h5py.File) -> Dict[str, np.ndarray]:
    """Compound datasets outside the run layout and the sweep points, by absolute path."""
    out = {}
    skip = (*_RUN_GROUPS, "points", "serving")

    def visit(name: str, obj: h5py.HLObject) -> None:
        if (name.split("/")[0] not in skip and isinstance(obj, h5py.Dataset)
                and obj.dtype.names is not None):
            out["/" + name] = _decode_table(_read(obj))

    f.visititems(visit)
    return out


def _summary(group: h5py.Group) -> Summary:
    return Summary(
        step_time_ns=_read(group["step_time_ns"]) if "step_time_ns" in group else np.empty(0),
        warmup_step_time_ns=(_read(group["warmup_step_time_ns"])
                             if "warmup_step_time_ns" in group else np.empty(0)),
        attrs=_attrs(group),
        ops=_decode_table(_read(group["ops"])),
        decode_context=(_read(group["decode_context"]) if "decode_context" in group
                        else np.empty(0, np.int64)),
        decode_bins=_decode_table(_read(group["decode_bins"])) if "decode_bins" in group else None,
        moe_rank_imbalance_per_step=(_read(group["moe_rank_imbalance_per_step"])
                                     if "moe_rank_imbalance_per_step" in group else np.empty(0)),
        nodes=_decode_table(_read(group["nodes"])) if "nodes" in group else None,
    )


def _serving(group: h5py.Group) -> Serving:
    steps, requests = (_decode_table(_read(group[name])) if name in group else None
                       for name in ("steps", "requests"))
    return Serving(attrs=_attrs(group), steps=steps, requests=requests)


def _roofs(group: h5py.Group) -> Roofs:
    tables = {name: _decode_table(_read(group[name])) if name in group else np.empty(0, dtype)
              for name, dtype in ROOF_TABLE_DTYPES.items()}
    tables["interconnect"] = _with_defaults(tables["interconnect"], INTERCONNECT_DEFAULTS)
    return Roofs(attrs=_attrs(group), **tables)


def _with_defaults(table: np.ndarray, defaults: Mapping[str, Any]) -> np.ndarray:
    """`table` with each field of `defaults` it lacks added, every row holding the default."""
    missing = [(name, value) for name, value in defaults.items()
               if name not in (table.dtype.names or ())]
    if not missing:
        return table
    dtype = np.dtype(table.dtype.descr + [(name, ROOF_TABLE_DTYPES["interconnect"][name])
                                          for name, _ in missing])
    out = np.empty(table.shape, dtype)
    for name in table.dtype.names or ():
        out[name] = table[name]
    for name, value in missing:
        out[name] = value
    return out


def _sweep(group: h5py.Group) -> Sweep:
    return Sweep(attrs=_attrs(group), points=_decode_table(_read(group["points"])),
                 crossovers=_decode_table(_read(group["crossovers"])),
                 repeats=_decode_table(_read(group["repeats"])) if "repeats" in group else None)
