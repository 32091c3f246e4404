"""The ring runs of jobs Q, R, S and T, with and without sequence parallelism (or the files
named), from the timelines (timed iterations, both ranks,
medians per iteration): per strategy the four GEMMs' time, the reduction kernels' time (the
ring's sums, recorded under the collective's name on the compute queue), and the tail: from the
end of the last FC2 piece to the end of the step on the compute lane (the all-gather left after
FC2 and the wait for the other rank). us.

    python3 ring_tail.py [FILE.h5 ...]   (from this directory; output in ring_tail.txt)
"""
import glob
import sys
from collections import defaultdict

import h5py
import numpy as np


def text(x):
    return x.decode() if isinstance(x, bytes) else x


def strategies(log):
    """The --overlap strategies in the order the run's points hold them."""
    return [line.split()[1] for line in open(log, errors='replace')
            if line.startswith('overlap:')]


for fn in sys.argv[1:] or sorted(glob.glob('[QRST]/ab/ring_b*_sp*_*.h5')):
    f = h5py.File(fn, 'r')
    print(fn[:-3])
    order = strategies(fn[:-3] + '.log')
    for pt in sorted(f['points'], key=int):
        p = f['points'][pt]
        strategy = order[int(pt)]
        names = {int(r['id']): text(r['name']) for r in p['ops'][()]}
        gemm, sums, tail = [], [], []
        for rk in p['ranks']:
            tl = p['ranks'][rk]['timeline'][()]
            tl = tl[tl['warmup'] == 0]
            for it in sorted(set(tl['iteration'])):
                t = tl[tl['iteration'] == it]
                d = defaultdict(float)
                for r in t:
                    n = names[int(r['op_id'])]
                    if n.startswith(('allreduce', 'reducescatter')) and r['comm_bytes'] == 0:
                        n = 'sum'  # the ring's reduction kernels, on the compute queue
                    d[n] += (r['t_end_ns'] - r['t_start_ns']) / 1e3
                gemm.append(sum(v for k, v in d.items() if k.endswith('_gemm')))
                sums.append(d['sum'])
                fc2_end = t['t_end_ns'][[names[int(i)] == 'fc2_gemm' for i in t['op_id']]].max()
                tail.append((t['t_end_ns'].max() - fc2_end) / 1e3)
        print(f"  {strategy:10s} gemms {np.median(gemm):8.1f}  sums {np.median(sums):6.1f}"
              f"  tail after fc2 {np.median(tail):6.1f}")
