"""The checks of `ridgeline validate` (validate_run_file() in src/app/run_file_validate.cpp),
made in Python: reader.load() refuses a file with any problem, so that the analysis, plots and
exports only ever see files the binary itself would accept. docs/SCHEMA.md lists the checks; change
them here and in src/app/run_file_schema.hpp and run_file_validate*.cpp together.

problems(path) returns every problem as one line naming the object, in the order the C++
validator finds them (an unreadable object is one problem and never hides the others).
"""
from __future__ import annotations

import os
import re
import stat
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import h5py
import numpy as np

SCHEMA_VERSION = 1
ROOT_ATTRS = ("schema_version", "ridgeline_version", "git_sha", "created_utc", "argv",
              "world_size")
STACK_ATTRS = ("mpi_library", "hdf5", "build_type")
#: The groups each file kind (root attribute `command`) must have; run files: "run".
GROUPS = {
    "run": ("/stack", "/config", "/topology", "/ops", "/ranks", "/summary"),
    "collectives": ("/stack", "/config", "/topology", "/collectives", "/roofs"),
    "roofs": ("/stack", "/config", "/topology", "/roofs"),
    "sweep": ("/stack", "/config", "/topology", "/sweep", "/points"),
}
OP_KINDS = ("gemm", "attention", "norm", "elementwise", "collective", "p2p", "other")
LANE_COUNT = 3
#: /ranks/<r>/timeline fields and their type class.
TIMELINE_FIELDS = (("op_id", "int"), ("layer", "int"), ("microbatch", "int"),
                   ("iteration", "int"), ("lane", "int"), ("warmup", "int"),
                   ("t_start_ns", "int"), ("t_end_ns", "int"), ("flops", "float"),
                   ("hbm_bytes", "float"), ("comm_bytes", "float"))
#: The timeline's float fields: what an op instance moves or computes, finite and >= 0.
TIMELINE_AMOUNTS = ("flops", "hbm_bytes", "comm_bytes")
SAMPLE_FIELDS = ("t_ns", "sm_clock_mhz", "mem_clock_mhz", "power_w", "power_avg_w", "temp_c",
                 "clock_event_reasons")
STEP_ATTRS = ("count", "warmup_to_steady", "mean_ns", "min_ns", "max_ns", "p50_ns", "p95_ns",
              "p99_ns")
#: /summary/ops fields; the attribution ones were added within version 1 and may be absent.
AGGREGATE_TEXT = ("name", "kind", "lane", "ceiling")
AGGREGATE_NUMBERS = ("p50_ns", "mean_ns", "per_step_p50_ns", "share", "flops", "hbm_bytes",
                     "comm_bytes", "achieved_tflops", "achieved_gbps", "compute_bound_ns",
                     "hbm_bound_ns", "interconnect_bound_ns", "launch_bound_ns", "bound_ns",
                     "efficiency")
ATTRIBUTION_FIELDS = ("ceiling", "compute_bound_ns", "hbm_bound_ns", "interconnect_bound_ns",
                      "launch_bound_ns", "bound_ns", "efficiency")
#: The /summary output checksum (added within version 1): its algorithm and format.
CHECKSUM_ALGORITHM = "fnv1a64"
CHECKSUM_FORMAT = re.compile(r"[0-9a-f]{16}")
#: Collectives files: /collectives/<name> and <name>_samples_ns, /roofs/interconnect.
SAMPLES_SUFFIX = "_samples_ns"
RESULT_INTS = ("size_bytes", "count", "wrong", "iters")
RESULT_NUMBERS = ("time_mean_ns", "time_p50_ns", "time_p95_ns", "time_p99_ns", "time_min_ns",
                  "algbw_gbps", "busbw_gbps", "busbw_p50_gbps")
ROOF_PATH = "/roofs/interconnect"
ROOF_TEXT = ("collective", "dtype", "transport")
ROOF_INTS = ("group_size", "fit_min_bytes", "fit_max_bytes")
ROOF_NUMBERS = ("alpha_us", "beta_gbps")
ROOF_ENVELOPE = ("floor_alpha_us", "floor_beta_gbps")
#: (table, text fields, integer fields, number fields).
TableSpec = Tuple[str, Sequence[str], Sequence[str], Sequence[str]]
ROOF_TABLES: Tuple[TableSpec, ...] = (
    ("/roofs/gemm", ("dtype", "label"), ("m", "n", "k", "reps"),
     ("best_ns", "p50_ns", "tflops", "sm_clock_mhz")),
    ("/roofs/memory", ("kind",), ("bytes", "reps"), ("best_ns", "p50_ns", "gbps", "sm_clock_mhz")),
    ("/roofs/launch", ("kind",), ("launches",), ("ns_per_launch", "sm_clock_mhz")),
)
#: /points/<k>/prediction of a predicted point (`ridgeline model`): text and float fields.
PREDICTION_FIELDS = (("name", "kind", "ceiling", "interconnect_source"),
                     ("instances", "compute_ns", "hbm_ns", "interconnect_ns", "launch_ns",
                      "efficiency", "time_ns"))

SWEEP_TABLES: Tuple[TableSpec, ...] = (
    ("/sweep/points",
     ("status", "label", "phase", "overlap", "transport", "dtype", "ceiling", "check"),
     ("point", "tp", "batch", "seq", "context", "hidden"),
     ("step_p50_ns", "step_p99_ns", "compute_ns", "hbm_ns", "interconnect_ns", "launch_ns",
      "exposed_interconnect_ns", "step_flops", "step_hbm_bytes", "step_comm_bytes")),
    ("/sweep/crossovers", ("axis", "fixed", "kind", "before_value", "at_value", "note"),
     ("predicted", "before_point", "at_point"), ("rising_ns", "falling_ns")),
)
#: Sweeps measured with repeats (the /sweep attribute `repeats`; as kSweepRepeatTables in
#: src/app/run_file_schema.hpp): every repeat, each point's intervals, each crossover's status.
SWEEP_REPEAT_TABLES: Tuple[TableSpec, ...] = (
    ("/sweep/repeats", ("status", "ceiling"), ("point", "repeat"),
     ("step_p50_ns", "step_p99_ns", "compute_ns", "hbm_ns", "interconnect_ns", "launch_ns",
      "exposed_interconnect_ns")),
    ("/sweep/points", (), ("repeats",),
     ("step_p50_lo_ns", "step_p50_hi_ns", "compute_lo_ns", "compute_hi_ns", "hbm_lo_ns",
      "hbm_hi_ns", "interconnect_lo_ns", "interconnect_hi_ns", "launch_lo_ns", "launch_hi_ns")),
    ("/sweep/crossovers", ("status",), (),
     ("rising_lo_ns", "rising_hi_ns", "falling_lo_ns", "falling_hi_ns")),
)
#: A crossover's status (kCrossoverStatuses in src/app/sweep.hpp).
CROSSOVER_STATUSES = ("found", "within noise", "unrepeated", "predicted", "from the first point")
#: Scheduled pipelines (/config phase train, or a schedule): the summary's attributes, the
#: four figures of every stage p (stage<p>.<field>), and the ops a train run records
#: (models/layer_plan.hpp), besides those its configuration adds (tp, rotary, dp, sgd_lr).
PIPELINE_ATTRS = ("schedule", "microbatches", "recompute", "bubble_theory", "check_compares")
STAGE_FIELDS = ("bubble", "p2p_exposed_ns", "dp_exposed_ns", "peak_activation_bytes")
SCHEDULE_NAME = re.compile(r"gpipe|1f1b|zb-h1|interleaved:[1-9][0-9]{0,8}")
SCHEDULED_OPS = ("pp_exchange", "pp_flush")
TRAIN_OPS = ("fc2_dgrad", "fc2_wgrad", "activation_bwd", "fc1_dgrad", "fc1_wgrad", "norm2_bwd",
             "residual2_bwd", "proj_dgrad", "proj_wgrad", "attention_bwd", "qkv_dgrad",
             "qkv_wgrad", "norm1_bwd", "residual1_bwd", "grad_zero")
#: Problems listed one by one per timeline before the rest are only counted.
MAX_ROW_PROBLEMS = 10
#: A dataset whose data passes through a filter (compression) may hold this many times the bytes
#: it stores (deflate's own limit is about 1032); an unfiltered one holds what it stores.
MAX_EXPANSION = 1100
#: As validate_contents() words a file whose job ended before it finished.
INCOMPLETE = ("incomplete: the job ended before it finished (complete = 0); what it holds is "
              "valid but partial")

#: Attributes of a known kind, per group, checked in this order: "int" (an integer), "count" (an
#: integer >= 1), "flag" (the integer 0 or 1), "number" (an integer or a float) or "text". What
#: the package reads is here, so that a value of another kind is refused before anything uses it
#: (never read as a default). schema_version, world_size, the /sweep axes, the /summary
#: percentiles and a pipeline's attributes have checks of their own.
AttrKinds = Dict[str, str]
ROOT_KINDS: AttrKinds = {
    "ridgeline_version": "text", "git_sha": "text", "created_utc": "text", "argv": "text",
    "command": "text", "file_layout": "text", "check": "text", "complete": "flag",
    "predicted": "flag", "write_seconds": "number", "nodes": "count"}
#: /config: first the keys of kConfigKeys in src/app/run_file_validate.cpp, in its order (not ranged: 0
#: and -1 stand for "the default" in a sweep's base configuration), then those only the package
#: checks.
CONFIG_KINDS: AttrKinds = {
    **dict.fromkeys(("tp", "pp", "dp", "batch", "seq", "layers", "hidden", "heads", "kv_heads",
                     "ffn_hidden", "microbatches", "iters", "warmup", "context"), "int"),
    **dict.fromkeys(("phase", "dtype", "overlap", "backend", "transport"), "text"),
    **dict.fromkeys(("decode_steps", "seed", "graphs", "sequence_parallel", "dp_shard",
                     "keep_timelines", "repeats", "ranks_per_file", "sample_ms"), "int"),
    **dict.fromkeys(("timeout_s", "rope_theta", "norm_eps", "sgd_lr", "bucket_mb"), "number"),
    **dict.fromkeys(("model", "strategy", "schedule", "recompute", "attention", "check", "mlp",
                     "norm", "rotary", "sweep_slice"), "text")}
SUMMARY_KINDS: AttrKinds = {
    "count": "int", "warmup_to_steady": "int",
    **dict.fromkeys(("mean_ns", "min_ns", "max_ns", "exposed_comm_ns", "exposed_interconnect_ns",
                     "step_compute_ns", "step_hbm_ns", "step_interconnect_ns", "step_launch_ns",
                     "step_flops", "step_hbm_bytes", "step_comm_bytes"), "number"),
    **dict.fromkeys(("check", "ceiling", "bound", "overlap", "attribution"), "text")}
SWEEP_KINDS: AttrKinds = {"points": "int", "failed": "int", "repeats": "int", "complete": "flag",
                          "predicted": "flag", "interval": "text"}
#: The options a sweep may take as axes (kSweepAxes in src/app/sweep.hpp).
SWEEP_AXES = ("tp", "batch", "seq", "context", "hidden", "phase", "overlap", "transport", "dtype")
#: /summary/ops figures that must be finite and >= 0 (validate_summary), in its order: the first
#: of an op's that is not is its problem.
OP_FIGURES = ("p50_ns", "mean_ns", "per_step_p50_ns", "share", "flops", "hbm_bytes",
              "comm_bytes", "bound_ns", "efficiency")
#: A sweep point's status when it has no summary: it failed, or an incomplete sweep had not run
#: it yet.
PENDING = "pending"
POINT_KINDS: AttrKinds = {"status": "text", "label": "text", "predicted": "flag",
                          "repeats": "int"}
ROOFS_KINDS: AttrKinds = {"backend": "text", "transport": "text", "source": "text",
                          "hbm_read_gbps": "number", "hbm_write_gbps": "number",
                          "hbm_copy_gbps": "number", "launch_eager_ns": "number",
                          "launch_graph_node_ns": "number"}
#: Attribute names by prefix: /roofs gemm_peak_tflops.<dtype>.
ROOFS_PREFIX_KINDS: AttrKinds = {"gemm_peak_tflops.": "number"}


class Problem(Exception):
    """An object that cannot be read as the layout says: one problem, ending its section."""


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


# ---- reading, as the C++ h5 helpers read ----

def _text(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _section(found: List[str], checks: Callable[[], None]) -> None:
    """Runs one group of checks; an exception becomes one more problem (check_section)."""
    try:
        checks()
    except Problem as e:
        found.append(str(e))
    except Exception as e:
        found.append(_text(e))


def _exists(f: h5py.File, path: str) -> bool:
    """Whether an object is at `path` (every group on the way must be a group)."""
    node: Any = f
    for part in path.strip("/").split("/"):
        if not isinstance(node, h5py.Group) or part not in node:
            return False
        node = node[part]
    return True


def _require(f: h5py.File, path: str, what: str, found: List[str]) -> bool:
    if _exists(f, path):
        return True
    found.append(f"{path}: missing {what}")
    return False


def _group(f: h5py.File, path: str) -> h5py.Group:
    obj = f[path] if _exists(f, path) else None
    if not isinstance(obj, h5py.Group):
        raise Problem(f"{path}: not a group")
    return obj


def _dataset(f: h5py.File, path: str) -> h5py.Dataset:
    obj = f[path] if _exists(f, path) else None
    if not isinstance(obj, h5py.Dataset):
        raise Problem(f"{path}: not a dataset")
    return obj


def type_class(dtype: np.dtype) -> Optional[str]:
    """"int", "float" or "string" (the HDF5 type classes the files use), else None."""
    if dtype.kind in "iu":
        return "int"
    if dtype.kind == "f":
        return "float"
    if dtype.kind == "S" or h5py.check_string_dtype(dtype) is not None:
        return "string"
    return None


def read_attrs(obj: h5py.HLObject, where: str) -> Dict[str, Any]:
    """The attributes of `obj`: each a single integer, float or string (else Problem)."""
    out: Dict[str, Any] = {}
    for name in obj.attrs:
        attr = obj.attrs.get_id(name)
        if attr.get_space().get_simple_extent_npoints() != 1:
            raise Problem(f"{where}: attribute '{name}' is not a single value")
        kind = type_class(attr.dtype)
        if kind is None:
            raise Problem(f"{where}: attribute '{name}' has an unsupported type (not integer, "
                          "float or string)")
        value = obj.attrs[name]
        if isinstance(value, np.ndarray):
            value = value.reshape(-1)[0]
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, np.generic):
            value = value.item()
        out[name] = value
    return out


def storage_problem(dataset: h5py.Dataset, path: str) -> Optional[str]:
    """Why `dataset` cannot be read whole in memory bounded by the file: its shape asks for
    more bytes than the file stores for it (a dataset declared large but never written, or
    data that would expand beyond MAX_EXPANSION); None when it can."""
    if dataset.shape is None:
        return None
    elements = 1
    for extent in dataset.shape:
        elements *= int(extent)
    needed = elements * dataset.dtype.itemsize
    if needed == 0:
        return None
    plist = dataset.id.get_create_plist()
    if plist.get_layout() == h5py.h5d.COMPACT:  # held in the object header, at most 64 KiB
        return None
    stored = int(dataset.id.get_storage_size())
    if needed <= stored * (MAX_EXPANSION if plist.get_nfilters() else 1):
        return None
    what = f"{elements} rows" if len(dataset.shape) == 1 else f"{elements} values"
    return f"{path}: {what} declared but only {stored} of their {needed} bytes stored"


def _rows(dataset: h5py.Dataset, path: str) -> int:
    """The rows of a 1-D dataset that the file really holds (else Problem), so that reading it
    allocates no more than the file stores."""
    if dataset.shape is None or len(dataset.shape) != 1:
        rank = 0 if dataset.shape is None else len(dataset.shape)
        raise Problem(f"{path}: expected a 1-D dataset, found rank {rank}")
    problem = storage_problem(dataset, path)
    if problem is not None:
        raise Problem(problem)
    return int(dataset.shape[0])


def read_vector(f: h5py.File, path: str, kind: str) -> np.ndarray:
    """A 1-D dataset of numbers of type class `kind` ("int" or "float")."""
    dataset = _dataset(f, path)
    _rows(dataset, path)
    if type_class(dataset.dtype) != kind:
        raise Problem(f"{path}: unexpected element type")
    return dataset[()]


def read_table(f: h5py.File, path: str) -> np.ndarray:
    """A 1-D compound dataset whose fields are integers, floats and strings."""
    dataset = _dataset(f, path)
    _rows(dataset, path)
    names = dataset.dtype.names
    if not names:
        raise Problem(f"{path}: not a compound dataset")
    for name in names:
        if type_class(dataset.dtype[name]) is None:
            raise Problem(f"{path}: field '{name}' has an unsupported type (not integer, float "
                          "or string)")
    return dataset[()]


def column(table: np.ndarray, name: str, kind: str, where: str) -> np.ndarray:
    """Field `name` of type class `kind`, else Problem."""
    if name not in (table.dtype.names or ()):
        raise Problem(f"{where}: missing field '{name}'")
    if type_class(table.dtype[name]) != kind:
        raise Problem(f"{where}: field '{name}' has an unexpected type")
    values = table[name]
    if kind == "string":
        values = np.array([v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                           for v in values], dtype=object)
    return values


def _number(value: float) -> str:
    return f"{value:g}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number_attr(attrs: Dict[str, Any], key: str, where: str) -> float:
    value = attrs[key]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise Problem(f"{where}: attribute '{key}' is not a number")


def _attr_text(value: Any) -> str:
    """A value as attr_to_string() in src/app/run_data.cpp writes it (floats as %.6g)."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _found(value: Any) -> str:
    """"the string 'x'" or "the number 2", as validate_config() says what it found."""
    if isinstance(value, str):
        return f"the string '{value}'"
    return f"the number {_attr_text(value)}"


def attr_problem(value: Any, key: str, kind: str, where: str) -> Optional[str]:
    """Why attribute `key` (`value`, as read_attrs() reads it) is not of `kind` (see
    ROOT_KINDS), worded as validate_config() in src/app/run_file_validate.cpp words it; None when it
    is."""
    if kind == "text":
        if isinstance(value, str):
            return None
        return f"{where}: {key} must be a string, found {_attr_text(value)}"
    if kind == "number":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return None
        return f"{where}: {key} must be a number, found {_found(value)}"
    if kind not in ("int", "count", "flag"):
        raise ValueError(f"unknown attribute kind {kind!r}")
    if not _is_int(value):
        return f"{where}: {key} must be an integer, found {_found(value)}"
    if kind == "count" and value < 1:
        return f"{where}: {key} must be an integer >= 1, found {value}"
    if kind == "flag" and value not in (0, 1):
        return f"{where}: {key} must be 0 or 1, found {value}"
    return None


def _check_kinds(attrs: Dict[str, Any], where: str, kinds: AttrKinds, found: List[str],
                 prefixes: Optional[AttrKinds] = None) -> None:
    """Every attribute of a known kind is of that kind: those of `kinds` in its order, then
    those whose name starts with a key of `prefixes`."""
    checks = [(key, kind) for key, kind in kinds.items() if key in attrs]
    checks += [(key, kind) for prefix, kind in (prefixes or {}).items()
               for key in attrs if key.startswith(prefix)]
    for key, kind in checks:
        problem = attr_problem(attrs[key], key, kind, where)
        if problem is not None:
            found.append(problem)


def _require_attrs(attrs: Dict[str, Any], where: str, keys: Sequence[str],
                   found: List[str]) -> None:
    for key in keys:
        if key not in attrs:
            found.append(f"{where}: missing attribute '{key}'")


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
    kind = command if command in ("collectives", "roofs", "sweep") else "run"
    if kind == "collectives":
        _require_attrs(root, "/", ("check",), found)
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
                                             ROOFS_KINDS, found, ROOFS_PREFIX_KINDS))


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
    if not _require(f, "/stack/env", "dataset", found):
        return
    env = read_table(f, "/stack/env")
    column(env, "name", "string", "/stack/env")
    column(env, "value", "string", "/stack/env")


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
    table = read_table(f, path)
    ids = column(table, "id", "int", path)
    column(table, "name", "string", path)
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
    table = read_table(f, path)
    for name in SAMPLE_FIELDS:
        if name not in table.dtype.names:
            found.append(f"{path}: missing field {name}")
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
        path = f"{group}/step_time_ns"
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
        path = f"{group}/warmup_step_time_ns"
        if not _require(f, path, "dataset", found):
            return
        values = read_vector(f, path, "float")
        bad = np.flatnonzero(~(values > 0))
        if bad.size:
            i = int(bad[0])
            found.append(f"{path}: value {i} is {_number(float(values[i]))}, expected > 0")

    def attrs() -> None:
        values = read_attrs(_group(f, group), group)
        _require_attrs(values, group, STEP_ATTRS, found)
        _check_kinds(values, group, SUMMARY_KINDS, found)
        found.extend(checksum_problems(values, group))
        if "attention" in values and values["attention"] not in ("fused", "naive", "cudnn"):
            found.append(f"{group}: attention is '{values['attention']}', expected fused, naive or cudnn")
        if not all(k in values for k in ("p50_ns", "p95_ns", "p99_ns")):
            return
        p50, p95, p99 = (_number_attr(values, k, group) for k in ("p50_ns", "p95_ns", "p99_ns"))
        if not (p50 <= p95 <= p99):
            found.append(f"{group}: expected p50_ns <= p95_ns <= p99_ns, found {_number(p50)}, "
                         f"{_number(p95)}, {_number(p99)}")

    def ops() -> None:
        path = f"{group}/ops"
        if not _require(f, path, "dataset", found):
            return
        table = read_table(f, path)
        for name in AGGREGATE_TEXT:
            if name in ATTRIBUTION_FIELDS and name not in table.dtype.names:
                continue
            column(table, name, "string", path)
        column(table, "count", "int", path)
        for name in AGGREGATE_NUMBERS:
            if name in ATTRIBUTION_FIELDS and name not in table.dtype.names:
                continue
            column(table, name, "float", path)
        _op_figures(table, path, found)

    def decode() -> None:
        # --decode-steps: the keys of every timed iteration and the per-token bins.
        steps = 0
        if _exists(f, f"{base}/config"):
            value = read_attrs(_group(f, f"{base}/config"), f"{base}/config").get("decode_steps")
            steps = value if isinstance(value, int) else 0
        ctx_path = f"{group}/decode_context"
        if steps <= 0 and not _exists(f, ctx_path):
            return
        if not _require(f, ctx_path, "dataset", found):
            return
        ctx = read_vector(f, ctx_path, "int")
        times = read_vector(f, f"{group}/step_time_ns", "float")
        if ctx.size != times.size:
            found.append(f"{ctx_path}: {ctx.size} entries but {times.size} timed iterations")
        bad = np.flatnonzero(ctx < 1)
        if bad.size:
            i = int(bad[0])
            found.append(f"{ctx_path}: entry {i} is {int(ctx[i])}, expected >= 1")
        bins_path = f"{group}/decode_bins"
        if not _require(f, bins_path, "dataset", found):
            return
        table = read_table(f, bins_path)
        first = column(table, "context_first", "int", bins_path)
        last = column(table, "context_last", "int", bins_path)
        tokens = column(table, "tokens", "int", bins_path)
        p50, p95, p99 = (column(table, k, "float", bins_path)
                         for k in ("p50_ns", "p95_ns", "p99_ns"))
        column(table, "mean_ns", "float", bins_path)
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

    for checks in (steps, warmup, attrs, ops, lambda: _run_repeats(f, base, found), decode,
                   lambda: _pipeline(f, base, found)):
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
    if not _require(f, "/repeats", "dataset (run --repeats)", found):
        return
    table = read_table(f, "/repeats")
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

    def text(key: str) -> str:
        value = config.get(key)
        return value if isinstance(value, str) else ""

    def integer(key: str, fallback: int) -> int:
        value = config.get(key)
        return value if _is_int(value) else fallback

    phase = text("phase")
    train = phase == "train"
    if not train and not text("schedule"):
        return
    group = f"{base}/summary"
    attrs = read_attrs(_group(f, group), group)
    pp = config.get("pp")
    if not _is_int(pp) or pp < 1:
        found.append(f"{config_path}: pp must be an integer >= 1 (a scheduled pipeline's stages)")
        return
    # Each stage has its figures: a pp far beyond the stages the summary holds is one problem,
    # not one per stage counted out to pp.
    held = sum(1 for key in attrs if key.startswith("stage") and key.endswith(".bubble"))
    if pp > held + MAX_ROW_PROBLEMS:
        found.append(f"{group}: {config_path} pp is {pp} but the summary holds the figures of "
                     f"{held} stage(s)")
        return
    keys = list(PIPELINE_ATTRS) + [f"stage{p}.{field}" for p in range(pp)
                                   for field in STAGE_FIELDS]
    # Train with a pipeline: the measured action times and the simulated bubble.
    action_keys = []
    if train and pp > 1:
        action_keys = ["action_forward_ns", "action_backward_ns"]
        if attrs.get("schedule") == "zb-h1":
            action_keys += ["action_backward_input_ns", "action_backward_weight_ns"]
        keys += action_keys + ["bubble_simulated"]
    _require_attrs(attrs, group, keys, found)

    def string(key: str) -> Optional[str]:
        if key not in attrs:
            return None
        if isinstance(attrs[key], str):
            return attrs[key]
        found.append(f"{group}: attribute '{key}' is not a string")
        return None

    schedule = string("schedule")
    if schedule is not None and not is_schedule_name(schedule):
        found.append(f"{group}: schedule is '{schedule}', expected gpipe, 1f1b, interleaved:V "
                     "(V >= 2) or zb-h1")
    recompute = string("recompute")
    if recompute is not None and recompute not in ("none", "full"):
        found.append(f"{group}: recompute is '{recompute}', expected none or full")
    compares = string("check_compares")
    if compares is not None:
        expected = "gradients" if train else "outputs"
        if compares not in ("gradients", "outputs"):
            found.append(f"{group}: check_compares is '{compares}', expected gradients or "
                         "outputs")
        elif compares != expected:
            found.append(f"{group}: check_compares is '{compares}' but {config_path} phase is "
                         f"{phase} (expected {expected})")
    if "microbatches" in attrs:
        value = attrs["microbatches"]
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

    fraction("bubble_theory")
    fraction("bubble_simulated")
    for key in action_keys:
        x = number(key)
        if x is not None and not x > 0:
            found.append(f"{group}: {key} must be > 0, found {_number(x)}")
    for p in range(pp):
        fraction(f"stage{p}.bubble")
        for field in STAGE_FIELDS[1:]:
            non_negative(f"stage{p}.{field}")

    ops_path = f"{base}/ops"
    if not _exists(f, ops_path):
        return
    present = set(column(read_table(f, ops_path), "name", "string", ops_path).tolist())
    required = list(SCHEDULED_OPS)
    if train:
        required += TRAIN_OPS
        if text("rotary") == "on":
            required.append("rotary_bwd")
        if integer("tp", 1) > 1 and integer("sequence_parallel", 0) != 0:
            required += ["allgather_mlp_bwd", "reducescatter_mlp_bwd", "allgather_attn_bwd",
                         "reducescatter_attn_bwd", "allreduce_norm_grads"]
        elif integer("tp", 1) > 1:
            required += ["allreduce_mlp_bwd", "allreduce_attn_bwd"]
        if integer("dp", 1) > 1:
            required.append("dp_reducescatter" if integer("dp_shard", 0) != 0
                            else "dp_allreduce")
        rate = config.get("sgd_lr")
        if isinstance(rate, float) and rate > 0:
            required.append("sgd_update")
    what = "a train run" if train else "a scheduled pipeline"
    for name in required:
        if name not in present:
            found.append(f"{ops_path}: missing op '{name}' ({what} records it)")


def _result_table(f: h5py.File, path: str, found: List[str]) -> None:
    table = read_table(f, path)
    for name in RESULT_INTS:
        column(table, name, "int", path)
    for name in RESULT_NUMBERS:
        column(table, name, "float", path)
    for i in range(table.size):
        row = table[i]
        where = f"{path}: row {i}: "
        if row["size_bytes"] <= 0:
            found.append(where + "size_bytes must be > 0")
        if row["wrong"] < 0:
            found.append(where + "wrong must be >= 0")
        if row["iters"] <= 0:
            found.append(where + "iters must be > 0")
        t = [float(row[k]) for k in ("time_min_ns", "time_p50_ns", "time_p95_ns", "time_p99_ns")]
        if not (0 < t[0] <= t[1] <= t[2] <= t[3]):
            found.append(where + "expected 0 < time_min_ns <= time_p50_ns <= time_p95_ns <= "
                         f"time_p99_ns, found {', '.join(_number(x) for x in t)}")


def _samples_table(f: h5py.File, path: str, found: List[str]) -> None:
    table = read_table(f, path)
    column(table, "size_index", "int", path)
    column(table, "iteration", "int", path)
    times = column(table, "time_ns", "float", path)
    bad = np.flatnonzero(~(times > 0))
    if bad.size:
        found.append(f"{path}: row {int(bad[0])}: time_ns must be > 0")


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
    if not _require(f, ROOF_PATH, "dataset", found):
        return
    table = read_table(f, ROOF_PATH)
    envelope = envelope_required or ROOF_ENVELOPE[0] in table.dtype.names
    if envelope:
        for name in ROOF_ENVELOPE:
            column(table, name, "float", ROOF_PATH)
    for name in ROOF_TEXT:
        column(table, name, "string", ROOF_PATH)
    for name in ROOF_INTS:
        column(table, name, "int", ROOF_PATH)
    for name in ROOF_NUMBERS:
        column(table, name, "float", ROOF_PATH)
    for i in range(table.size):
        alpha, beta = float(table["alpha_us"][i]), float(table["beta_gbps"][i])
        if not (alpha >= 0 and beta > 0):
            found.append(f"{ROOF_PATH}: row {i}: expected alpha_us >= 0 and beta_gbps > 0, found "
                         f"{_number(alpha)}, {_number(beta)}")
        if not envelope:
            continue
        floor_alpha, floor_beta = (float(table[k][i]) for k in ROOF_ENVELOPE)
        if not (floor_alpha >= 0 and floor_beta > 0):
            found.append(f"{ROOF_PATH}: row {i}: expected floor_alpha_us >= 0 and "
                         f"floor_beta_gbps > 0, found {_number(floor_alpha)}, "
                         f"{_number(floor_beta)}")


def _fields(f: h5py.File, spec: TableSpec, found: List[str]) -> None:
    path, text, ints, numbers = spec
    if not _require(f, path, "dataset", found):
        return
    table = read_table(f, path)
    for names, kind in ((text, "string"), (ints, "int"), (numbers, "float")):
        for name in names:
            _section(found, lambda name=name, kind=kind: column(table, name, kind, path))


def _roofs(f: h5py.File, found: List[str]) -> None:
    for spec in ROOF_TABLES:
        def one(spec: TableSpec = spec) -> None:
            _fields(f, spec, found)
            path, _, _, numbers = spec
            if not _exists(f, path):
                return
            rate = numbers[2] if len(numbers) > 2 else numbers[0]
            values = column(read_table(f, path), rate, "float", path)
            for i in np.flatnonzero(~(values > 0)).tolist():
                found.append(f"{path}: row {i}: {rate} must be > 0, found "
                             f"{_number(float(values[i]))}")
        _section(found, one)
    _section(found, lambda: _roof(f, found, envelope_required=True))


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
                _section(found, lambda base=base: _fields(
                    f, (f"{base}/prediction", PREDICTION_FIELDS[0], (), PREDICTION_FIELDS[1]),
                    found))
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
    for spec in SWEEP_TABLES:
        _section(found, lambda spec=spec: _fields(f, spec, found))
    if not _exists(f, "/sweep/points"):
        return
    rows = read_table(f, "/sweep/points").size
    groups = len(_group(f, "/points")) if _exists(f, "/points") else 0
    if rows != groups:
        found.append(f"/sweep/points: {rows} rows but {groups} groups under /points")
    attrs = read_attrs(_group(f, "/sweep"), "/sweep")
    _require_attrs(attrs, "/sweep", ("axes", "points", "failed"), found)
    if "axes" in attrs:
        _sweep_axes(f, attrs["axes"], found)
    _check_kinds(attrs, "/sweep", SWEEP_KINDS, found)
    if "repeats" in attrs:
        _section(found, lambda: _sweep_repeats(f, attrs, found))


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


def _sweep_repeats(f: h5py.File, attrs: Dict[str, Any], found: List[str]) -> None:
    """Every repeat in /sweep/repeats, each ok point's medians inside their 95 % intervals of
    finite times >= 0, and each crossover's status one of CROSSOVER_STATUSES."""
    _require_attrs(attrs, "/sweep", ("interval",), found)
    for spec in SWEEP_REPEAT_TABLES:
        _section(found, lambda spec=spec: _fields(f, spec, found))
    points = read_table(f, "/sweep/points")
    ok = column(points, "status", "string", "/sweep/points") == "ok"
    for base in ("step_p50", "compute", "hbm", "interconnect", "launch"):
        mid, lo, hi = (points[f"{base}{end}"].astype(float) for end in ("_ns", "_lo_ns", "_hi_ns"))
        bad = ok & ~((lo >= 0) & (lo <= mid) & (mid <= hi) & np.isfinite(hi))
        for i in np.flatnonzero(bad):
            found.append(f"/sweep/points: row {i}: {base} must lie in its interval [lo, hi] of "
                         f"finite times >= 0, found {mid[i]:g} in [{lo[i]:g}, {hi[i]:g}]")
    for i in np.flatnonzero(ok & (points["repeats"] < 1)):
        found.append(f"/sweep/points: row {i}: an ok point with no repeat")
    crossovers = read_table(f, "/sweep/crossovers")
    if crossovers.size:
        for status in column(crossovers, "status", "string", "/sweep/crossovers"):
            if status not in CROSSOVER_STATUSES:
                found.append(f"/sweep/crossovers: unknown status '{status}'")
