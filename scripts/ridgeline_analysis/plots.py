"""Plots of a run or a sweep: a per-rank timeline Gantt chart, a pipeline schedule's Gantt
chart, a step-time histogram, the ridgeline plane, scaling curves and stacked step-time bars by
ceiling, and serving latency against arrival rate.

Figures are drawn on the Agg canvas directly (no pyplot), so plotting works without a display
and never changes the caller's matplotlib backend. The format follows the path's suffix (.png,
.svg, ...).
"""
from __future__ import annotations

import math
import os
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter, NullFormatter

from . import output
from .analysis import (CEILINGS, COMM_LANE, LANES, PIPELINE_ROLES, RidgeLines, op_roles,
                       schedule_actions, timed_rows)
from .sweeps import Scaling

# One colour per op kind of the schema (/ops kind), stable across runs so plots compare.
KIND_COLOURS = {
    "gemm": "tab:blue", "attention": "tab:purple", "norm": "tab:olive",
    "elementwise": "tab:cyan", "collective": "tab:red", "p2p": "tab:orange",
    "other": "tab:gray",
}


#: One colour per ceiling class, the same in every picture.
CEILING_COLOURS = {
    "compute": "tab:blue", "hbm": "tab:green", "interconnect": "tab:red", "launch": "tab:orange",
    "none": "tab:gray",
}
# Region shades of the ridgeline plane: the class colours, light.
_REGION_ALPHA = 0.10


#: Picture formats whose files carry the title in their metadata (PNG tEXt, SVG dc:title).
_TITLED_FORMATS = ("png", "svg", "pdf")


def picture_format(path: str) -> str:
    """The format `path`'s suffix names ("png", "svg", ...); png without a suffix."""
    return os.path.splitext(path)[1][1:].lower() or "png"


def _titled(fig: Figure, title: str) -> str:
    """`title` kept as the figure's label, for _save() to write into the file's metadata."""
    fig.set_label(title)
    return title


def _save(fig: Figure, path: str) -> str:
    """Writes `fig` to `path` through output.write_file() (a failure leaves `path` as it was:
    output.WriteError), its format named by the suffix, with its title (_titled()) in the
    file's metadata where the format holds one."""
    FigureCanvasAgg(fig)
    fmt = picture_format(path)
    metadata = {"Title": fig.get_label()} if fmt in _TITLED_FORMATS else None
    return output.write_file(
        path, lambda f: fig.savefig(f, format=fmt, dpi=120, metadata=metadata), binary=True)


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
    ax.set_title(_titled(fig, title or "ridgeline timeline"))
    ax.legend(handles=[Patch(color=KIND_COLOURS.get(k, "black"), label=k) for k in sorted(kinds_seen)],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.tight_layout()
    return _save(fig, path)


#: One colour per pipeline role (analysis.pipeline_role), and its legend entry.
ROLE_COLOURS = {
    "forward": "tab:blue", "backward_input": "tab:red", "backward_weight": "tab:green",
    "p2p": "tab:orange", "stage": "0.55",
}
ROLE_LABELS = {
    "forward": "forward", "backward_input": "backward: input gradient (B)",
    "backward_weight": "backward: weight gradient (W)", "p2p": "p2p: pipeline transfers",
    "stage": "stage: gradient zeroing, DP reduction, SGD, flush",
}


def schedule_figure(timelines: Mapping[int, np.ndarray], op_names: Sequence[str],
                    op_kinds: Sequence[str], labels: Optional[Mapping[int, str]] = None,
                    split_backward: bool = False, title: str = "") -> Figure:
    """A pipeline schedule as it ran: one row per rank (in the order of `labels`, which names
    each row; else by rank), its ops as bars coloured by role (forward, backward input
    gradient, weight gradient, p2p, stage op: ROLE_COLOURS): the compute and p2p lanes in the
    row's upper band, the collective lane (TP all-reduces, data-parallel buckets, the flush) in
    a thin band below. Each action (analysis.schedule_actions) carries its microbatch number
    where the number fits inside it. Time in ms since the first row's start, on each rank's own
    epoch (taken after a barrier). `timelines` holds the rows to draw, rank -> rows."""
    ranks = list(labels) if labels is not None else sorted(timelines)
    names = labels or {r: f"rank {r}" for r in ranks}
    roles = op_roles(op_names, op_kinds)
    starts = [int(timelines[r]["t_start_ns"].min()) for r in ranks if timelines[r].size]
    t0 = min(starts) if starts else 0
    fig = Figure(figsize=(13, max(2.5, 1.4 + 0.6 * len(ranks))))
    ax = fig.add_subplot()
    seen = set()
    t_end = t0
    for y, rank in enumerate(ranks):
        rows = timelines[rank]
        if not rows.size:
            continue
        t_end = max(t_end, int(rows["t_end_ns"].max()))
        row_roles = roles[rows["op_id"]]
        thin = rows["lane"] == COMM_LANE
        for role in PIPELINE_ROLES:
            for band, (bottom, height) in ((~thin, (y - 0.4, 0.6)), (thin, (y + 0.24, 0.16))):
                sel = rows[(row_roles == role) & band]
                if not sel.size:
                    continue
                start_ms = (sel["t_start_ns"] - t0) / 1e6
                width_ms = (sel["t_end_ns"] - sel["t_start_ns"]) / 1e6
                ax.broken_barh(list(zip(start_ms, width_ms)), (bottom, height),
                               facecolors=ROLE_COLOURS[role], linewidth=0, label=role)
                seen.add(role)
    ax.set_xlim(0, max((t_end - t0) / 1e6, 1e-6) * 1.01)
    ax.set_ylim(len(ranks) - 0.5, -0.5)
    ax.set_yticks(range(len(ranks)), [names[r] for r in ranks])
    ax.set_xlabel("time (ms) since the first op drawn (each rank on its own epoch, taken after "
                  "a barrier)")
    ax.set_title(_titled(fig, title or "pipeline schedule"))
    ax.legend(handles=[Patch(color=ROLE_COLOURS[r], label=ROLE_LABELS[r])
                       for r in PIPELINE_ROLES if r in seen],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.tight_layout()
    # Each action outlined; its microbatch number, once the layout fixed the axes' size, kept
    # where it fits inside.
    renderer = FigureCanvasAgg(fig).get_renderer()
    row_of = {rank: y for y, rank in enumerate(ranks)}
    for action in schedule_actions(timelines, roles, split_backward):
        left, right = ((int(action[k]) - t0) / 1e6 for k in ("t_start_ns", "t_end_ns"))
        y = row_of[int(action["rank"])]
        ax.add_patch(Rectangle((left, y - 0.4), right - left, 0.6, fill=False, edgecolor="0.15",
                               linewidth=0.6))
        text = ax.text((left + right) / 2, y - 0.1, str(int(action["microbatch"])),
                       ha="center", va="center", fontsize=7, color="black",
                       bbox=dict(boxstyle="square,pad=0.1", facecolor="white", alpha=0.75,
                                 linewidth=0))
        box = ax.transData.transform([(left, y), (right, y)])
        if text.get_window_extent(renderer).width + 2 > box[1][0] - box[0][0]:
            text.remove()
    return fig


def plot_schedule(timelines: Mapping[int, np.ndarray], op_names: Sequence[str],
                  op_kinds: Sequence[str], path: str, labels: Optional[Mapping[int, str]] = None,
                  split_backward: bool = False, title: str = "") -> str:
    """schedule_figure() written to `path` (its suffix names the format)."""
    return _save(schedule_figure(timelines, op_names, op_kinds, labels, split_backward, title),
                 path)


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
    ax.set_title(_titled(fig, title or "ridgeline step times"))
    ax.legend(fontsize="small")
    fig.tight_layout()
    return _save(fig, path)


# ---- ridgeline plane ----

def _decades(values: Sequence[float]) -> Tuple[float, float]:
    """Log-axis limits: whole decades around the values, with at least a factor 3 of margin."""
    v = np.asarray([x for x in values if np.isfinite(x) and x > 0], dtype=np.float64)
    if v.size == 0:
        return 0.1, 10.0
    return 10.0 ** math.floor(math.log10(v.min() / 3)), 10.0 ** math.ceil(math.log10(v.max() * 3))


def _tags(x: np.ndarray, y: np.ndarray, names: Sequence[str]) -> List[Tuple[float, float, str]]:
    """One label per position: points within 0.05 decades of each other share "a, b"."""
    out: List[Tuple[float, float, str]] = []
    for xi, yi, name in zip(x.tolist(), y.tolist(), names):
        for i, (xo, yo, text) in enumerate(out):
            if abs(math.log10(xi / xo)) < 0.05 and (yi == yo or (
                    np.isfinite(yi) and np.isfinite(yo) and abs(math.log10(yi / yo)) < 0.05)):
                out[i] = (xo, yo, f"{text}, {name}")
                break
        else:
            out.append((xi, yi, name))
    return out


def plot_ridgeline(lines: RidgeLines, points: np.ndarray, path: str, title: str = "",
                   step_tags: Optional[Mapping[str, str]] = None) -> str:
    """The ridgeline plane (after Checconi, Tithi and Petrini 2022, "Ridgeline: A 2D Roofline
    Model for Distributed Systems", arXiv:2209.01368): log-log, x = FLOP per HBM
    byte, y = FLOP per interconnect byte; the compute-, HBM- and interconnect-bound regions
    shaded and bounded by the ridge lines of `lines`; `points` (analysis.RIDGELINE_DTYPE) drawn
    small for ops and large for steps, coloured by their ceiling. Points without interconnect
    bytes (y = inf) go on a strip above the plane. Steps are tagged with their names, or with
    `step_tags[name]` and then listed (tag, name) beside the plane; communicating ops on the
    plane are named."""
    has_net = bool(np.isfinite(lines.net_bw) and lines.net_bw > 0)
    xr, yr = lines.x_ridge, lines.y_ridge
    # A point needs FLOPs and HBM bytes to have a place; y = inf goes on the strip.
    fits = np.isfinite(points["x"]) & (points["x"] > 0) & ~np.isnan(points["y"])
    placed, left_out = points[fits], points[~fits]
    on_plane = placed[np.isfinite(placed["y"])]
    on_strip = placed[np.isinf(placed["y"])]
    # At least a factor 30 either side of the ridge point, so that every region has room.
    x0, x1 = _decades([*placed["x"].tolist(), xr / 10, xr * 10])
    y0, y1 = _decades([*on_plane["y"].tolist(), *([yr / 10, yr * 10] if has_net else [])]
                      or [1.0])

    fig = Figure(figsize=(11, 7.5))
    grid = fig.add_gridspec(2, 1, height_ratios=(1, 9), hspace=0.04,
                            left=0.09, right=0.66, top=0.9, bottom=0.1)
    strip: Axes = fig.add_subplot(grid[0])
    ax: Axes = fig.add_subplot(grid[1], sharex=strip)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)

    # Regions, shaded with their class colours.
    xg = np.geomspace(x0, x1, 400)
    shade = dict(alpha=_REGION_ALPHA, linewidth=0)
    if has_net:
        diag = lines.diagonal(xg)
        left = xg <= xr
        ax.fill_between(xg[left], np.clip(diag[left], y0, y1), y1,
                        color=CEILING_COLOURS["hbm"], **shade)
        ax.fill_between(xg, y0, np.clip(np.minimum(diag, yr), y0, y1),
                        color=CEILING_COLOURS["interconnect"], **shade)
        ax.fill_between([xr, x1], yr, y1, color=CEILING_COLOURS["compute"], **shade)
    else:
        ax.axvspan(x0, xr, color=CEILING_COLOURS["hbm"], **shade)
        ax.axvspan(xr, x1, color=CEILING_COLOURS["compute"], **shade)
    strip.axvspan(x0, xr, color=CEILING_COLOURS["hbm"], **shade)
    strip.axvspan(xr, x1, color=CEILING_COLOURS["compute"], **shade)

    # Ridge lines.
    ridge = dict(color="0.2", linewidth=1.4)
    if has_net:
        ax.plot([xr, xr], [yr, y1], linestyle="-", **ridge)
        ax.plot([xr, x1], [yr, yr], linestyle="--", **ridge)
        ax.plot(xg[left], lines.diagonal(xg[left]), linestyle=":", **ridge)
    else:
        ax.axvline(xr, linestyle="-", **ridge)
    strip.axvline(xr, linestyle="-", **ridge)

    # Region names, where the region is sure to be.
    name_box = dict(fontsize=10, fontweight="bold", ha="center", va="center",
                    bbox=dict(boxstyle="round,pad=0.2", facecolor="white", alpha=0.6, linewidth=0))
    lx0, lx1, lxr = math.log10(x0), math.log10(x1), math.log10(xr)
    ly0, ly1 = math.log10(y0), math.log10(y1)
    if has_net:
        lyr = math.log10(yr)
        ax.text(10 ** ((lxr + lx1) / 2), 10 ** (lyr + 0.85 * (ly1 - lyr)), "compute-bound",
                color=CEILING_COLOURS["compute"], **name_box)
        hx = 10 ** (lx0 + 0.45 * (lxr - lx0))
        ax.text(hx, 10 ** (ly1 - 0.1 * (ly1 - ly0)), "HBM-bound", color=CEILING_COLOURS["hbm"],
                **name_box)
        ax.text(10 ** ((lxr + lx1) / 2), 10 ** (ly0 + 0.1 * (ly1 - ly0)), "interconnect-bound",
                color=CEILING_COLOURS["interconnect"], **name_box)
    else:
        ax.text(10 ** ((lxr + lx1) / 2), 10 ** (ly1 - 0.1 * (ly1 - ly0)), "compute-bound",
                color=CEILING_COLOURS["compute"], **name_box)
        ax.text(10 ** ((lx0 + lxr) / 2), 10 ** (ly1 - 0.1 * (ly1 - ly0)), "HBM-bound",
                color=CEILING_COLOURS["hbm"], **name_box)

    # Points: ops small, steps large, coloured by their ceiling.
    def draw(target: Axes, rows: np.ndarray, y: np.ndarray) -> None:
        for what, size, marker in (("op", 36, "o"), ("step", 300, "*")):
            sel = rows["what"] == what
            colours = [CEILING_COLOURS.get(c, "black") for c in rows["ceiling"][sel]]
            target.scatter(rows["x"][sel], y[sel], s=size, marker=marker, c=colours,
                           edgecolors="black", linewidths=0.6, zorder=3 if what == "op" else 4)

    draw(ax, on_plane, on_plane["y"])
    draw(strip, on_strip, np.full(on_strip.size, 0.5))

    steps = points[points["what"] == "step"]
    tag_of = {str(n): (step_tags or {}).get(str(n), str(n)) for n in steps["name"]}
    for target, rows, strip_row in ((ax, on_plane, False), (strip, on_strip, True)):
        sel = rows[rows["what"] == "step"]
        y = np.full(sel.size, 0.5) if strip_row else sel["y"]
        for x, yy, text in _tags(sel["x"], y, [tag_of[str(n)] for n in sel["name"]]):
            target.annotate(text, (x, yy), xytext=(7, 5 if not strip_row else -3),
                            textcoords="offset points", fontsize=8, fontweight="bold",
                            va="center" if strip_row else "bottom")
    # Ops on the plane (few: those that communicate) by name; the strip has no room for names.
    ops = on_plane[on_plane["what"] == "op"]
    for x, y, text in _tags(ops["x"], ops["y"], ops["name"].tolist()):
        ax.annotate(text, (x, y), xytext=(6, -4), textcoords="offset points", fontsize=7,
                    color="0.25", va="top")
    strip.set_ylim(0, 1)
    strip.set_yticks([])
    strip.set_ylabel("no inter-\nconnect\nbytes", rotation=0, ha="right", va="center",
                     fontsize=8, color="0.25")
    strip.tick_params(labelbottom=False)

    ax.set_xlabel("arithmetic intensity (FLOP per HBM byte)")
    ax.set_ylabel("network intensity (FLOP per interconnect byte)")
    ax.grid(True, which="major", linewidth=0.4, alpha=0.5)
    roof_line = (f"roofs: peak {lines.dtype} {lines.peak_flops / 1e12:.4g} TFLOP/s, HBM copy "
                 f"{lines.hbm_bw / 1e9:.4g} GB/s, interconnect "
                 + (lines.net_source if has_net else "none (no all_reduce roof)"))
    fig.text(0.09, 0.965, _titled(fig, title or "ridgeline plane"), fontsize=11, va="top",
             ha="left")
    fig.text(0.09, 0.93, roof_line, fontsize=8.5, va="top", ha="left", color="0.3")
    if left_out.size:
        fig.text(0.09, 0.012, "not on the plane (no FLOPs or no HBM bytes): "
                 + ", ".join(left_out["name"].tolist()), fontsize=8, color="0.3")

    handles = [Line2D([], [], linestyle="none", marker="o", markersize=9,
                      markerfacecolor=CEILING_COLOURS[c], markeredgecolor="black",
                      label=f"ceiling: {c}")
               for c in (*CEILINGS, "none") if c in set(points["ceiling"].tolist())]
    if (points["what"] == "op").any():
        handles.append(Line2D([], [], linestyle="none", marker="o", markersize=6, color="0.6",
                              markeredgecolor="black", label="op"))
    if (points["what"] == "step").any():
        handles.append(Line2D([], [], linestyle="none", marker="*", markersize=15, color="0.6",
                              markeredgecolor="black", label="step"))
    handles.append(Line2D([], [], linestyle="-", label=f"peak / HBM = {xr:.3g} FLOP/B", **ridge))
    if has_net:
        handles += [
            Line2D([], [], linestyle="--", label=f"peak / net = {yr:.3g} FLOP/B", **ridge),
            Line2D([], [], linestyle=":", label="HBM time = network time", **ridge),
        ]
    legend = fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.68, 0.9),
                        fontsize=8, title="colour: measured ceiling\nshade: region of the roofs",
                        title_fontsize=8)
    if step_tags and steps.size:
        # The step tags' key, under the legend.
        below = legend.get_window_extent(FigureCanvasAgg(fig).get_renderer()).y0 / fig.bbox.height
        fig.text(0.685, below - 0.02, "steps\n" + "\n".join(
            f"{tag_of[str(n)]:>3}  {n}" for n in steps["name"]),
            fontsize=8, va="top", family="monospace")
    return _save(fig, path)


# ---- scaling curves and bars of a sweep ----

#: x labels of the axes whose name alone does not say what they count.
AXIS_LABELS = {"prefill_share": "prefill share (prefill tokens / the mixed step's tokens)"}


def _overtaken(group_rows: np.ndarray, crossover: np.void, axis: str) -> str:
    """The class a crossover's rising class passes: the ceiling of the point before it (measured
    rows name it), else the largest other class at the group's last point."""
    before = group_rows[group_rows["point"] == crossover["before_point"]]
    if before.size and before["ceiling"][0] != crossover["kind"]:
        return str(before["ceiling"][0])
    if group_rows.size:
        last = group_rows[-1]
        others = [c for c in CEILINGS if c != crossover["kind"]]
        return max(others, key=lambda c: float(last[f"{c}_ns"]))
    return "?"


def _axis_positions(scaling: Scaling, values: Sequence) -> np.ndarray:
    """x of axis values: the values themselves on numeric axes, their rank among every ok
    value on string axes (NaN for a value not in the sweep)."""
    if scaling.numeric:
        return np.asarray([float(v) for v in values], dtype=np.float64)
    index = {str(v): i for i, v in enumerate(scaling.values)}
    return np.asarray([index.get(str(v), np.nan) for v in values], dtype=np.float64)


def plot_scaling(scaling: Scaling, path: str, title: str = "",
                 predicted: Optional[Scaling] = None) -> str:
    """Step time by ceiling along one sweep axis: per group of the other axes one panel with a
    line per class (compute, hbm, interconnect, launch) and the step p50; crossovers as vertical
    lines in the colour of the class that takes over (predicted ones dashed), annotated with the
    two times that cross. `predicted`: the same axis of a `ridgeline model` file (every point
    predicted); its step of each group is drawn dashed beside the measured one."""
    n = max(1, len(scaling.groups))
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(4.6 * cols + 0.6, 3.8 * rows + 1.2))
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(n)]
    # `predicted` names a crossover's flag below: the model's groups are taken first.
    model_groups = predicted.groups if predicted is not None else []
    predicted_seen = measured_seen = predicted_steps_seen = False
    positive = all(float(v) > 0 for v in scaling.values) if scaling.numeric else False
    log_x = positive and len(scaling.values) > 1 and max(scaling.values) / min(scaling.values) >= 4
    for ax, group in zip(axes, scaling.groups):
        x = _axis_positions(scaling, group.rows[scaling.axis].tolist())
        top = float(group.rows["step_p50_ns"].max()) / 1e6 if group.rows.size else 1.0
        for c in CEILINGS:
            ax.plot(x, group.rows[f"{c}_ns"] / 1e6, marker="o", markersize=4, linewidth=1.4,
                    color=CEILING_COLOURS[c], label=c)
        ax.plot(x, group.rows["step_p50_ns"] / 1e6, marker="s", markersize=5, linewidth=2.2,
                color="black", label="step p50")
        ticks = list(x)
        for other in model_groups:
            if other.name != group.name or not other.rows.size:
                continue
            px = _axis_positions(scaling, other.rows[scaling.axis].tolist())
            ax.plot(px, other.rows["step_p50_ns"] / 1e6, marker="D", markersize=4,
                    linewidth=1.6, linestyle="--", color="black", label="step predicted")
            predicted_steps_seen = True
            top = max(top, float(other.rows["step_p50_ns"].max()) / 1e6)
        notes = []
        for cross in group.crossovers:
            if not cross["at_value"]:
                continue  # none predicted within range: nothing to mark
            at = _axis_positions(scaling, [cross["at_value"]])[0]
            if not np.isfinite(at):
                continue
            predicted = bool(cross["predicted"])
            predicted_seen |= predicted
            measured_seen |= not predicted
            colour = CEILING_COLOURS.get(str(cross["kind"]), "black")
            ax.axvline(at, color=colour, linestyle="--" if predicted else "-", linewidth=1.3,
                       alpha=0.9)
            ticks.append(at)
            notes.append((at, colour, ("predicted: " if predicted else "") + f"{cross['kind']} "
                          f"{cross['rising_ns'] / 1e6:.3g} ms\npasses "
                          f"{_overtaken(group.rows, cross, scaling.axis)} "
                          f"{cross['falling_ns'] / 1e6:.3g} ms"))
        if log_x:
            ax.set_xscale("log", base=2)
        ticks = sorted(set(t for t in ticks if np.isfinite(t)))
        if scaling.numeric:
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.minorticks_off()
            lo, hi = min(ticks), max(ticks)
            pad = (hi / lo) ** 0.12 if log_x and hi > lo else None
            if pad:
                ax.set_xlim(lo / pad, hi * pad)
            elif hi > lo:
                ax.set_xlim(lo - 0.08 * (hi - lo), hi + 0.08 * (hi - lo))
        else:
            ax.set_xticks(range(len(scaling.values)), [str(v) for v in scaling.values])
            ax.set_xlim(-0.5, len(scaling.values) - 0.5)
        # Notes beside their line, on the side with room (inside the panel), stacked downwards.
        for shown, (at, colour, text) in enumerate(notes):
            frac = (ax.transAxes.inverted().transform(ax.transData.transform((at, 1.0))))[0]
            right = frac < 0.5
            ax.annotate(text, (at, 1.0 - 0.03 - 0.16 * shown),
                        xycoords=("data", "axes fraction"), xytext=(4 if right else -4, 0),
                        textcoords="offset points", fontsize=7, va="top",
                        ha="left" if right else "right", color=colour,
                        bbox=dict(boxstyle="round,pad=0.2", facecolor="white", alpha=0.8,
                                  linewidth=0))
        shown = len(notes)
        # Head room for the crossover notes above the curves.
        ax.set_ylim(0, top * (1.15 + 0.3 * shown) if top > 0 else 1.0)
        ax.set_xlabel(AXIS_LABELS.get(scaling.axis, scaling.axis))
        ax.set_ylabel("time per step (ms)")
        ax.set_title(group.name or "every point", fontsize=10)
        ax.grid(True, linewidth=0.4, alpha=0.5)
    if not scaling.groups:
        axes[0].text(0.5, 0.5, "no ok points", ha="center", va="center",
                     transform=axes[0].transAxes)
    handles = [Line2D([], [], color=CEILING_COLOURS[c], marker="o", markersize=4, label=c)
               for c in CEILINGS]
    handles.append(Line2D([], [], color="black", marker="s", linewidth=2.2, label="step p50"))
    if predicted_steps_seen:
        handles.append(Line2D([], [], color="black", marker="D", linestyle="--", linewidth=1.6,
                              label="step predicted"))
    if measured_seen:
        handles.append(Line2D([], [], color="0.3", linestyle="-", label="crossover (measured)"))
    if predicted_seen:
        handles.append(Line2D([], [], color="0.3", linestyle="--", label="crossover (predicted)"))
    fig.suptitle(_titled(fig, title or f"step time by ceiling along {scaling.axis}"),
                 fontsize=11)
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8,
               frameon=False)
    fig.tight_layout(rect=(0, 0.06 if rows == 1 else 0.035, 1, 0.97))
    return _save(fig, path)


def plot_step_bars(points: np.ndarray, path: str, title: str = "") -> str:
    """One bar per /sweep/points row: the step's time stacked by ceiling class (ms) with the
    step p50 marked; failed points (and those an incomplete sweep had not run: pending) as a
    hatched empty bar labelled with their status ("failed", "pending")."""
    n = points.size
    fig = Figure(figsize=(max(6.5, 0.75 * n + 3.5), 5.2))
    ax = fig.add_subplot()
    ok = points["status"] == "ok"
    x = np.arange(n)
    bottom = np.zeros(n)
    for c in CEILINGS:
        height = np.where(ok, points[f"{c}_ns"] / 1e6, 0.0)
        ax.bar(x, height, bottom=bottom, width=0.7, color=CEILING_COLOURS[c], label=c,
               edgecolor="white", linewidth=0.5)
        bottom += height
    top = float(max(bottom.max(), (points["step_p50_ns"][ok] / 1e6).max(initial=0.0))) or 1.0
    if ok.any():
        ax.scatter(x[ok], points["step_p50_ns"][ok] / 1e6, marker="_", s=500, color="black",
                   linewidths=2, zorder=3, label="step p50")
    for i in np.flatnonzero(~ok).tolist():
        ax.bar(i, top * 0.9, width=0.7, fill=False, hatch="//", edgecolor="0.45", linewidth=1)
        word, _, reason = (part.strip() for part in str(points["status"][i]).partition(":"))
        ax.text(i, top * 0.45, word + (f"\n{reason[:40]}" if reason else ""), rotation=90,
                ha="center", va="center", fontsize=7, color="0.25",
                bbox=dict(boxstyle="round,pad=0.2", facecolor="white", alpha=0.85, linewidth=0))
    if (~ok).any():
        words = sorted({str(s).partition(":")[0].strip() for s in points["status"][~ok]})
        ax.bar([np.nan], [0], fill=False, hatch="//", edgecolor="0.45", label=" / ".join(words))
    ax.set_xticks(x, [str(v) for v in points["label"]], rotation=30, ha="right", fontsize=8)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(0, top * 1.08)
    ax.set_ylabel("time per step (ms)")
    ax.set_title(_titled(fig, title or "step time by ceiling, per sweep point"), fontsize=11)
    ax.grid(True, axis="y", linewidth=0.4, alpha=0.5)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_latency(rates: Sequence[Mapping[str, float]], path: str, title: str = "",
                 measured: Sequence[Mapping[str, float]] = ()) -> str:
    """Latency against arrival rate, one row of `rates` per rate (the `rates` table of
    `ridgeline model --trace-gen ... --rates ...`, each row's rate_per_s, ttft_/tpot_ p50, p95
    and p99 in ms, goodput_per_s and throughput_per_s): time to first token and time per output
    token, p50 solid, p95 dashed, p99 dotted, on log axes; and goodput beside throughput, where
    the two part is where requests start to miss their targets. `measured` rows (the same
    columns, from trace runs) are drawn as markers over the lines."""
    rows = sorted(rates, key=lambda r: float(r["rate_per_s"]))
    x = np.array([float(r["rate_per_s"]) for r in rows])
    fig = Figure(figsize=(13, 4.4))
    styles = {"p50": "-", "p95": "--", "p99": ":"}

    def rate_axis(ax: Axes) -> None:
        ax.set_xscale("log")
        ax.set_xticks(x, [f"{v:g}" for v in x])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("arrival rate (requests/s)")
    for k, (metric, label) in enumerate((("ttft", "time to first token (ms)"),
                                         ("tpot", "time per output token (ms)"))):
        ax = fig.add_subplot(1, 3, k + 1)
        for q, style in styles.items():
            y = np.array([float(r[f"{metric}_{q}_ms"]) for r in rows])
            ax.plot(x, y, style, marker="o", markersize=3, color="C0" if k == 0 else "C1",
                    label=q)
        for q, marker in (("p50", "x"), ("p95", "+"), ("p99", "1")):
            if measured:
                ax.plot([float(r["rate_per_s"]) for r in measured],
                        [float(r[f"{metric}_{q}_ms"]) for r in measured], linestyle="none",
                        marker=marker, markersize=8, color="k", label=f"{q} measured")
        rate_axis(ax)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        # Minor ticks at 2x and 5x a power of ten labelled too: a range within one decade
        # still reads.
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25"
                                                   else ""))
        ax.set_ylabel(label)
        ax.grid(True, which="both", linewidth=0.4, alpha=0.5)
        ax.legend(fontsize=8)
    ax = fig.add_subplot(1, 3, 3)
    ax.plot(x, [float(r["throughput_per_s"]) for r in rows], "-", marker="o", markersize=3,
            color="0.4", label="throughput")
    ax.plot(x, [float(r["goodput_per_s"]) for r in rows], "-", marker="o", markersize=3,
            color="C2", label="goodput (within the targets)")
    if measured:
        ax.plot([float(r["rate_per_s"]) for r in measured],
                [float(r["throughput_per_s"]) for r in measured], linestyle="none", marker="x",
                markersize=8, color="0.4", label="throughput measured")
        ax.plot([float(r["rate_per_s"]) for r in measured],
                [float(r["goodput_per_s"]) for r in measured], linestyle="none", marker="+",
                markersize=8, color="C2", label="goodput measured")
    rate_axis(ax)
    ax.set_ylabel("requests/s")
    ax.grid(True, which="both", linewidth=0.4, alpha=0.5)
    ax.legend(fontsize=8)
    fig.suptitle(_titled(fig, title or "latency against arrival rate"), fontsize=11)
    fig.tight_layout()
    return _save(fig, path)
