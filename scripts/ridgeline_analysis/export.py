"""Chrome trace-event JSON of a run's timelines, for ui.perfetto.dev or chrome://tracing.

Each timeline row becomes one complete ("X") event; ts and dur are microseconds since the
rank's epoch. Ranks are processes and lanes threads, numbered from 1 and named by metadata
("M") events: Perfetto reserves pid 0 for the kernel's swapper and treats it specially.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Sequence

import numpy as np

from .analysis import LANES


def process_id(rank: int) -> int:
    return rank + 1


def thread_id(lane: int) -> int:
    return lane + 1


def _lane_name(lane: int) -> str:
    return LANES[lane] if lane < len(LANES) else f"lane {lane}"


def _metadata(rank: int, lanes: Sequence[int]) -> List[Dict[str, Any]]:
    pid = process_id(rank)
    events = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"rank {rank}"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": rank}},
    ]
    for lane in lanes:
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": thread_id(lane),
                       "args": {"name": _lane_name(lane)}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": thread_id(lane),
                       "args": {"sort_index": lane}})
    return events


def trace_events(timelines: Mapping[int, np.ndarray], op_names: Sequence[str],
                 op_kinds: Sequence[str]) -> List[Dict[str, Any]]:
    """Metadata events, then one "X" event per timeline row (warm-up rows included, marked
    in args) in rank order."""
    events: List[Dict[str, Any]] = []
    for rank in sorted(timelines):
        rows = timelines[rank]
        events += _metadata(rank, np.unique(rows["lane"]).tolist())
        # Plain Python numbers: json cannot write numpy scalars.
        col = {name: rows[name].tolist() for name in rows.dtype.names}
        for i in range(rows.size):
            op_id, lane = col["op_id"][i], col["lane"][i]
            start_ns, end_ns = col["t_start_ns"][i], col["t_end_ns"][i]
            events.append({
                "name": op_names[op_id], "cat": op_kinds[op_id], "ph": "X",
                "ts": start_ns / 1e3, "dur": (end_ns - start_ns) / 1e3,
                "pid": process_id(rank), "tid": thread_id(lane),
                "args": {"rank": rank, "lane": _lane_name(lane), "layer": col["layer"][i],
                         "microbatch": col["microbatch"][i], "iteration": col["iteration"][i],
                         "warmup": bool(col["warmup"][i]), "flops": col["flops"][i],
                         "hbm_bytes": col["hbm_bytes"][i], "comm_bytes": col["comm_bytes"][i]},
            })
    return events


def trace_document(timelines: Mapping[int, np.ndarray], op_names: Sequence[str],
                   op_kinds: Sequence[str], metadata: Mapping[str, Any]) -> Dict[str, Any]:
    """The whole JSON object: traceEvents plus the run's root attributes under otherData."""
    return {
        "traceEvents": trace_events(timelines, op_names, op_kinds),
        "displayTimeUnit": "ns",
        "otherData": {k: v if isinstance(v, (int, float, str)) else str(v)
                      for k, v in metadata.items()},
    }


def write_trace(path: str, timelines: Mapping[int, np.ndarray], op_names: Sequence[str],
                op_kinds: Sequence[str], metadata: Mapping[str, Any]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(trace_document(timelines, op_names, op_kinds, metadata), f)
    return path
