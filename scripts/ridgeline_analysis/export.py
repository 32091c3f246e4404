"""Chrome trace-event JSON of a run's timelines, for ui.perfetto.dev or chrome://tracing.

Each timeline row becomes one complete ("X") event; ts and dur are microseconds since the
rank's epoch. Ranks are processes; each lane is a thread, and under the chunked:K and split:N
overlap strategies each chunk (or part) of a lane is a thread of its own: there chunk i's
collective still runs when chunk i + 1's starts, and Perfetto draws slices of one thread as a
stack, so slices that partly overlap on one thread would be drawn nested wrongly. Ids start at
1 and threads are named by metadata ("M") events: Perfetto reserves pid 0 for the kernel's
swapper and treats it specially.
"""
from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import output
from .analysis import LANES


def process_id(rank: int) -> int:
    return rank + 1


def thread_id(lane: int, unit: int = 0) -> int:
    """The thread of a lane's chunk or part `unit` (0 for the strategies that cut nothing):
    1, 2, 3 for the lanes' unit 0, then the next three ids for unit 1, and so on."""
    return 1 + lane + len(LANES) * unit


def strategy_of(config: Mapping[str, Any]) -> str:
    """The overlap strategy of a run or point: /config `strategy` (the points of a run of several
    strategies), else the first of `overlap`."""
    return str(config.get("strategy") or str(config.get("overlap", "")).split(",")[0]).strip()


def _unit_word(strategy: str) -> Optional[str]:
    """What a unit is under `strategy`: "chunk" (chunked:K), "part" (split:N), else None."""
    kind = strategy.split(":")[0]
    return {"chunked": "chunk", "split": "part"}.get(kind)


def unit_index(rows: np.ndarray) -> np.ndarray:
    """Each row's chunk or part: its place, in start order, among the rows of one rank with the
    same iteration, micro-batch, layer and op. Under chunked:K an op cut into chunks runs K
    times per layer (chunk 0 first) and the others once; under split:N every op runs once per
    part, part 0 first; under none and async every op runs once, so every row is unit 0."""
    if rows.size == 0:
        return np.zeros(0, dtype=np.int64)
    keys = (rows["t_start_ns"], rows["op_id"], rows["layer"], rows["microbatch"],
            rows["iteration"])
    order = np.lexsort(keys)  # stable: equal starts keep their recorded order
    sorted_keys = np.stack([np.asarray(k)[order] for k in keys[1:]], axis=1)
    new_group = np.r_[True, (sorted_keys[1:] != sorted_keys[:-1]).any(axis=1)]
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(order.size), 0))
    out = np.empty(order.size, dtype=np.int64)
    out[order] = np.arange(order.size) - group_start
    return out


def json_number(value: Any) -> Any:
    """`value` as JSON can hold it: a float that is not finite (NaN, infinity; JSON has no
    such number) becomes None (null), anything else is kept."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _lane_name(lane: int) -> str:
    return LANES[lane] if lane < len(LANES) else f"lane {lane}"


def _track_name(lane: int, unit: int, word: Optional[str]) -> str:
    if word is not None:
        return f"{_lane_name(lane)} {word} {unit}"
    return _lane_name(lane) if unit == 0 else f"{_lane_name(lane)} #{unit}"


def _metadata(rank: int, tracks: Sequence[Tuple[int, int]],
              word: Optional[str]) -> List[Dict[str, Any]]:
    pid = process_id(rank)
    events = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"rank {rank}"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": rank}},
    ]
    for lane, unit in tracks:
        tid = thread_id(lane, unit)
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": _track_name(lane, unit, word)}})
        # Lanes together, their chunks in order beneath them.
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                       "args": {"sort_index": lane * 1000 + unit}})
    return events


def trace_events(timelines: Mapping[int, np.ndarray], op_names: Sequence[str],
                 op_kinds: Sequence[str], strategy: str = "") -> List[Dict[str, Any]]:
    """Metadata events, then one "X" event per timeline row (warm-up rows included, marked
    in args) in rank order. `strategy` (the run's overlap strategy) names the threads of the
    chunks or parts: "comm chunk 1", "compute part 0", ..."""
    word = _unit_word(strategy)
    events: List[Dict[str, Any]] = []
    for rank in sorted(timelines):
        rows = timelines[rank]
        units = unit_index(rows)
        tracks = sorted(set(zip(rows["lane"].tolist(), units.tolist())))
        events += _metadata(rank, tracks, word)
        # Plain Python numbers: json cannot write numpy scalars.
        col = {name: rows[name].tolist() for name in rows.dtype.names}
        unit_list = units.tolist()
        for i in range(rows.size):
            op_id, lane, unit = col["op_id"][i], col["lane"][i], unit_list[i]
            start_ns, end_ns = col["t_start_ns"][i], col["t_end_ns"][i]
            args = {"rank": rank, "lane": _lane_name(lane), "layer": col["layer"][i],
                    "microbatch": col["microbatch"][i], "iteration": col["iteration"][i],
                    "warmup": bool(col["warmup"][i]), "flops": json_number(col["flops"][i]),
                    "hbm_bytes": json_number(col["hbm_bytes"][i]),
                    "comm_bytes": json_number(col["comm_bytes"][i])}
            if word is not None:
                args[word] = unit
            events.append({
                "name": op_names[op_id], "cat": op_kinds[op_id], "ph": "X",
                "ts": json_number(start_ns / 1e3), "dur": json_number((end_ns - start_ns) / 1e3),
                "pid": process_id(rank), "tid": thread_id(lane, unit), "args": args,
            })
    return events


def trace_document(timelines: Mapping[int, np.ndarray], op_names: Sequence[str],
                   op_kinds: Sequence[str], metadata: Mapping[str, Any],
                   strategy: str = "") -> Dict[str, Any]:
    """The whole JSON object: traceEvents plus the run's root attributes under otherData."""
    return {
        "traceEvents": trace_events(timelines, op_names, op_kinds, strategy),
        "displayTimeUnit": "ns",
        "otherData": {k: json_number(v) if isinstance(v, (int, float, str)) else str(v)
                      for k, v in metadata.items()},
    }


def write_trace(path: str, timelines: Mapping[int, np.ndarray], op_names: Sequence[str],
                op_kinds: Sequence[str], metadata: Mapping[str, Any], strategy: str = "") -> str:
    """trace_document() written to `path` through output.write_file() (a failure leaves `path`
    as it was: output.WriteError). The JSON is strict: numbers that JSON cannot hold were made
    null by trace_document(), and allow_nan=False keeps it so."""
    document = trace_document(timelines, op_names, op_kinds, metadata, strategy)
    return output.write_file(path, lambda f: json.dump(document, f, allow_nan=False))
