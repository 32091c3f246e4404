"""Command line: python3 -m ridgeline_analysis
{summary,plot,schedule,trace,ridgeline,scaling,bars,export,validate} FILE [-o OUT]; summary,
scaling, bars, export and validate take several files (scaling and bars join sweep files, export
joins the rows).

A file `ridgeline validate` rejects, and a selection (--point, --iteration, --rank, --op,
--dtype, --axis) that selects nothing, are refused with one line on stderr and exit code 2,
before any output is written. A file whose job ended before it finished (complete = 0) is read,
with one warning line on stderr, and what is made of it is marked INCOMPLETE (`validate` refuses
it). An output that cannot be written is one line on stderr and exit code 1, the file it would
have replaced left as it was (output.write_file)."""
from __future__ import annotations

import argparse
import collections
import json
import os
import stat
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np

from . import analysis, export, output, plots, sweeps, tidy
from .reader import Run, SchemaError, Sweep, check, load

COLUMNS = ("run", "model", "phase", "tp", "pp", "dp", "ranks", "iters", "p50_ms", "p95_ms",
           "exposed_comm_ms", "exposed_ic_ms", "critical", "check", "ceiling")
#: Columns of the summary of a sweep file: one row per /sweep/points row.
SWEEP_COLUMNS = ("run", "label", "status", "p50_ms", "p99_ms", "ceiling", "compute_ms", "hbm_ms",
                 "interconnect_ms", "launch_ms", "exposed_ic_ms", "check")
#: Columns of the pipeline table: one row per stage of each train or scheduled run.
PIPELINE_COLUMNS = ("run", "schedule", "mb", "recompute", "stage", "bubble", "theory", "sim",
                    "p2p_exposed_ms", "dp_exposed_ms", "peak_act_MiB")
PIPELINE_NOTE = ("bubble: share of the iteration (median of the timed ones) in which the stage "
                 "ran none of its own ops; theory: the schedule's bubble with free transfers; "
                 "sim: the same at the measured action times (train with a pipeline); "
                 "p2p_exposed: time the stage's compute waited for pipeline receives; dp_exposed: "
                 "data-parallel reduction left after its last compute op; peak_act: peak "
                 "activation memory of the microbatches in flight\n")
#: Marks a value the file does not store, recomputed (analysis.exposure()).
RECOMPUTED = "*"
#: Picture formats, by the output's suffix.
FORMATS = (".png", ".svg")
#: Marks a table row or a picture's title made of a file whose job ended before it finished.
INCOMPLETE = "(incomplete)"


class Refusal(Exception):
    """A request the file cannot answer: main() prints it as one line and exits 2."""


def _load(path: str, marked: str = f"marked {INCOMPLETE}") -> Run:
    """load(); for a file whose job ended before it finished (Run.complete False), one warning
    line on stderr saying how what is made of it is `marked`."""
    run = load(path)
    if not run.complete:
        print(f"ridgeline_analysis: warning: {path} is incomplete (complete = 0: the job ended "
              f"before it finished); what it holds is partial, {marked}", file=sys.stderr)
    return run


def _mark(*runs: Run) -> str:
    """" (incomplete)" when any of `runs` (files, not points) is incomplete, else ""."""
    return "" if all(run.complete for run in runs) else f" {INCOMPLETE}"


def _runs(path: str, point: Optional[int]) -> Tuple[Run, List[Tuple[str, Run]]]:
    """The file, and (suffix, run): ("", run) for a plain file, ("-p<k>", point k) for each
    point of a sweep file, or only for `point` if given."""
    run = _load(path)
    return run, _points(run, path, point)


def _points(run: Run, path: str, point: Optional[int]) -> List[Tuple[str, Run]]:
    if not run.points:
        if run.summary is None:
            raise Refusal(f"{path}: a `ridgeline {run.attrs.get('command', '?')}` file has no "
                          "timelines; its results are in Run.tables (ridgeline_analysis.load)")
        if point is not None:
            raise Refusal(f"{path}: --point given, but the file has no /points")
        return [("", run)]
    if point is not None and not 0 <= point < len(run.points):
        raise Refusal(f"{path}: no point {point} (the file has {len(run.points)})")
    chosen = range(len(run.points)) if point is None else [point]
    return [(f"-p{k}", run.points[k]) for k in chosen]


def _with_timelines(runs: List[Tuple[str, Run]], path: str) -> List[Tuple[str, Run]]:
    """The runs that have timelines; refuses when none has (a sweep keeps them on request)."""
    kept = [(suffix, run) for suffix, run in runs if run.timelines and run.summary is not None]
    if not kept:
        raise Refusal(f"{path}: no timelines in the file (a sweep keeps its points' timelines "
                      "only when asked to)")
    return kept


def _exposed_ms(value_ns: float, source: str) -> str:
    if source == "none":
        return "-"
    return f"{value_ns / 1e6:.4f}" + ("" if source == "stored" else RECOMPUTED)


def summary_row(label: str, run: Run) -> Tuple[str, ...]:
    """One line of the summary table; every count and time comes from the run's /summary, the
    exposed communication and exposed interconnect as the C++ side stored them
    (analysis.exposure(): marked with RECOMPUTED where the file stores none), the critical lane
    from the timelines (analysis.step_breakdown()), the ceiling from the C++ attribution."""
    cfg = run.config
    steps_ns = run.summary.step_time_ns
    exposed = analysis.exposure(run)
    lanes = analysis.step_breakdown(run.timelines)["critical"].tolist()
    critical = collections.Counter(lanes).most_common(1)[0][0] if lanes else "-"

    def ms(values: np.ndarray, p: float) -> str:
        return f"{np.percentile(values, p) / 1e6:.4f}" if len(values) else "-"

    return (label, str(cfg.get("model", "?")), str(cfg.get("phase", "?")),
            str(cfg.get("tp", "?")), str(cfg.get("pp", "?")), str(cfg.get("dp", "?")),
            str(run.world_size), str(len(steps_ns)), ms(steps_ns, 50), ms(steps_ns, 95),
            _exposed_ms(exposed.comm_ns, exposed.comm_source),
            _exposed_ms(exposed.interconnect_ns, exposed.interconnect_source), critical,
            # passed | failed | skipped: the reason after a colon would break the columns.
            str(run.summary.attrs.get("check", "-")).split(":")[0],
            # The step's ceiling under the measured roofs (files with /roofs).
            str(run.summary.attrs.get("ceiling", "-")))


def sweep_rows(name: str, sweep: Sweep, point: Optional[int] = None) -> List[Tuple[str, ...]]:
    """One line per /sweep/points row (or only point `point`): label, status, step p50 and p99,
    ceiling, the step's time by ceiling and the check, all as the C++ side wrote them."""
    rows = []
    for p in sweep.points:
        if point is not None and int(p["point"]) != point:
            continue
        ok = p["status"] == "ok"

        def ms(value: float) -> str:
            return f"{value / 1e6:.4f}" if ok else "-"

        rows.append((f"{name}-p{int(p['point'])}", str(p["label"]),
                     str(p["status"]).split(":")[0], ms(p["step_p50_ns"]), ms(p["step_p99_ns"]),
                     str(p["ceiling"]) if ok else "-", ms(p["compute_ns"]), ms(p["hbm_ns"]),
                     ms(p["interconnect_ns"]), ms(p["launch_ns"]),
                     ms(p["exposed_interconnect_ns"]), str(p["check"]).split(":")[0] or "-"))
    return rows


def pipeline_rows(label: str, run: Run) -> List[Tuple[str, ...]]:
    """One line per pipeline stage of a train or scheduled run (analysis.pipeline_stages()),
    as the C++ side stored them; none for other runs."""
    attrs = run.summary.attrs
    stages = analysis.pipeline_stages(attrs)
    if stages is None:
        return []
    return [(label, str(attrs.get("schedule", "-")), str(attrs.get("microbatches", "-")),
             str(attrs.get("recompute", "-")), str(int(s["stage"])), f"{s['bubble']:.3f}",
             f"{s['bubble_theory']:.3f}",
             "-" if np.isnan(s["bubble_simulated"]) else f"{s['bubble_simulated']:.3f}",
             f"{s['p2p_exposed_ns'] / 1e6:.4f}",
             f"{s['dp_exposed_ns'] / 1e6:.4f}", f"{s['peak_activation_bytes'] / 2**20:.2f}")
            for s in stages]


def format_table(rows: List[Tuple[str, ...]], columns: Tuple[str, ...] = COLUMNS) -> str:
    widths = [max(len(r[i]) for r in [columns, *rows]) for i in range(len(columns))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip()
                     for r in [columns, *rows]) + "\n"


def cmd_summary(args: argparse.Namespace) -> int:
    rows: List[Tuple[str, ...]] = []
    swept: List[Tuple[str, ...]] = []
    pipeline: List[Tuple[str, ...]] = []
    failures: List[str] = []
    for path in args.files:
        run = _load(path)
        name = os.path.basename(path)
        mark = _mark(run)
        if run.sweep is not None:
            if args.point is not None and not 0 <= args.point < run.sweep.points.size:
                raise Refusal(f"{path}: no point {args.point} (the sweep has "
                              f"{run.sweep.points.size})")
            swept += _marked(sweep_rows(name, run.sweep, args.point), mark)
            failures += [f"{name}-p{int(p['point'])} {p['label']}: {p['status']}"
                         for p in run.sweep.points if p["status"] != "ok"
                         and args.point in (None, int(p["point"]))]
            continue
        for suffix, point in _points(run, path, args.point):
            rows += _marked([summary_row(name + suffix, point)], mark)
            pipeline += _marked(pipeline_rows(name + suffix, point), mark)
    parts = [format_table(rows)] if rows else []
    if any(cell.endswith(RECOMPUTED) for row in rows for cell in row[10:12]):
        parts[0] += (f"{RECOMPUTED} not stored in the file, recomputed: exposed_comm from the "
                     "timelines (comm not hidden under compute), exposed_ic from /summary/ops\n")
    if pipeline:
        parts.append(format_table(pipeline, PIPELINE_COLUMNS) + PIPELINE_NOTE)
    if swept:
        parts.append(format_table(swept, SWEEP_COLUMNS) + "".join(f"{f}\n" for f in failures))
    text = "\n".join(parts)
    if args.output:
        output.write_text(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def _marked(rows: List[Tuple[str, ...]], mark: str) -> List[Tuple[str, ...]]:
    """The rows, `mark` (INCOMPLETE, or "") after the run named in each one's first cell."""
    return [(row[0] + mark, *row[1:]) for row in rows]


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def _range_text(values: List[int]) -> str:
    """"1..3" for consecutive values (sorted, distinct), else "0, 2, 5"; "none" for no values."""
    if not values:
        return "none"
    # Compared by count, not by building the range: the values come from the file.
    if len(values) > 2 and values[-1] - values[0] + 1 == len(values):
        return f"{values[0]}..{values[-1]}"
    return ", ".join(str(v) for v in values)


def _where(path: str, suffix: str) -> str:
    """The file, and the point of a suffix "-p<k>"."""
    return f"{path} point {suffix[2:]}" if suffix else path


def select_rows(run: Run, where: str, args: argparse.Namespace,
                timed_only: bool) -> Dict[int, np.ndarray]:
    """The timeline rows that --rank, --op and --iteration select (each repeatable; all rows
    where none is given), rank -> rows; with timed_only, the timed iterations only. Refuses a
    value that selects nothing (a rank, op or iteration the run does not have), and a
    selection that leaves no row."""
    ranks = sorted(run.timelines)
    if args.rank:
        missing = sorted({r for r in args.rank if r not in run.timelines})
        if missing:
            raise Refusal(f"{where}: no rank {', '.join(map(str, missing))} (ranks: "
                          f"{_range_text(ranks)})")
        ranks = sorted(set(args.rank))
    op_ids = None
    if args.op:
        names = run.op_names().tolist()
        missing = [name for name in dict.fromkeys(args.op) if name not in names]
        if missing:
            raise Refusal(f"{where}: no op {', '.join(repr(m) for m in missing)} (ops: "
                          f"{', '.join(names) or 'none'})")
        op_ids = [names.index(name) for name in args.op]
    rows = {r: analysis.timed_rows(run.timelines[r]) if timed_only else run.timelines[r]
            for r in ranks}
    if args.iteration:
        present = sorted(set().union(*(np.unique(t["iteration"]).tolist()
                                       for t in rows.values())))
        missing = sorted({i for i in args.iteration if i not in present})
        if missing:
            what = "timed iteration" if timed_only else "iteration"
            raise Refusal(f"{where}: no {what} {', '.join(map(str, missing))} (the "
                          f"{what}s: {_range_text(present)})")
        rows = {r: t[np.isin(t["iteration"], args.iteration)] for r, t in rows.items()}
    if op_ids is not None:
        rows = {r: t[np.isin(t["op_id"], op_ids)] for r, t in rows.items()}
    if not any(t.size for t in rows.values()):
        chosen = [f"--{name} {' '.join(map(str, getattr(args, name)))}"
                  for name in ("rank", "op", "iteration") if getattr(args, name)]
        raise Refusal(f"{where}: {' '.join(chosen) or 'the timelines'} select(s) no "
                      f"{'timed ' if timed_only else ''}timeline rows")
    return rows


def cmd_plot(args: argparse.Namespace) -> int:
    whole, runs = _runs(args.file, args.point)
    runs = _with_timelines(runs, args.file)
    out_dir = args.output or os.path.dirname(os.path.abspath(args.file))
    # Every selection is checked before anything is written.
    chosen = [(suffix, run, select_rows(run, _where(args.file, suffix), args, timed_only=True))
              for suffix, run in runs]
    output.make_directory(out_dir)
    for suffix, run, rows in chosen:
        name = _stem(args.file) + suffix
        title = (f"{name}: {run.config.get('model', '?')} tp={run.config.get('tp', '?')}"
                 f"{_mark(whole)}")
        print(plots.plot_timeline(rows, run.op_kinds(),
                                  os.path.join(out_dir, f"{name}-timeline.png"), title=title))
        print(plots.plot_step_histogram(run.summary.step_time_ns,
                                        os.path.join(out_dir, f"{name}-steps.png"),
                                        run.summary.warmup_step_time_ns, title=title))
    return 0


def stage_labels(run: Run, ranks: List[int]) -> Dict[int, str]:
    """rank -> "rank R: stage P" (with its TP and DP ranks where those groups have more than
    one), ordered by stage, replica and TP rank, from /topology (by rank alone without it)."""
    topo = run.topology

    def coord(key: str, rank: int) -> Optional[int]:
        values = topo.get(key)
        return int(values[rank]) if values is not None and rank < len(values) else None

    def order(rank: int) -> Tuple[int, ...]:
        return tuple(c if c is not None else -1 for c in
                     (coord("pp_rank", rank), coord("dp_rank", rank), coord("tp_rank", rank),
                      rank))

    labels = {}
    for rank in sorted(ranks, key=order):
        text = f"rank {rank}"
        stage = coord("pp_rank", rank)
        if stage is not None:
            text += f": stage {stage}"
            for key, group in (("tp_rank", "tp"), ("dp_rank", "dp")):
                if run.config_attr(group, "int", 1) > 1 and coord(key, rank) is not None:
                    text += f" {group} {coord(key, rank)}"
        labels[rank] = text
    return labels


def cmd_schedule(args: argparse.Namespace) -> int:
    whole, runs = _runs(args.file, args.point)
    runs = _with_timelines(runs, args.file)
    if len(runs) > 1:
        raise Refusal(f"{args.file}: {len(runs)} points; choose one with --point K")
    suffix, run = runs[0]
    where = _where(args.file, suffix)
    out = _picture_path(args, f"{suffix[1:]}-schedule" if suffix else "schedule")
    rows = select_rows(run, where, args, timed_only=True)
    if not args.iteration:
        # One iteration by default: the first timed one.
        first = min(int(t["iteration"].min()) for t in rows.values() if t.size)
        rows = {r: t[t["iteration"] == first] for r, t in rows.items()}
    iterations = sorted(set().union(*(np.unique(t["iteration"]).tolist()
                                      for t in rows.values())))
    cfg, attrs = run.config, run.summary.attrs
    schedule = str(attrs.get("schedule", "") or "unscheduled")
    title = (f"{_stem(args.file)}{suffix}: {schedule}, pp={cfg.get('pp', '?')} "
             f"tp={cfg.get('tp', '?')} dp={cfg.get('dp', '?')} "
             f"microbatches={cfg.get('microbatches', '?')}, {cfg.get('phase', '?')}, "
             f"iteration {_range_text(iterations)}{_mark(whole)}")
    print(plots.plot_schedule(rows, run.op_names(), run.op_kinds(), out,
                              labels=stage_labels(run, sorted(rows)),
                              split_backward=schedule == "zb-h1", title=title))
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    whole, runs = _runs(args.file, args.point)
    runs = _with_timelines(runs, args.file)
    if len(runs) > 1:
        raise Refusal(f"{args.file}: {len(runs)} points; choose one with --point K")
    suffix, run = runs[0]
    rows = select_rows(run, _where(args.file, suffix), args, timed_only=False)
    out = args.output or os.path.join(os.path.dirname(os.path.abspath(args.file)),
                                      _stem(args.file) + ".trace.json")
    # The trace's otherData holds the root attributes: an incomplete file's say complete = 0
    # (a sweep's own mark is in /sweep).
    metadata = run.attrs if whole.complete else {**run.attrs, "complete": 0}
    print(export.write_trace(out, rows, run.op_names(), run.op_kinds(), metadata,
                             strategy=export.strategy_of(run.config)))
    return 0


#: Why a table has no rows, by --table.
NO_ROWS = {
    "timeline": "no timelines (a sweep keeps its points' timelines only with --keep-timelines; "
                "--table points has its points)",
    "points": "no sweep points (/sweep/points): none is a sweep file",
    "repeats": "no repeats (/sweep/repeats): none is a sweep file that repeated its points",
}


def _check_export_paths(paths: List[str], output: str) -> None:
    """Refuses, before any file is opened, an input that is not a regular file (opening a FIFO
    blocks until something writes to it) and an output that is an input under any name (a
    symbolic or hard link too), which the export would replace."""
    target = os.stat(output) if os.path.exists(output) else None
    for path in paths:
        try:
            info = os.stat(path)
        except OSError as e:
            raise Refusal(f"{path}: {e.strerror}")
        if not stat.S_ISREG(info.st_mode):
            what = ("a FIFO" if stat.S_ISFIFO(info.st_mode) else
                    "a directory" if stat.S_ISDIR(info.st_mode) else "a special file")
            raise Refusal(f"{path}: not a regular file ({what})")
        if target is not None and (target.st_dev, target.st_ino) == (info.st_dev, info.st_ino):
            raise Refusal(f"{output}: is the input {path} (the same file); write the export "
                          "elsewhere")


def cmd_export(args: argparse.Namespace) -> int:
    _check_export_paths(args.files, args.output)
    runs = [_load(path, "its rows have complete = False") for path in args.files]
    table = tidy.frame(runs, args.table)
    if table.empty:
        raise Refusal(f"{', '.join(args.files)}: {NO_ROWS[args.table]}")
    print(tidy.write(table, args.output, args.format))
    return 0


def _picture_path(args: argparse.Namespace, what: str) -> str:
    """-o OUT (its suffix names the format), else <FILE's stem>-<what>.png beside FILE; for
    several files <stem>+<stem>...-<what>.png beside the first."""
    if args.output:
        if os.path.splitext(args.output)[1].lower() not in FORMATS:
            raise Refusal(f"{args.output}: the output's suffix names the format; use one of "
                          f"{', '.join(FORMATS)}")
        return args.output
    files = getattr(args, "files", None) or [args.file]
    return os.path.join(os.path.dirname(os.path.abspath(files[0])),
                        f"{'+'.join(_stem(f) for f in files)}-{what}.png")


def _sweep_of(run: Run, path: str, command: str) -> Sweep:
    if run.sweep is None:
        raise Refusal(f"{path}: not a sweep file (command {run.command or '?'}); `{command}` "
                      "needs the file of a `ridgeline sweep`")
    return run.sweep


def _joined_sweep(paths: List[str], command: str) -> Tuple[Sweep, str]:
    """One file's /sweep, or the join of several (sweeps.join_sweeps); and the mark of the
    files (INCOMPLETE if any is incomplete, else "")."""
    runs = [_load(path) for path in paths]
    if len(paths) == 1:
        return _sweep_of(runs[0], paths[0], command), _mark(*runs)
    try:
        return sweeps.join_sweeps(runs), _mark(*runs)
    except sweeps.JoinError as e:
        raise Refusal(f"{command}: {e}")


def _names(paths: List[str]) -> str:
    return " + ".join(os.path.basename(path) for path in paths)


def cmd_ridgeline(args: argparse.Namespace) -> int:
    run = _load(args.file)
    if run.roofs is None:
        raise Refusal(f"{args.file}: no /roofs in the file (it was run with --roofs none, or "
                      "before roofs were recorded); the ridgeline plane needs them")
    if args.dtype and args.dtype not in run.roofs.peak_tflops():
        raise Refusal(f"{args.file}: no GEMM roof of dtype {args.dtype!r} (the roofs have: "
                      f"{', '.join(sorted(run.roofs.peak_tflops())) or 'none'})")
    try:
        lines = analysis.ridge_lines(run.roofs, args.dtype or str(run.config.get("dtype", "")))
    except ValueError as e:
        raise Refusal(f"{args.file}: {e}")
    tags = None
    if run.sweep is not None:
        parts = [analysis.sweep_step_points(run.sweep.points)]
        tags = {str(p["label"]): str(int(p["point"])) for p in run.sweep.points}
        for k in args.point or []:
            if not 0 <= k < len(run.points) or run.points[k].summary is None:
                raise Refusal(f"{args.file}: point {k} has no summary (not an ok point of the "
                              f"{len(run.points)})")
            ops = analysis.ridgeline_points(run.points[k].summary.ops, None)
            ops["name"] = [f"{k}:{name}" for name in ops["name"]]
            parts.append(ops)
        points = np.concatenate(parts)
        title = f"{os.path.basename(args.file)}: sweep over {', '.join(run.sweep.axes)}"
    else:
        if args.point:
            raise Refusal(f"{args.file}: --point is for sweep files")
        cfg = run.config
        if run.summary is None:  # a roofs file: the plane and its lines only
            points = analysis.ridgeline_points(None, None)
            title = f"{os.path.basename(args.file)}: the roofs of `ridgeline {run.command}`"
        else:
            points = analysis.ridgeline_points(run.summary.ops, run.summary.attrs)
            title = (f"{os.path.basename(args.file)}: {cfg.get('model', '?')} "
                     f"{cfg.get('phase', '')} tp={cfg.get('tp', '?')} "
                     f"batch={cfg.get('batch', '?')}")
    print(plots.plot_ridgeline(lines, points, _picture_path(args, "ridgeline"),
                               title=title + _mark(run), step_tags=tags))
    return 0


def cmd_scaling(args: argparse.Namespace) -> int:
    sweep, mark = _joined_sweep(args.files, "scaling")
    if args.axis not in sweep.axes:
        what = "sweep" if len(args.files) == 1 else "join"
        raise Refusal(f"{', '.join(args.files)}: {args.axis!r} is not an axis of this {what}; "
                      f"its axes: {', '.join(sweep.axes) or 'none (one point)'}")
    scaling = sweeps.scaling_series(sweep, args.axis)
    predicted = None
    if args.predicted:
        model, model_mark = _joined_sweep([args.predicted], "scaling")
        if args.axis not in model.axes:
            raise Refusal(f"{args.predicted}: {args.axis!r} is not an axis of this file")
        predicted = sweeps.scaling_series(model, args.axis)
        mark = mark or model_mark
    title = f"{_names(args.files)}: step time by ceiling along {args.axis}{mark}"
    print(plots.plot_scaling(scaling, _picture_path(args, f"scaling-{args.axis}"), title=title,
                             predicted=predicted))
    return 0


def cmd_bars(args: argparse.Namespace) -> int:
    sweep, mark = _joined_sweep(args.files, "bars")
    title = f"{_names(args.files)}: step time by ceiling, per point{mark}"
    print(plots.plot_step_bars(sweep.points, _picture_path(args, "bars"), title=title))
    return 0


RATE_COLUMNS = ("rate_per_s", "ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "tpot_p50_ms",
                "tpot_p95_ms", "tpot_p99_ms", "goodput_per_s", "throughput_per_s")


def load_rates(path: str) -> List[dict]:
    """The `rates` table of a `ridgeline model --trace-gen ... --rates ... --json FILE`: one row
    per arrival rate; anything else refused."""
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except (OSError, ValueError) as e:
        raise Refusal(f"{path}: not a readable JSON file: {e}") from e
    rows = document.get("rates") if isinstance(document, dict) else None
    if not isinstance(rows, list) or not rows:
        raise Refusal(f"{path}: no `rates` table; write one with `ridgeline model --trace-gen "
                      "... --rates R,R,... --json FILE`")
    for i, row in enumerate(rows):
        missing = [c for c in RATE_COLUMNS
                   if not isinstance(row, dict) or not isinstance(row.get(c), (int, float))]
        if missing:
            raise Refusal(f"{path}: rates row {i} lacks {', '.join(missing)}")
    return rows


def measured_rates(paths: List[str]) -> List[dict]:
    """One row of RATE_COLUMNS per trace-run file (`ridgeline run --phase mixed --trace-gen`
    or `--trace`): its /serving percentiles in ms, goodput and throughput, at the rate= of its
    --trace-gen, else its trace's mean arrival rate ((requests - 1) / the last arrival)."""
    rows = []
    for path in paths:
        run = load(path)
        if run.serving is None:
            raise Refusal(f"{path}: no /serving: not a trace run (`ridgeline run --phase mixed "
                          "--trace-gen ...` writes one)")
        a = run.serving.attrs
        rate = None
        for item in str(run.config.get("trace_gen", "")).split(","):
            key, _, value = item.partition("=")
            if key.strip() == "rate":
                rate = float(value)
        if rate is None:
            arrivals = run.serving.requests["arrival_s"]
            if len(arrivals) < 2 or arrivals[-1] <= arrivals[0]:
                raise Refusal(f"{path}: its trace has no arrival rate (fewer than two arrival "
                              "times)")
            rate = (len(arrivals) - 1) / float(arrivals[-1] - arrivals[0])
        row = {"rate_per_s": rate, "goodput_per_s": float(a["goodput_per_s"]),
               "throughput_per_s": float(a["throughput_per_s"])}
        for metric in ("ttft", "tpot"):
            for q in ("p50", "p95", "p99"):
                row[f"{metric}_{q}_ms"] = 1e3 * float(a[f"{metric}_{q}_s"])
        rows.append(row)
    return rows


def cmd_latency(args: argparse.Namespace) -> int:
    rows = load_rates(args.file)
    measured = measured_rates(args.measured or [])
    title = (f"{os.path.basename(args.file)}: latency against arrival rate (predicted"
             + (f"; {len(measured)} measured trace run(s) as markers)" if measured else ")"))
    print(plots.plot_latency(rows, _picture_path(args, "latency"), title=title,
                             measured=measured))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """Each file checked as `ridgeline validate` checks it (validate.problems()), a file whose
    job ended before it finished included: "PATH: valid" for each, or the first file with a
    problem refused (its first problem, and how many more, on one line)."""
    for path in args.files:
        check(path)
        print(f"{path}: valid")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m ridgeline_analysis",
        description="Summaries, plots, Perfetto traces and tidy tables of ridgeline HDF5 run and "
        "sweep files.")
    sub = parser.add_subparsers(dest="command", required=True)
    point_help = "sweep files: only point K (/points/K)"

    p = sub.add_parser("summary", help="one line per run (or sweep point): step time, exposed comm")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-o", "--output", metavar="OUT", help="write the table to OUT, not stdout")
    p.add_argument("--point", type=int, metavar="K", help=point_help)
    p.set_defaults(func=cmd_summary)

    def selections(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument("--iteration", type=int, action="append", metavar="N",
                       help=f"{what} only iteration N (repeatable)")
        p.add_argument("--rank", type=int, action="append", metavar="R",
                       help=f"{what} only rank R (repeatable)")
        p.add_argument("--op", action="append", metavar="NAME",
                       help=f"{what} only the op NAME, as in /ops (repeatable)")

    p = sub.add_parser("plot", help="timeline Gantt chart and step-time histogram (PNG)")
    p.add_argument("file", metavar="FILE")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="directory for the PNG files (default: the file's directory)")
    selections(p, "in the Gantt chart, plot")
    p.add_argument("--point", type=int, metavar="K", help=point_help)
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("schedule", help="a pipeline schedule as it ran: one row per rank, "
                       "forward, B, W and p2p ops coloured, microbatch numbers (PNG or SVG)")
    p.add_argument("file", metavar="FILE")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="picture to write, .png or .svg (default: FILE's name + -schedule.png "
                   "beside it)")
    p.add_argument("--iteration", type=int, action="append", metavar="N",
                   help="draw timed iteration N (repeatable; default: the first timed one)")
    p.add_argument("--rank", type=int, action="append", metavar="R",
                   help="draw only rank R (repeatable)")
    p.add_argument("--point", type=int, metavar="K",
                   help="files with points: point K (needed when there are several)")
    p.set_defaults(func=cmd_schedule, op=None)

    p = sub.add_parser("trace", help="Chrome/Perfetto trace JSON (open in ui.perfetto.dev)")
    p.add_argument("file", metavar="FILE")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="JSON file to write (default: FILE's name with .trace.json)")
    selections(p, "export")
    p.add_argument("--point", type=int, metavar="K", help=point_help)
    p.set_defaults(func=cmd_trace)

    out_help = "picture to write, .png or .svg (default: FILE's name + -{}.png beside it)"
    p = sub.add_parser("ridgeline", help="the ridgeline plane: ops and steps against the roofs")
    p.add_argument("file", metavar="FILE")
    p.add_argument("-o", "--output", metavar="OUT", help=out_help.format("ridgeline"))
    p.add_argument("--point", type=int, action="append", metavar="K",
                   help="sweep files: also draw the ops of point K (repeatable)")
    p.add_argument("--dtype", metavar="DTYPE",
                   help="GEMM peak of this dtype (default: the run's dtype, else the highest)")
    p.set_defaults(func=cmd_ridgeline)

    join_help = "sweep files; several are joined into one sweep (e.g. one per transport)"
    p = sub.add_parser("scaling", help="sweep files: step time by ceiling along one axis")
    p.add_argument("files", nargs="+", metavar="FILE", help=join_help)
    p.add_argument("--axis", required=True,
                   help="one of the sweep's axes (e.g. tp, batch; transport for a join)")
    p.add_argument("--predicted", metavar="MODEL_FILE",
                   help="a `ridgeline model` file: its predicted steps drawn dashed beside")
    p.add_argument("-o", "--output", metavar="OUT", help=out_help.format("scaling-AXIS"))
    p.set_defaults(func=cmd_scaling)

    p = sub.add_parser("bars", help="sweep files: stacked step time by ceiling, one bar per point")
    p.add_argument("files", nargs="+", metavar="FILE", help=join_help)
    p.add_argument("-o", "--output", metavar="OUT", help=out_help.format("bars"))
    p.set_defaults(func=cmd_bars)

    p = sub.add_parser("latency", help="`ridgeline model --rates` JSON: time to first token, "
                       "time per output token and goodput against arrival rate")
    p.add_argument("file", metavar="FILE", help="the --json file of `ridgeline model "
                   "--trace-gen ... --rates ...`")
    p.add_argument("--measured", nargs="+", metavar="RUN",
                   help="trace-run files (`ridgeline run --phase mixed --trace-gen ...`) drawn "
                   "as markers beside the predictions, each at its --trace-gen rate")
    p.add_argument("-o", "--output", metavar="OUT", help=out_help.format("latency"))
    p.set_defaults(func=cmd_latency)

    p = sub.add_parser("export", help="one tidy table of the files (CSV, Parquet or JSON): "
                       "timeline rows, sweep points or their repeats, with configuration, "
                       "transport, ceiling times and stack on every row")
    p.add_argument("files", nargs="+", metavar="FILE", help="run or sweep files; their rows "
                   "are joined, a column `file` naming each row's")
    p.add_argument("--format", required=True, choices=tidy.FORMATS)
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="file to write (replaced only once the whole table is written)")
    p.add_argument("--table", choices=tidy.TABLES, default="timeline",
                   help="timeline: a row per rank, op instance and iteration (default); points: "
                   "a row per sweep point; repeats: a row per repeat of a sweep point; "
                   "serving_steps, serving_requests: a row per step run or request replayed "
                   "of a trace run")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("validate", help="check files as `ridgeline validate` does: a file with "
                       "a problem (an incomplete one too) is refused, exit code 2")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.set_defaults(func=cmd_validate)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except output.WriteError as e:
        print(f"ridgeline_analysis: {e}", file=sys.stderr)
        return 1
    except (SchemaError, OSError, Refusal, tidy.MissingPackage) as e:
        print(f"ridgeline_analysis: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
