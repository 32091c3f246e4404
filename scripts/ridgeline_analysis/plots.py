"""PNG plots of a run: a per-rank timeline Gantt chart and a step-time histogram.

Figures are drawn on the Agg canvas directly (no pyplot), so plotting works without a display
and never changes the caller's matplotlib backend.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .analysis import LANES, timed_rows

# One colour per op kind of the schema (/ops kind), stable across runs so plots compare.
KIND_COLOURS = {
    "gemm": "tab:blue", "attention": "tab:purple", "norm": "tab:olive",
    "elementwise": "tab:cyan", "collective": "tab:red", "p2p": "tab:orange",
    "other": "tab:gray",
}


def _save(fig: Figure, path: str) -> str:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=120)
    return path


def plot_timeline(timelines: Mapping[int, np.ndarray], op_kinds: Sequence[str], path: str,
                  iterations: Optional[Iterable[int]] = None, title: str = "") -> str:
    """Gantt chart: one row per (rank, lane) that has ops, bars coloured by op kind, time in ms
    since each rank's epoch. Plots the timed iterations, or only `iterations` if given."""
    rows = []
    for rank in sorted(timelines):
        data = timed_rows(timelines[rank])
        if iterations is not None:
            data = data[np.isin(data["iteration"], list(iterations))]
        for lane in np.unique(data["lane"]).tolist():
            rows.append((f"rank {rank} {LANES[lane] if lane < len(LANES) else lane}",
                         data[data["lane"] == lane]))
    fig = Figure(figsize=(12, max(2.5, 1.2 + 0.45 * len(rows))))
    ax = fig.add_subplot()
    kinds_seen = set()
    for y, (_, data) in enumerate(rows):
        kinds = np.asarray(op_kinds, dtype=object)[data["op_id"]]
        for kind in np.unique(kinds).tolist():
            sel = data[kinds == kind]
            start_ms = sel["t_start_ns"] / 1e6
            width_ms = (sel["t_end_ns"] - sel["t_start_ns"]) / 1e6
            ax.broken_barh(list(zip(start_ms, width_ms)), (y - 0.4, 0.8),
                           facecolors=KIND_COLOURS.get(kind, "black"), linewidth=0)
            kinds_seen.add(kind)
    ax.set_yticks(range(len(rows)), [label for label, _ in rows])
    ax.invert_yaxis()
    ax.set_xlabel("time since the rank's epoch (ms)")
    ax.set_title(title or "ridgeline timeline")
    ax.legend(handles=[Patch(color=KIND_COLOURS.get(k, "black"), label=k) for k in sorted(kinds_seen)],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.tight_layout()
    return _save(fig, path)


def plot_step_histogram(step_time_ns: np.ndarray, path: str,
                        warmup_step_time_ns: Optional[np.ndarray] = None,
                        title: str = "") -> str:
    """Histogram of the timed step times (ms) with their median marked; warm-up steps, if
    given, are drawn apart so a slow start is visible and not mistaken for noise."""
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    steps_ms = np.asarray(step_time_ns, dtype=np.float64) / 1e6
    series = [steps_ms]
    labels = [f"timed ({steps_ms.size})"]
    if warmup_step_time_ns is not None and len(warmup_step_time_ns):
        series.append(np.asarray(warmup_step_time_ns, dtype=np.float64) / 1e6)
        labels.append(f"warm-up ({len(warmup_step_time_ns)})")
    every = np.concatenate(series)
    bins = np.histogram_bin_edges(every, bins=min(30, max(5, every.size)))
    ax.hist(series, bins=bins, label=labels, color=["tab:blue", "tab:gray"][:len(series)])
    if steps_ms.size:
        p50 = float(np.percentile(steps_ms, 50))
        ax.axvline(p50, color="black", linestyle="--", label=f"p50 {p50:.4g} ms")
    ax.set_xlabel("step time (ms)")
    ax.set_ylabel("iterations")
    ax.set_title(title or "ridgeline step times")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return _save(fig, path)
