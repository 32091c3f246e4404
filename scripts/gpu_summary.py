#!/usr/bin/env python3
"""Summary table of a scripts/gpu-check.sh output folder: every layer run beside its
PyTorch-eager reference from the same job, GEMM efficiency against the standalone cuBLASLt
probe, instrumentation overhead, and the collective sweeps' bus bandwidth."""
import glob
import json
import os
import sys

import h5py


def attr(group, key, default=float("nan")):
    value = group.attrs.get(key, default)
    return value.decode() if isinstance(value, bytes) else value


def layer_rows(out):
    refs = {}
    for path in glob.glob(os.path.join(out, "ref", "*.json")):
        with open(path) as f:
            refs[os.path.basename(path)[: -len(".json")]] = json.load(f)
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "h5", "*.h5"))):
        name = os.path.basename(path)[:-3]
        with h5py.File(path, "r") as f:
            if attr(f, "command", "run") != "run":
                continue
            s = f["summary"]
            p50_ms = attr(s, "p50_ns") / 1e6
            gemm = [v for k, v in s.attrs.items() if k.startswith("gemm_vs_reference.")]
            phase = "prefill" if name.startswith("prefill") else "decode"
            tp = name.rsplit("tp", 1)[-1]
            ref = refs.get(f"torch_{phase}_tp{tp}") if name.startswith(("prefill_tp", "decode")) else None
            ref_ms = ref["p50_ms"] if ref else float("nan")
            rows.append((name, p50_ms, ref_ms, p50_ms / ref_ms if ref else float("nan"),
                         attr(s, "check", "?"), 100 * attr(s, "instrumentation_overhead"),
                         min(gemm) if gemm else float("nan")))
    return rows


def collective_rows(out):
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "h5", "collectives_*.h5"))):
        with h5py.File(path, "r") as f:
            if "collectives" not in f:
                continue
            for name, table in f["collectives"].items():
                if not isinstance(table, h5py.Dataset) or "size_bytes" not in (table.dtype.names or ()):
                    continue
                t = table[()]
                big = t[-1]
                small = t[t["size_bytes"] <= 131072]
                rows.append((os.path.basename(path)[:-3], name, int(big["size_bytes"]),
                             float(big["busbw_gbps"]),
                             float(small["time_mean_ns"].max()) / 1e3 if len(small) else float("nan")))
    return rows


def reference_rows(out):
    """ridgeline's NVLink sweep beside the PyTorch/NCCL reference of the same job, per size."""
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "ref", "torch_collectives_np*.json"))):
        np_ = os.path.basename(path)[len("torch_collectives_np"):-len(".json")]
        h5 = os.path.join(out, "h5", f"collectives_np{np_}_nvlink.h5")
        if not os.path.exists(h5):
            continue
        with open(path) as f:
            ref = json.load(f)
        with h5py.File(h5, "r") as f:
            for r in ref["rows"]:
                table = f["collectives"].get(r["collective"])
                if table is None:
                    continue
                t = table[()]
                match = t[t["size_bytes"] == r["size_bytes"]]
                if len(match) == 0:
                    continue
                ours_us = float(match[0]["time_mean_ns"]) / 1e3
                rows.append((np_, r["collective"], r["size_bytes"], ours_us, r["time_us"],
                             float(match[0]["busbw_gbps"]), r["busbw_gbps"], ref["nccl"]))
    return rows


def main():
    out = sys.argv[1]
    print(f"{'run':<28} {'p50 ms':>9} {'torch ms':>9} {'ratio':>6} {'check':<8} {'instr %':>7} {'gemm/ref':>8}")
    for r in layer_rows(out):
        print(f"{r[0]:<28} {r[1]:>9.4f} {r[2]:>9.4f} {r[3]:>6.3f} {str(r[4])[:8]:<8} {r[5]:>7.2f} {r[6]:>8.3f}")
    rows = collective_rows(out)
    if rows:
        print(f"\n{'sweep':<26} {'collective':<15} {'max bytes':>11} {'busbw GB/s':>10} {'max us <=128K':>13}")
        for r in rows:
            print(f"{r[0]:<26} {r[1]:<15} {r[2]:>11} {r[3]:>10.1f} {r[4]:>13.1f}")
    rows = reference_rows(out)
    if rows:
        print(f"\n{'np':>2} {'collective':<15} {'size':>11} {'us':>9} {'torch us':>9} {'t ratio':>7} "
              f"{'busbw':>7} {'torch':>7} {'bw ratio':>8}  torch NCCL")
        for r in rows:
            print(f"{r[0]:>2} {r[1]:<15} {r[2]:>11} {r[3]:>9.2f} {r[4]:>9.2f} {r[3] / r[4]:>7.3f} "
                  f"{r[5]:>7.1f} {r[6]:>7.1f} {r[5] / r[6] if r[6] else float('nan'):>8.3f}  {r[7]}")


if __name__ == "__main__":
    main()
