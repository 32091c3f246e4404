"""Where the 4 x H100 sweeps' TP > 1 steps spent what the model did not predict: each point's
in-step all-reduces (their p50 per call in the sweep's op table) against the file's own
interconnect roof at that size, as its median fit (alpha + bytes x factor / beta) and as its
lower envelope (floor_alpha + bytes x factor / floor_beta); and each point's timed step p50
against its uninstrumented loop (the event stamps' share).

    python3 results/model-revalidate-2026-11-26/in_step.py results/h100x4-2026-11-26

Prints per sweep and TP the medians and ranges of in-step / fit, in-step / envelope and the
stamps' overhead.
"""
import glob
import os
import statistics
import sys

import h5py
import numpy as np


def text(x):
    return x.decode() if isinstance(x, bytes) else str(x)


def roof_ns(alpha_us, beta_gbps, bus_bytes):
    return alpha_us * 1e3 + (0.0 if np.isinf(beta_gbps) else bus_bytes / beta_gbps)


def spread(values):
    v = sorted(values)
    return f"median {statistics.median(v):.2f} [{v[0]:.2f}-{v[-1]:.2f}]"


def main(folder):
    for path in sorted(glob.glob(os.path.join(folder, "*", "h5", "sweep_*.h5"))):
        with h5py.File(path, "r") as f:
            roofs = {(text(r["collective"]), int(r["group_size"])): r
                     for r in f["roofs/interconnect"][()]}
            by_tp = {}
            for key in f["points"]:
                g = f["points"][key]
                if "summary" not in g:
                    continue
                tp = int(g["config"].attrs["tp"])
                if tp == 1:
                    continue
                s = g["summary"]
                row = by_tp.setdefault(tp, {"fit": [], "floor": [], "stamps": []})
                row["stamps"].append(s.attrs["p50_ns"] / s.attrs["uninstrumented_step_ns"] - 1)
                r = roofs[("all_reduce", tp)]
                factor = 2 * (tp - 1) / tp
                for op in s["ops"][()]:
                    if not text(op["name"]).startswith("allreduce"):
                        continue
                    bus = op["comm_bytes"] * factor
                    row["fit"].append(op["p50_ns"] / roof_ns(r["alpha_us"], r["beta_gbps"], bus))
                    row["floor"].append(
                        op["p50_ns"] / roof_ns(r["floor_alpha_us"], r["floor_beta_gbps"], bus))
        for tp, row in sorted(by_tp.items()):
            print(f"{os.path.relpath(path, folder)} TP{tp}: in-step all-reduce / fit "
                  f"{spread(row['fit'])}; / envelope {spread(row['floor'])}; stamps' overhead "
                  f"{spread([100 * x for x in row['stamps']])} %")


if __name__ == "__main__":
    main(sys.argv[1])
