"""From the strategy tables of `ridgeline run --overlap ...` logs: per run, none, the none
strategy's compute-only, the best strategy, the share of the exposed communication it hides,
(none - best) / (none - compute-only of none), and its step over none's. With --clocks instead:
a markdown table of every strategy's step, interf and c-interf with the NVML line of each of its
loops (SM MHz / W / share of samples power-capped).

    python3 hidden_share.py [--clocks] LOG...
"""
import os
import sys


def table(path):
    """strategy -> its row of the log's strategy table."""
    rows = {}
    lines = open(path, errors="replace").read().splitlines()
    start = [i for i, l in enumerate(lines) if l.startswith("overlap         step ms")]
    if not start:
        return rows
    for l in lines[start[-1] + 1:]:
        if l.startswith("step, comp"):
            break
        f = l.split()
        rows[f[0]] = dict(step=float(f[1]), comp=float(f[2]), comm=float(f[3]),
                          exposed=float(f[4]), interf=float(f[6]), cinterf=float(f[7]),
                          vs=float(f[8]), check=f[-1])
    return rows


def hidden_line(path):
    t = table(path)
    if not t:
        return None
    none = t["none"]
    best = min((k for k in t if k != "none"), key=lambda k: t[k]["step"])
    b = t[best]
    hidden = (none["step"] - b["step"]) / (none["step"] - none["comp"])
    return (f"{os.path.basename(path)[:-4]:34s} none {none['step']:.3f} comp-only "
            f"{none['comp']:.3f} best {best} {b['step']:.3f} hidden {hidden:.2f} ratio "
            f"{b['step'] / none['step']:.3f} | " +
            " ".join(f"{k}={v['step']:.3f}" for k, v in t.items() if k != "none") +
            " | checks " + ",".join(sorted(set(v["check"] for v in t.values()))))


def clocks(path):
    """(strategy, its table row, the NVML cells of its loops) for every strategy of a log."""
    lines = open(path, errors="replace").read().splitlines()
    t = table(path)
    start = [i for i, l in enumerate(lines) if l.startswith("overlap      instrumented")]
    out = []
    if not start:
        return out
    for l in lines[start[-1] + 1:]:
        if l.startswith("wrote") or not l.strip():
            break
        name = l.split()[0]
        cells = [c.strip() + " %" for c in l[len(name):].split("%") if c.strip()]
        if name in t:
            out.append((name, t[name], cells))
    return out


def clocks_markdown(paths):
    rows = ["| run | strategy | step ms | interf | c-interf | instrumented | step loop | "
            "compute-only loop | comm-only loop |", "|" + "---|" * 9]
    for path in paths:
        for name, t, cells in clocks(path):
            cells = (cells + [""] * 4)[:4]
            rows.append(f"| {os.path.basename(path)[:-4]} | {name} | {t['step']:.3f} | "
                        f"{t['interf']:.3f} | {t['cinterf']:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--clocks":
        print(clocks_markdown(args[1:]), end="")
    else:
        for path in args:
            line = hidden_line(path)
            if line:
                print(line)
