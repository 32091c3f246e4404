"""Decode-only steps of each trace run that ran more than 0.8 ms past the median step of their
token count: how many, where, and by how much (from raw-h5.tar.xz extracted here)."""
import glob

import h5py
import numpy as np

for path in sorted(p for p in glob.glob("h5/job*/trace_tp*_r*.h5") if ".node" not in p):
    steps = h5py.File(path, "r")["/serving/steps"][()]
    decode = steps["prefill_tokens"] == 0
    ns = steps["step_ns"] / 1e3
    slow, excess = np.zeros(len(steps), bool), []
    for n in np.unique(steps["decode_tokens"][decode]):
        same = decode & (steps["decode_tokens"] == n)
        median = np.median(ns[same])
        hit = same & (ns > median + 800)
        slow |= hit
        excess += list(ns[hit] - median)
    where = np.where(slow)[0]
    print(f"{path}: {slow.sum()} of {decode.sum()} decode-only steps "
          f"({100 * slow.sum() / decode.sum():.1f} %) slow, steps {where.min() if len(where) else '-'}"
          f"-{where.max() if len(where) else '-'}, median excess "
          f"{np.median(excess) if excess else 0:.0f} us")
