"""Command line: python3 -m ridgeline_analysis {summary,plot,trace} FILE [-o OUT]."""
from __future__ import annotations

import argparse
import collections
import os
import sys
from typing import List, Optional, Tuple

import numpy as np

from . import analysis, export, plots
from .reader import Run, SchemaError, load

COLUMNS = ("run", "model", "phase", "tp", "pp", "dp", "ranks", "iters", "p50_ms", "p95_ms",
           "exposed_comm_p50_ms", "critical", "check")


def _runs(path: str, point: Optional[int]) -> List[Tuple[str, Run]]:
    """(suffix, run): ("", run) for a plain file, ("-p<k>", point k) for each point of a sweep
    file, or only for `point` if given."""
    run = load(path)
    if not run.points:
        if run.summary is None:
            raise SystemExit(f"{path}: a `ridgeline {run.attrs.get('command', '?')}` file has no "
                             "timelines; its results are in Run.tables (ridgeline_analysis.load)")
        if point is not None:
            raise SystemExit(f"{path}: --point given, but the file has no /points")
        return [("", run)]
    if point is not None and not 0 <= point < len(run.points):
        raise SystemExit(f"{path}: no point {point} (the file has {len(run.points)})")
    chosen = range(len(run.points)) if point is None else [point]
    return [(f"-p{k}", run.points[k]) for k in chosen]


def summary_row(label: str, run: Run) -> Tuple[str, ...]:
    """One line of the summary table; every count and time comes from the run's timelines and
    /summary, the exposed communication and critical lane from analysis."""
    cfg = run.config
    steps_ns = run.summary.step_time_ns
    _, exposed_ns = analysis.exposed_comm_ns(run.timelines)
    lanes = analysis.step_breakdown(run.timelines)["critical"].tolist()
    critical = collections.Counter(lanes).most_common(1)[0][0] if lanes else "-"

    def ms(values: np.ndarray, p: float) -> str:
        return f"{np.percentile(values, p) / 1e6:.4f}" if len(values) else "-"

    return (label, str(cfg.get("model", "?")), str(cfg.get("phase", "?")),
            str(cfg.get("tp", "?")), str(cfg.get("pp", "?")), str(cfg.get("dp", "?")),
            str(run.world_size), str(len(steps_ns)), ms(steps_ns, 50), ms(steps_ns, 95),
            ms(exposed_ns, 50), critical,
            # passed | failed | skipped: the reason after a colon would break the columns.
            str(run.summary.attrs.get("check", "-")).split(":")[0])


def format_table(rows: List[Tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip()
                     for r in [COLUMNS, *rows]) + "\n"


def cmd_summary(args: argparse.Namespace) -> int:
    rows = []
    for path in args.files:
        rows += [summary_row(os.path.basename(path) + suffix, run)
                 for suffix, run in _runs(path, args.point)]
    text = format_table(rows)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def cmd_plot(args: argparse.Namespace) -> int:
    out_dir = args.output or os.path.dirname(os.path.abspath(args.file))
    os.makedirs(out_dir, exist_ok=True)
    for suffix, run in _runs(args.file, args.point):
        name = _stem(args.file) + suffix
        title = f"{name}: {run.config.get('model', '?')} tp={run.config.get('tp', '?')}"
        print(plots.plot_timeline(run.timelines, run.op_kinds(),
                                  os.path.join(out_dir, f"{name}-timeline.png"),
                                  iterations=args.iteration, title=title))
        print(plots.plot_step_histogram(run.summary.step_time_ns,
                                        os.path.join(out_dir, f"{name}-steps.png"),
                                        run.summary.warmup_step_time_ns, title=title))
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    runs = _runs(args.file, args.point)
    if len(runs) > 1:
        raise SystemExit(f"{args.file}: a sweep file; choose one point with --point K")
    _, run = runs[0]
    out = args.output or os.path.join(os.path.dirname(os.path.abspath(args.file)),
                                      _stem(args.file) + ".trace.json")
    print(export.write_trace(out, run.timelines, run.op_names(), run.op_kinds(), run.attrs))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m ridgeline_analysis",
        description="Summaries, plots and Perfetto traces of ridgeline HDF5 run files.")
    sub = parser.add_subparsers(dest="command", required=True)
    point_help = "sweep files: only point K (/points/K)"

    p = sub.add_parser("summary", help="one line per run (or sweep point): step time, exposed comm")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-o", "--output", metavar="OUT", help="write the table to OUT, not stdout")
    p.add_argument("--point", type=int, metavar="K", help=point_help)
    p.set_defaults(func=cmd_summary)

    p = sub.add_parser("plot", help="timeline Gantt chart and step-time histogram (PNG)")
    p.add_argument("file", metavar="FILE")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="directory for the PNG files (default: the file's directory)")
    p.add_argument("--iteration", type=int, action="append", metavar="N",
                   help="plot only iteration N in the Gantt chart (repeatable)")
    p.add_argument("--point", type=int, metavar="K", help=point_help)
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("trace", help="Chrome/Perfetto trace JSON (open in ui.perfetto.dev)")
    p.add_argument("file", metavar="FILE")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="JSON file to write (default: FILE's name with .trace.json)")
    p.add_argument("--point", type=int, metavar="K", help=point_help)
    p.set_defaults(func=cmd_trace)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SchemaError, OSError) as e:
        print(f"ridgeline_analysis: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
