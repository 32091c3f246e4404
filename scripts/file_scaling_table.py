"""The table of scripts/file-scaling.sh: one row per (ranks, layout) from its CSV (one line per
job), then per layout the fits to the medians and their extrapolation to 4096 ranks: file size
linear in the ranks (bytes = a + b x ranks: b is one rank's rows and metadata), write time as a
power of the ranks (seconds = c x ranks^k, least squares in log-log) and linear.
Usage: python3 scripts/file_scaling_table.py TABLE.csv [EXTRAPOLATE_TO]"""
import csv
import statistics
import sys

import numpy as np


def main() -> None:
    path = sys.argv[1]
    target = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    jobs = list(csv.DictReader(open(path)))
    keys = []
    for r in jobs:
        if (r["ranks"], r["layout"]) not in keys:
            keys.append((r["ranks"], r["layout"]))
    print("| ranks | layout | files | timeline rows | bytes | bytes / row | write_seconds median | min - max | jobs |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    medians = {}
    for ranks, layout in keys:
        mine = [r for r in jobs if (r["ranks"], r["layout"]) == (ranks, layout)]
        done = [r for r in mine if r["job_seconds"] != "failed"]
        if not done:
            print(f"| {ranks} | {layout} | | | | | failed | | 0 of {len(mine)} |")
            continue
        seconds = [float(r["write_seconds"]) for r in done]
        size = statistics.median(int(r["bytes"]) for r in done)
        rows = int(done[0]["rows"])
        medians.setdefault(layout, []).append((int(ranks), size, statistics.median(seconds), rows))
        print(f"| {ranks} | {layout} | {done[0]['files']} | {rows} | {size:.0f} | {size / rows:.1f} "
              f"| {statistics.median(seconds):.3f} | {min(seconds):.3f} - {max(seconds):.3f} "
              f"| {len(done)} of {len(mine)} |")
    if not any(len(points) >= 2 for points in medians.values()):
        return
    print()
    print(f"Fits to the medians, and their value at {target} ranks:")
    print()
    print(f"| layout | bytes = a + b x ranks | bytes at {target} | seconds = c x ranks^k "
          f"| seconds at {target} | seconds = d + e x ranks | seconds at {target} |")
    print("|---|---|---:|---|---:|---|---:|")
    for layout, points in medians.items():
        if len(points) < 2:
            continue
        p = np.array([x[0] for x in points], dtype=float)
        size = np.array([x[1] for x in points])
        seconds = np.array([x[2] for x in points])
        ones = np.vstack([np.ones_like(p), p]).T
        a, b = np.linalg.lstsq(ones, size, rcond=None)[0]
        k, log_c = np.polyfit(np.log(p), np.log(seconds), 1)
        d, e = np.linalg.lstsq(ones, seconds, rcond=None)[0]
        print(f"| {layout} | a = {a:.0f}, b = {b:.0f} | {a + b * target:.3g} "
              f"| c = {np.exp(log_c):.3g}, k = {k:.2f} | {np.exp(log_c) * target ** k:.3g} "
              f"| d = {d:.3g}, e = {e:.3g} | {d + e * target:.3g} |")


if __name__ == "__main__":
    main()
