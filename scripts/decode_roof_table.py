"""Decode against the HBM roof: for every decode point of `ridgeline sweep` files, the bytes one
step moves through HBM (the work model's `step_hbm_bytes` of /sweep/points: the weights and the
KV cache read, plus the step's small activation traffic), the step p50, the bandwidth those
imply, and its fraction of the measured device copy bandwidth (the /roofs/memory copy row at the
largest size, beyond the caches), against a target fraction.

    python3 scripts/decode_roof_table.py [--target 0.85] [--markdown OUT.md] SWEEP.h5 [...]

Prints one row per point (failed points with their reason) and how many points reach the target,
per attention implementation and GEMM algorithm choice when the files hold several. The points
of a sweep whose job ended before it finished (complete = 0) are marked "(incomplete)", with one
warning line on stderr; a markdown file that cannot be written is one line on stderr, exit 1.
"""
import argparse
import sys
from dataclasses import dataclass
from typing import List, Optional

from ridgeline_analysis import output, reader
from ridgeline_analysis.tables import format_columns

#: Marks the rows of a sweep whose job ended before it finished.
INCOMPLETE = "(incomplete)"


@dataclass
class Row:
    file: str
    model: str
    tp: int
    batch: int
    context: int
    graphs: bool
    gemm_algo: str
    attention: str
    status: str
    step_bytes: float = 0.0
    step_p50_ns: float = 0.0
    gbps: float = 0.0
    roof_gbps: float = 0.0
    fraction: float = 0.0
    complete: bool = True


def copy_roof_gbps(run: reader.Run) -> Optional[float]:
    """The copy bandwidth at the largest measured size (GB/s), or None without roofs."""
    if run.roofs is None:
        return None
    memory = run.roofs.memory
    copies = memory[memory["kind"] == "copy"]
    if copies.size == 0:
        return None
    return float(copies[copies["bytes"].argmax()]["gbps"])


def rows_of(path: str) -> List[Row]:
    run = reader.load(path)
    if run.sweep is None:
        raise reader.SchemaError(f"{path}: not a sweep file (root command is '{run.command}')")
    if not run.complete:
        print(f"decode_roof_table: warning: {path} is incomplete (complete = 0: the job ended "
              f"before it finished); its points are partial, marked {INCOMPLETE}",
              file=sys.stderr)
    roof = copy_roof_gbps(run)
    model = str(run.config.get("model", ""))
    graphs = bool(run.config.get("graphs", 0))
    gemm_algo = str(run.config.get("gemm_algo", "heuristic"))
    attention = str(run.config.get("attention", "fused"))
    out = []
    for p in run.sweep.points:
        if p["phase"] != "decode":
            continue
        row = Row(path, model, int(p["tp"]), int(p["batch"]), int(p["context"]), graphs,
                  gemm_algo, attention, str(p["status"]), complete=run.complete)
        if row.status == "ok":
            row.step_bytes = float(p["step_hbm_bytes"])
            row.step_p50_ns = float(p["step_p50_ns"])
            row.gbps = row.step_bytes / row.step_p50_ns if row.step_p50_ns > 0 else 0.0
            if roof:
                row.roof_gbps = roof
                row.fraction = row.gbps / roof
        out.append(row)
    return out


def format_table(rows: List[Row], target: float, markdown: bool = False) -> str:
    head = ["model", "tp", "batch", "context", "graphs", "gemm", "attention", "GB/step", "step p50 us", "GB/s",
            "copy roof GB/s", "fraction", f">= {target:g}"]
    body = []
    for r in rows:
        model = r.model if r.complete else f"{r.model} {INCOMPLETE}"
        if r.status != "ok":
            body.append([model, str(r.tp), str(r.batch), str(r.context),
                         "yes" if r.graphs else "no", r.gemm_algo, r.attention, "", "", "", "", "",
                         r.status])
            continue
        roof = f"{r.roof_gbps:.0f}" if r.roof_gbps else "no roofs"
        fraction = f"{r.fraction:.3f}" if r.roof_gbps else ""
        meets = ("yes" if r.fraction >= target else "no") if r.roof_gbps else ""
        body.append([model, str(r.tp), str(r.batch), str(r.context),
                     "yes" if r.graphs else "no", r.gemm_algo, r.attention,
                     f"{r.step_bytes / 1e9:.4f}", f"{r.step_p50_ns / 1e3:.1f}", f"{r.gbps:.0f}",
                     roof, fraction, meets])
    return format_columns(head, body, left=1, markdown=markdown)


def summary_line(rows: List[Row], target: float) -> str:
    measured = [r for r in rows if r.status == "ok" and r.roof_gbps]
    meeting = [r for r in measured if r.fraction >= target]
    failed = sum(r.status != "ok" for r in rows)
    return (f"{len(meeting)} of {len(measured)} measured decode points at >= {target:g} of the "
            f"copy roof; {failed} failed")


def summary_lines(rows: List[Row], target: float) -> List[str]:
    """One line per (attention, GEMM algorithm) when the files hold several, then the total."""
    groups = sorted({(r.attention, r.gemm_algo) for r in rows})
    lines = []
    if len(groups) > 1:
        for attention, algo in groups:
            part = [r for r in rows if (r.attention, r.gemm_algo) == (attention, algo)]
            lines.append(f"attention {attention}, gemm {algo}: {summary_line(part, target)}")
    return lines + [summary_line(rows, target)]


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="sweep files (ridgeline sweep --phase decode)")
    ap.add_argument("--target", type=float, default=0.85,
                    help="fraction of the copy roof a point should reach (default 0.85)")
    ap.add_argument("--markdown", help="also write the table as markdown to this file")
    args = ap.parse_args(argv)
    rows: List[Row] = []
    try:
        for path in args.files:
            rows += rows_of(path)
    except reader.SchemaError as e:
        print(f"decode_roof_table: {e}", file=sys.stderr)
        return 2
    summary = "\n".join(summary_lines(rows, args.target)) + "\n"
    print(format_table(rows, args.target), end="")
    print(summary, end="")
    if args.markdown:
        try:
            output.write_text(args.markdown, format_table(rows, args.target, markdown=True)
                              + "\n" + summary.replace("\n", "  \n"))
        except output.WriteError as e:
            print(f"decode_roof_table: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
