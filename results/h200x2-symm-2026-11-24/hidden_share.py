"""Per strategy table of a `ridgeline run --overlap ...` log: none, the none strategy's compute-only, the best
strategy, the share of the exposed communication it hides, (none - best) / (none - compute-only),
and its step over none's."""
import os
import sys
def table(path):
    rows = {}
    lines = open(path, errors="replace").read().splitlines()
    start = [i for i, l in enumerate(lines) if l.startswith("overlap         step ms")]
    if not start: return rows
    for l in lines[start[-1] + 1:]:
        if l.startswith("step, comp"): break
        f = l.split()
        rows[f[0]] = dict(step=float(f[1]), comp=float(f[2]), comm=float(f[3]), exposed=float(f[4]), interf=float(f[6]), cinterf=float(f[7]), vs=float(f[8]), check=f[-1])
    return rows
for path in sys.argv[1:]:
    t = table(path)
    if not t: continue
    none = t["none"]
    best = min((k for k in t if k != "none"), key=lambda k: t[k]["step"])
    b = t[best]
    hidden = (none["step"] - b["step"]) / (none["step"] - none["comp"])
    print(f"{os.path.basename(path)[:-4]:34s} none {none['step']:.3f} comp-only {none['comp']:.3f} best {best} {b['step']:.3f} hidden {hidden:.2f} ratio {b['step']/none['step']:.3f} | " + " ".join(f"{k}={v['step']:.3f}" for k, v in t.items() if k != "none") + " | checks " + ",".join(sorted(set(v['check'] for v in t.values()))))
