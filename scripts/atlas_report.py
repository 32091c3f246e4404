#!/usr/bin/env python3
"""The crossover atlas's tables and pictures from the files of scripts/atlas.sh.

    atlas_report.py OUTPAGE ATLAS_DIR [ATLAS_DIR...]

Each ATLAS_DIR holds h5/ with sweep_<model>_<phase>_<transport>.h5 (measured, with repeats),
predicted_<model>_<phase>_<transport>_*.h5 (`ridgeline model` past the node) and
validate_sweep_*.json (`model --validate`). Writes into OUTPAGE:
  - atlas_<phase>.png: per model, the step by ceiling along TP (one slice of the grid), each
    transport side by side, the median step's 95 % interval drawn, the crossovers marked and the
    predicted points hatched;
  - headline.md: per model x phase x transport in one line: the TP step at which the
    interconnect becomes the ceiling, in how many slices, one example with its intervals, the
    roofs' prediction where it does not within the node, and what bounds the rest;
  - crossovers.md / crossovers.csv: per model x phase x transport, where the interconnect becomes
    the ceiling along TP (measured, with the two crossing times and their intervals, or
    predicted) and what bounds the other points;
  - transport.md: per model x phase, the points the host path makes interconnect-bound while
    NVLink keeps them compute- or HBM-bound (the join of the two sweeps along the transport);
  - model_error.md: the model's step error on every measured point;
  - train_layouts.md: the train step at the node's largest TP beside TP/2 x PP2;
  - repro.md: the crossovers of each sweep run twice, side by side;
  - custom_ar.md: decode with NCCL's all-reduce beside the custom one where it is faster
    (customar_<model>_decode_{nccl,auto}_<transport>.h5, with the tables
    allreduce_g<G>_<transport>.h5 the choice came from), point by point with intervals.
"""
import csv
import glob
import json
import os
import re
import sys
from collections import Counter, defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ridgeline_analysis import output  # noqa: E402
from ridgeline_analysis import sweeps as sweep_analysis  # noqa: E402
from ridgeline_analysis.reader import load  # noqa: E402

CLASSES = ("compute", "hbm", "interconnect", "launch")
COLORS = {"compute": "#4c72b0", "hbm": "#55a868", "interconnect": "#c44e52", "launch": "#8c8c8c"}
#: The slice of each phase's grid that its picture shows (the rest is in the tables).
SLICES = {"prefill": {"seq": 8192}, "decode": {"batch": 64, "context": 8192},
          "train": {"seq": 4096}}
SWEEP = re.compile(r"sweep_(?P<model>.+)_(?P<phase>prefill|decode|train)_(?P<transport>[a-z]+)"
                   r"(?P<again>_again)?\.h5$")
PREDICTED = re.compile(r"predicted_(?P<model>.+)_(?P<phase>prefill|decode)_(?P<transport>[a-z]+)_"
                       r"(?P<kind>tp\d+|nodes)\.h5$")


def us(ns):
    return f"{ns / 1e3:.1f}"


def files(dirs, pattern):
    found = {}
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "h5", "*.h5"))):
            m = pattern.search(os.path.basename(path))
            if m:
                found[tuple(v or "" for v in m.groupdict().values())] = path
    return found


def in_slice(points, phase):
    keep = np.ones(points.size, dtype=bool)
    for axis, value in SLICES[phase].items():
        if axis in points.dtype.names and value in points[axis]:
            keep &= points[axis] == value
    return points[keep & (points["status"] == "ok")]


def along_tp(sweeps):
    """Each first-run sweep (model, phase, transport, run, its ok points, its crossovers along
    TP as a list), in name order."""
    for (model, phase, transport, again), path in sorted(sweeps.items()):
        if again:
            continue
        run = load(path)
        points, cross = run.sweep.points, run.sweep.crossovers
        along = list(cross[cross["axis"] == "tp"]) if cross.size else []
        yield model, phase, transport, run, points[points["status"] == "ok"], along


def crossover_rows(sweeps):
    """Per (model, phase, transport): the TP crossovers of its file, measured and predicted."""
    rows = []
    for model, phase, transport, run, ok, along in along_tp(sweeps):
        measured = [c for c in along if int(c["predicted"]) == 0 and c["kind"] == "interconnect"]
        predicted = [c for c in along if int(c["predicted"]) == 1 and str(c["at_value"])]
        first = [c for c in along if str(c["status"]) == "from the first point"]
        bounds = Counter(str(p["ceiling"]) for p in ok)
        rows.append({
            "model": model, "phase": phase, "transport": transport,
            "points": int(run.sweep.points.size), "ok": int(ok.size),
            "measured": "; ".join(
                f"[{c['fixed']}] tp {c['before_value']}->{c['at_value']} {c['status']}: "
                f"interconnect {us(c['rising_ns'])} us [{us(c['rising_lo_ns'])}, "
                f"{us(c['rising_hi_ns'])}] vs {us(c['falling_ns'])} us "
                f"[{us(c['falling_lo_ns'])}, {us(c['falling_hi_ns'])}]" for c in measured),
            "from_first": "; ".join(f"[{c['fixed']}]" for c in first),
            "predicted": predicted_text(predicted),
            "bounds": ", ".join(f"{k} {v}" for k, v in bounds.most_common()),
        })
    return rows


def headline_rows(sweeps):
    """Per model x phase x transport, in a line each: where along TP the interconnect becomes
    the ceiling (measured: the step and in how many slices of the grid, with the picture's slice
    or the first as the example, its two crossing times and their intervals; else the roofs'
    predicted TP, a point estimate) and what bounds the other points."""
    rows = []
    for model, phase, transport, run, ok, along in along_tp(sweeps):
        lines = {sweep_analysis._describe(p, [a for a in run.sweep.axes if a != "tp"], "tp")
                 for p in ok}
        found = [c for c in along if int(c["predicted"]) == 0 and c["kind"] == "interconnect"
                 and str(c["status"]) in ("found", "unrepeated")]
        noisy = [c for c in along if str(c["status"]) == "within noise"]
        first = [c for c in along if str(c["status"]) == "from the first point"]
        steps = Counter(f"TP{c['before_value']}->TP{c['at_value']}" for c in found)
        measured = ", ".join(f"{k} in {v} of {len(lines)} slices" for k, v in steps.most_common())
        if first:
            measured += (", " if measured else "") + f"from TP1 in {len(first)} of {len(lines)}"
        if noisy:
            measured += (", " if measured else "") + f"{len(noisy)} within noise"
        example = ""
        want = " ".join(f"{k}={v}" for k, v in SLICES[phase].items()
                        if k in run.sweep.axes)
        pick = [c for c in found if str(c["fixed"]) == want] or found
        if pick:
            c = pick[0]
            old = re.match(r"^\w+ .*? vs (\w+) ", str(c["note"]))
            example = (f"{c['fixed'] or 'the point'}: interconnect {ms_text(c, 'rising')} vs "
                       f"{old.group(1) if old else 'the other'} {ms_text(c, 'falling')} at "
                       f"TP{c['at_value']}")
        predicted = sorted({int(c["at_value"]) for c in along
                            if int(c["predicted"]) == 1 and str(c["at_value"])})
        ungated = sum(1 for c in along if int(c["predicted"]) == 1 and not str(c["at_value"])
                      and str(c["status"]) != "from the first point")
        guess = (f"TP{predicted[0]}" + (f"-{predicted[-1]}" if len(predicted) > 1 else "")
                 if predicted else "")
        if ungated:
            guess += ("; " if guess else "") + f"none within x64 in {ungated} slices"
        bound = Counter(str(p["ceiling"]) for p in ok
                        if not any(int(p["point"]) == int(c["at_point"]) for c in found))
        rows.append({"model": model, "phase": phase, "transport": transport,
                     "measured": measured or "not up to TP" + str(int(ok["tp"].max())),
                     "example": example, "predicted": guess or "-",
                     "bounds": ", ".join(f"{k} {v}" for k, v in bound.most_common())})
    return rows


def ms_text(c, side):
    return (f"{float(c[side + '_ns']) / 1e6:.3f} ms [{float(c[side + '_lo_ns']) / 1e6:.3f}, "
            f"{float(c[side + '_hi_ns']) / 1e6:.3f}]")


def predicted_text(predicted):
    """The roofs' predicted TP of the interconnect ceiling per slice, grouped by TP."""
    by_tp = defaultdict(list)
    for c in predicted:
        by_tp[int(c["at_value"])].append(str(c["fixed"]))
    return "; ".join(f"tp={tp} ({len(v)} slice{'s' if len(v) > 1 else ''})"
                     for tp, v in sorted(by_tp.items()))


def transport_rows(sweeps):
    """Per (model, phase): the join of each transport's sweep along the transport axis, the
    link ordered by each file's measured all-reduce bandwidth."""
    rows = []
    groups = defaultdict(dict)
    for (model, phase, transport, again), path in sweeps.items():
        if not again:
            groups[(model, phase)][transport] = path
    for (model, phase), by_transport in sorted(groups.items()):
        if len(by_transport) < 2:
            continue
        runs = [load(p) for _, p in sorted(by_transport.items(), reverse=True)]
        joined = sweep_analysis.join_sweeps(runs)
        order = sweep_analysis.transport_order(runs).get("transport", {})
        along = joined.crossovers[joined.crossovers["axis"] == "transport"]
        inter = along[along["kind"] == "interconnect"]
        status = Counter(str(s) for s in inter["status"])
        both_ok = Counter(str(f) for f in joined.points["label"])
        rows.append({
            "model": model, "phase": phase,
            "order": " > ".join(f"{t} {g:.0f} GB/s" for t, g in
                                sorted(order.items(), key=lambda x: -x[1])),
            "points": len(both_ok) // max(1, len(by_transport)),
            "interconnect_on_slower_link": ", ".join(f"{v} {k}" for k, v in status.items())
                                            or "none",
            "where": "; ".join(f"{c['fixed']}" for c in inter if str(c["status"]) == "found"),
        })
    return rows


def model_error_rows(dirs):
    """The model's step error on every measured point of each sweep: from the roofs alone
    (validate_*.json) and calibrated on the other models' files (calibrated_*.json)."""
    rows = {}
    for d in dirs:
        for kind, prefix in (("roofs", "validate_sweep_"), ("calibrated", "calibrated_sweep_")):
            for path in sorted(glob.glob(os.path.join(d, "h5", prefix + "*.json"))):
                with open(path) as f:
                    errors = validation_errors(json.load(f))
                if not errors:
                    continue
                name = os.path.basename(path)[len(prefix):-len(".json")]
                row = rows.setdefault(name, {"sweep": name, "points": len(errors)})
                row[f"{kind}_median"] = float(np.median(np.abs(errors)))
                row[f"{kind}_max"] = float(np.max(np.abs(errors)))
    return [{"roofs_median": np.nan, "roofs_max": np.nan, "calibrated_median": np.nan,
             "calibrated_max": np.nan, **r} for _, r in sorted(rows.items())]


def validation_errors(data):
    """Every measured point's relative step error (a fraction) from `model --validate --json`."""
    return [float(v["error_pct"]) / 100 for v in data.get("validation", [])
            if v.get("error_pct") is not None and np.isfinite(float(v["error_pct"]))]


PP2 = re.compile(r"sweep_(?P<model>.+)_train_pp2_(?P<transport>[a-z]+)\.h5$")


def train_layout_rows(dirs, sweeps):
    """The train step at the node's largest TP beside TP/2 x PP2 on the same ranks, each also
    per layer (the PP2 job runs a layer per stage, the TP job one layer)."""
    rows = []
    for (model, transport), path in sorted(files(dirs, PP2).items()):
        run = load(path)
        pp = [p for p in run.sweep.points if str(p["status"]) == "ok"]
        tp_path = sweeps.get((model, "train", transport, ""))
        tp_run = load(tp_path) if tp_path else None
        tp = [p for p in tp_run.sweep.points if str(p["status"]) == "ok"] if tp_run else []
        tp = max(tp, key=lambda p: int(p["tp"]), default=None)
        for p in pp:
            layers = int(run.config.get("layers", 1))
            tp_layers = int(tp_run.config.get("layers", 1)) if tp_run else 1
            rows.append({
                "model": model, "transport": transport,
                "tp_only": (f"TP{int(tp['tp'])}, {tp_layers} layer: {ms_interval(tp)} "
                            f"({tp['ceiling']})") if tp is not None else "-",
                "tp_pp": (f"TP{int(p['tp'])} x PP2, {layers} layers: {ms_interval(p)} "
                          f"({p['ceiling']})"),
                "per_layer_ratio": (float(p["step_p50_ns"]) / layers) /
                                   (float(tp["step_p50_ns"]) / tp_layers)
                                   if tp is not None else float("nan")})
    return rows


CUSTOM_AR = re.compile(r"customar_(?P<model>.+)_decode_(?P<impl>nccl|auto)_(?P<transport>[a-z]+)\.h5$")
AR_TABLE = re.compile(r"allreduce_g(?P<group>\d+)_(?P<transport>[a-z]+)\.h5$")


def allreduce_tables(path):
    """(implementation, size_bytes, time_p50_ns) rows of a `collectives --allreduce` file, as
    --allreduce auto reads them: NCCL's own table only where it was NCCL's."""
    import h5py
    rows = []
    with h5py.File(path, "r") as f:
        for name, ds in f.get("collectives", {}).items():
            if not isinstance(ds, h5py.Dataset) or ds.dtype.names is None or not (
                    name == "all_reduce" or name.startswith("all_reduce_")):
                continue
            if not {"size_bytes", "time_p50_ns"} <= set(ds.dtype.names):
                continue
            backend = ds.attrs.get("backend", b"")
            backend = backend.decode() if isinstance(backend, bytes) else str(backend)
            if name == "all_reduce" and backend != "nccl":
                continue
            impl = "nccl" if name == "all_reduce" else name[len("all_reduce_"):]
            rows += [(impl, int(r["size_bytes"]), float(r["time_p50_ns"])) for r in ds[()]]
    return rows


def choose_allreduce(rows, nbytes):
    """The implementation --allreduce auto takes for a message of `nbytes`: the lowest median
    at the smallest measured size that holds it (the largest measured for a larger one)."""
    if not rows:
        return "-"
    holding = [size for _, size, _ in rows if size >= nbytes]
    at = min(holding) if holding else max(size for _, size, _ in rows)
    return min((t, impl) for impl, size, t in rows if size == at)[1]


def custom_ar_rows(dirs):
    """Per model and decode point at TP >= 2: NCCL's all-reduce beside the custom one where it
    is faster (measured one after the other in one job), each with its 95 % interval, the
    implementation the tables chose for the layer's all-reduce and each point's ceiling."""
    pairs = defaultdict(dict)
    for (model, impl, transport), path in files(dirs, CUSTOM_AR).items():
        pairs[(model, transport)][impl] = path
    tables = {}
    for (group, transport), path in files(dirs, AR_TABLE).items():
        tables[(int(group), transport)] = allreduce_tables(path)
    rows = []
    for (model, transport), both in sorted(pairs.items()):
        if set(both) != {"nccl", "auto"}:
            continue
        runs = {impl: load(path) for impl, path in both.items()}
        hidden = int(runs["auto"].config.get("hidden", 0))
        width = 2 if str(runs["auto"].config.get("dtype", "bf16")) in ("bf16", "fp16") else 4
        by_key = {}
        for impl, run in runs.items():
            for p in run.sweep.ok():
                key = (int(p["tp"]), int(p["batch"]), int(p["context"]))
                by_key.setdefault(key, {})[impl] = p
        for (tp, batch, context), got in sorted(by_key.items()):
            if tp < 2 or set(got) != {"nccl", "auto"}:
                continue
            n, a = got["nccl"], got["auto"]
            if float(a["step_p50_hi_ns"]) < float(n["step_p50_lo_ns"]):
                verdict = "faster"
            elif float(a["step_p50_lo_ns"]) > float(n["step_p50_hi_ns"]):
                verdict = "slower"
            else:
                verdict = "within noise"
            rows.append({
                "model": model, "transport": transport, "tp": tp, "batch": batch,
                "context": context,
                "chosen": choose_allreduce(tables.get((tp, transport), []),
                                           batch * hidden * width),
                "nccl": f"{ms_interval(n)} ({n['ceiling']})",
                "custom_where_faster": f"{ms_interval(a)} ({a['ceiling']})",
                "ratio": float(a["step_p50_ns"]) / float(n["step_p50_ns"]),
                "verdict": verdict})
    return rows


def custom_ar_summary(rows):
    """Per model and TP: how many points the custom all-reduce made faster beyond the
    intervals, and the range of the step ratio."""
    groups = defaultdict(list)
    for r in rows:
        groups[(r["model"], r["transport"], r["tp"])].append(r)
    out = []
    for (model, transport, tp), rs in sorted(groups.items()):
        ratios = [r["ratio"] for r in rs]
        out.append({"model": model, "transport": transport, "tp": tp, "points": len(rs),
                    "faster": sum(r["verdict"] == "faster" for r in rs),
                    "within_noise": sum(r["verdict"] == "within noise" for r in rs),
                    "slower": sum(r["verdict"] == "slower" for r in rs),
                    "ratio_range": f"{min(ratios):.3f}-{max(ratios):.3f}",
                    "chosen": ", ".join(f"{k} {v}" for k, v in
                                        Counter(r["chosen"] for r in rs).most_common())})
    return out


def ms_interval(p):
    lo = float(p["step_p50_lo_ns"]) if "step_p50_lo_ns" in p.dtype.names else float(p["step_p50_ns"])
    hi = float(p["step_p50_hi_ns"]) if "step_p50_hi_ns" in p.dtype.names else float(p["step_p50_ns"])
    return f"{float(p['step_p50_ns']) / 1e6:.3f} ms [{lo / 1e6:.3f}, {hi / 1e6:.3f}]"


def repro_rows(sweeps):
    rows = []
    for (model, phase, transport, again), path in sorted(sweeps.items()):
        if not again:
            continue
        first = sweeps.get((model, phase, transport, ""))
        if first is None:
            continue
        a, b = (crossover_keys(load(p)) for p in (first, path))
        rows.append({"sweep": f"{model} {phase} {transport}", "first": len(a), "second": len(b),
                     "same": a == b, "differ": "; ".join(sorted(a ^ b))})
    return rows


def crossover_keys(run):
    c = run.sweep.crossovers
    return {f"{x['axis']} [{x['fixed']}] {x['kind']} {x['before_value']}->{x['at_value']} "
            f"{x['status']}" for x in c if int(x["predicted"]) == 0}


def predicted_points(predicted, model, phase, transport):
    """(tp, step_ns, by-class ns, ceiling) of the model's points past the node in the slice."""
    out = []
    for kind in ("tp8", "tp16", "nodes"):
        for (m, p, t, k), path in predicted.items():
            if (m, p, t) != (model, phase, transport) or not k.startswith(kind[:2]):
                continue
            run = load(path)
            for row in in_slice(run.sweep.points, phase):
                out.append((int(row["tp"]), float(row["step_p50_ns"]),
                            [float(row[f"{c}_ns"]) for c in CLASSES], str(row["ceiling"]),
                            "nodes" if k == "nodes" else "node"))
    return sorted(set((tp, s, tuple(c), ce, w) for tp, s, c, ce, w in out))


def picture(page, phase, sweeps, predicted):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    models = sorted({m for (m, p, _, again) in sweeps if p == phase and not again})
    if not models:
        return None
    fig, axes = plt.subplots(1, len(models), figsize=(max(8.0, 5.2 * len(models)), 4.8),
                             squeeze=False)
    transports = ["nvlink", "host", "auto", "net"]
    hatch = {"nvlink": "", "host": "..", "auto": "", "net": "xx"}
    names = {"nvlink": "NVLink", "host": "host path", "auto": "auto",
             "net": "net (NCCL's network path)"}
    drawn = []
    for ax, model in zip(axes[0], models):
        present = [t for t in transports if (model, phase, t, "") in sweeps]
        drawn += [t for t in present if t not in drawn]
        width = 0.8 / max(1, len(present))
        ticks = {}
        for j, transport in enumerate(present):
            run = load(sweeps[(model, phase, transport, "")])
            rows = sorted(in_slice(run.sweep.points, phase), key=lambda r: int(r["tp"]))
            pred = [p for p in predicted_points(predicted, model, phase, transport)
                    if p[0] > max([int(r["tp"]) for r in rows] + [0])]
            series = [(int(r["tp"]), float(r["step_p50_ns"]),
                       [float(r[f"{c}_ns"]) for c in CLASSES], str(r["ceiling"]), None,
                       (float(r["step_p50_lo_ns"]) if "step_p50_lo_ns" in r.dtype.names
                        else float(r["step_p50_ns"]),
                        float(r["step_p50_hi_ns"]) if "step_p50_hi_ns" in r.dtype.names
                        else float(r["step_p50_ns"])))
                      for r in rows]
            series += [(tp, s, list(c), ce, w, None) for tp, s, c, ce, w in pred]
            for tp, step, by_class, ceiling, where, interval in series:
                # Across nodes beside one node at the same TP: the slot to the right.
                slot = j + 1 if where == "nodes" and len(present) > 1 else j
                x = ticks.setdefault(tp, len(ticks)) - 0.4 + width * (slot + 0.5)
                bottom = 0.0
                for c, t in zip(CLASSES, by_class):
                    ax.bar(x, t / 1e6, width * 0.92, bottom=bottom, color=COLORS[c],
                           alpha=0.35 if where else 1.0, hatch=hatch[transport] or None,
                           edgecolor="white" if not where else "black", linewidth=0.4)
                    bottom += t / 1e6
                if interval:
                    lo, hi = interval
                    ax.errorbar(x, step / 1e6, yerr=[[max(0, step - lo) / 1e6],
                                                     [max(0, hi - step) / 1e6]],
                                fmt="k_", capsize=3, lw=1)
                label = ("P" if where == "node" else "IB" if where else "") + \
                        ("*" if ceiling == "interconnect" else "")
                if label:
                    ax.text(x, max(bottom, step / 1e6) * 1.02, label, ha="center", va="bottom",
                            fontsize=7)
        ax.set_xticks(range(len(ticks)))
        ax.set_xticklabels([f"TP{tp}" for tp in ticks])
        slice_text = ", ".join(f"{k} {v}" for k, v in SLICES[phase].items())
        ax.set_title(f"{model} {phase} ({slice_text})", fontsize=10)
        ax.set_ylabel("step (ms)")
    legend = [Patch(color=COLORS[c], label=c) for c in CLASSES]
    legend += [Patch(facecolor="white", edgecolor="black", hatch=hatch[t] or None,
                     label=names[t]) for t in drawn]
    legend.append(Patch(facecolor="white", edgecolor="black", alpha=0.35,
                        label="predicted (P: one node, IB: across nodes)"))
    # One row where the figure is wide enough, else two.
    ncol = len(legend) if len(models) > 1 else (len(legend) + 1) // 2
    fig.legend(handles=legend, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    fig.suptitle(f"{phase}: step by ceiling along TP; * = interconnect is the ceiling;\n"
                 "bars: medians over repeats, whiskers: 95 % interval of the step", fontsize=10)
    fig.tight_layout(rect=(0, 0.13 if ncol < len(legend) else 0.08, 1, 0.92))
    out = os.path.join(page, f"atlas_{phase}.png")
    try:
        output.write_file(out, lambda f: fig.savefig(f, format="png", dpi=110), binary=True)
    finally:
        plt.close(fig)
    return out


def markdown(rows, columns):
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for r in rows:
        cells = [f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in columns]
        lines.append("| " + " | ".join(x.replace("|", "/") for x in cells) + " |")
    return "\n".join(lines) + "\n"


def write(page, name, text):
    """page/name replaced by `text` through output.write_file() (output.WriteError if not)."""
    output.write_text(os.path.join(page, name), text)


def write_csv(page, name, rows):
    def fill(f):
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)

    output.write_file(os.path.join(page, name), fill)


def main(argv):
    """The page; a file of it that cannot be written is one line on stderr, exit code 1."""
    try:
        return _main(argv)
    except output.WriteError as e:
        print(f"atlas_report: {e}", file=sys.stderr)
        return 1


def _main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    page, dirs = argv[1], argv[2:]
    output.make_directory(page)
    sweeps = files(dirs, SWEEP)
    predicted = files(dirs, PREDICTED)
    if not sweeps:
        print(f"atlas_report: no sweep_*.h5 under {', '.join(d + '/h5' for d in dirs)}",
              file=sys.stderr)
        return 2
    head = headline_rows(sweeps)
    write(page, "headline.md", markdown(head, ["model", "phase", "transport", "measured",
                                               "example", "predicted", "bounds"]))
    cross = crossover_rows(sweeps)
    columns = ["model", "phase", "transport", "ok", "measured", "from_first", "predicted",
               "bounds"]
    write(page, "crossovers.md", markdown(cross, columns))
    write_csv(page, "crossovers.csv", cross)
    trows = transport_rows(sweeps)
    write(page, "transport.md", markdown(trows, ["model", "phase", "order", "points",
                                                 "interconnect_on_slower_link", "where"]))
    errors = model_error_rows(dirs)
    error_columns = ["sweep", "points", "roofs_median", "roofs_max", "calibrated_median",
                     "calibrated_max"]
    write(page, "model_error.md", markdown(errors, error_columns))
    layouts = train_layout_rows(dirs, sweeps)
    write(page, "train_layouts.md", markdown(layouts, ["model", "transport", "tp_only", "tp_pp",
                                                       "per_layer_ratio"]))
    repro = repro_rows(sweeps)
    write(page, "repro.md", markdown(repro, ["sweep", "first", "second", "same", "differ"]))
    custom = custom_ar_rows(dirs)
    custom_sum = custom_ar_summary(custom)
    custom_columns = ["model", "transport", "tp", "points", "faster", "within_noise", "slower",
                      "ratio_range", "chosen"]
    if custom:
        write(page, "custom_ar.md",
              markdown(custom_sum, custom_columns) + "\n" +
              markdown(custom, ["model", "transport", "tp", "batch", "context", "chosen", "nccl",
                                "custom_where_faster", "ratio", "verdict"]))
    for phase in ("prefill", "decode", "train"):
        picture(page, phase, sweeps, predicted)
    print(markdown(head, ["model", "phase", "transport", "measured", "predicted"]))
    print(markdown(trows, ["model", "phase", "order", "interconnect_on_slower_link"]))
    if errors:
        print(markdown(errors, error_columns))
    if repro:
        print(markdown(repro, ["sweep", "same", "differ"]))
    if custom_sum:
        print(markdown(custom_sum, custom_columns))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
