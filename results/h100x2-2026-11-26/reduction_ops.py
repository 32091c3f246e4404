"""ce-ring's reduce-scatter records in each run's timelines (both ranks, timed iterations): the
puts (comm_bytes > 0) and, before the change, the reduction's add kernels (`sum`, no bytes of
their own); and the two ops that now add the last peer's piece. Median us (count).

    python3 reduction_ops.py   (from this directory; output in reduction_ops.txt)
"""
import glob
from collections import defaultdict

import h5py
import numpy as np

for fn in sorted(glob.glob('[LM]/ab/ce_ring_b*_spon_*.h5')):
    f = h5py.File(fn, 'r')
    p = f['points']['3']  # ce-ring, the fourth strategy of --overlap
    names = {int(r['id']): (r['name'].decode() if isinstance(r['name'], bytes) else r['name'])
             for r in p['ops'][()]}
    d = defaultdict(list)
    for rk in p['ranks']:
        for r in p['ranks'][rk]['timeline'][()]:
            if r['warmup']:
                continue
            n = names[int(r['op_id'])]
            if n.startswith('reducescatter'):
                n += ' puts' if r['comm_bytes'] > 0 else ' sum'
            elif not n.startswith('residual'):
                continue
            d[n].append((r['t_end_ns'] - r['t_start_ns']) / 1e3)
    print(fn[:-3], ' '.join(f"{k} {np.median(v):.1f} ({len(v)})" for k, v in sorted(d.items())))
