#!/usr/bin/env python3
"""Summary table of a scripts/gpu-check.sh output folder: every layer run beside its
PyTorch-eager reference from the same job, GEMM efficiency against the standalone cuBLASLt
probe, instrumentation overhead, the collective sweeps' bus bandwidth, and attention alone
(bench_attention beside PyTorch's SDPA backends, turn by turn) with the layer under each
attention implementation, and the fused attention backward beside PyTorch's flash backward.
`gpu_summary.py --attention-bwd OURS.json TORCH.json` prints one such turn's line."""
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
            phase = ("prefill" if name.startswith("prefill") else
                     "train" if name.startswith("train") else "decode")
            tp = name.rsplit("tp", 1)[-1]
            ref = (refs.get(f"torch_{phase}_tp{tp}")
                   if name.startswith(("prefill_tp", "decode", "train_tp", "train_cudnn_tp"))
                   else None)
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
                # Batches (--batch) are timed as the reference times them: median against median.
                timing = table.attrs.get("timing", b"")
                timing = timing.decode() if isinstance(timing, bytes) else str(timing)
                batch = timing == "batch_mean"
                ours_us = float(match[0]["time_p50_ns" if batch else "time_mean_ns"]) / 1e3
                busbw = float(match[0]["busbw_p50_gbps" if batch else "busbw_gbps"])
                rows.append((np_, r["collective"], r["size_bytes"], ours_us, r["time_us"], busbw,
                             r["busbw_gbps"], ref["nccl"]))
    return rows


def _turns(out, prefix):
    turns = {}
    for path in glob.glob(os.path.join(out, "ref", f"{prefix}_*.json")):
        with open(path) as f:
            turns[os.path.basename(path)[len(prefix) + 1:-len(".json")]] = json.load(f)
    return turns


def attention_rows(out):
    """Per shape and pass: each implementation's TFLOP/s (median over turns) and cudnn's time
    over PyTorch's cuDNN backend, the ratio taken within each turn, then the median."""
    ours, theirs = _turns(out, "ridgeline_attention"), _turns(out, "torch_attention")
    key = lambda r: (r["seq"], r["kv_heads"], r["pass"])
    table = {}
    for turn in sorted(set(ours) & set(theirs)):
        for side, doc in (("", ours[turn]), ("torch ", theirs[turn])):
            for r in doc["rows"]:
                cell = table.setdefault(key(r), {}).setdefault(side + r["impl"], [])
                if r["status"] == "ok":
                    cell.append((turn, r["flops"] / (r["p50_ms"] * 1e9), r["p50_ms"]))
    rows = []
    for k in sorted(table):
        cells = table[k]
        med = lambda xs: sorted(xs)[len(xs) // 2] if xs else float("nan")
        tflops = {name: med([t for _, t, _ in v]) for name, v in cells.items()}
        ours_ms = {t: ms for t, _, ms in cells.get("cudnn", [])}
        ratios = [ours_ms[t] / ms for t, _, ms in cells.get("torch cudnn", []) if t in ours_ms]
        # The project's own kernel against cuDNN in TFLOP/s (cudnn time over fused time).
        fused_ms = {t: ms for t, _, ms in cells.get("fused", [])}
        own = [ms / fused_ms[t] for t, _, ms in cells.get("cudnn", []) if t in fused_ms]
        rows.append((k, tflops, med(ratios), med(own)))
    return rows


def attention_bwd_turn(ours_path, torch_path):
    """One attention_bwd turn: (fused bwd TFLOP/s, PyTorch flash bwd TFLOP/s, ours / theirs);
    nan where a side has no successful row."""
    def tflops(path, impl):
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            return float("nan")
        for r in doc["rows"]:
            if r["impl"] == impl and r["pass"] == "bwd" and r["status"] == "ok":
                return r["flops"] / (r["p50_ms"] * 1e9)
        return float("nan")
    ours, theirs = tflops(ours_path, "fused"), tflops(torch_path, "flash")
    return ours, theirs, ours / theirs if theirs > 0 else float("nan")


def attention_bwd_rows(out):
    """Every attention_bwd turn of the job, in turn order."""
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "ref", "attention_bwd_ridgeline_*.json"))):
        turn = os.path.basename(path)[len("attention_bwd_ridgeline_"):-len(".json")]
        rows.append((turn, *attention_bwd_turn(path, os.path.join(out, "ref", f"attention_bwd_torch_{turn}.json"))))
    return rows


def attention_layer_rows(out):
    """The layer under each attention implementation (a run's /points/<k>)."""
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "h5", "attention_layer_*.h5"))):
        with h5py.File(path, "r") as f:
            if "points" not in f:
                continue
            for k in sorted(f["points"], key=int):
                p = f["points"][k]
                s = p["summary"]
                ops = s["ops"][()]
                names = [n.decode() if isinstance(n, bytes) else n for n in ops["name"]]
                a = ops[names.index("attention")] if "attention" in names else None
                field = lambda n: float(a[n]) if a is not None and n in ops.dtype.names else float("nan")
                bound = field("bound_ns")
                rows.append((os.path.basename(path)[:-3], attr(s, "attention", "?"), attr(s, "p50_ns") / 1e6,
                             field("per_step_p50_ns") / 1e6, 100 * field("share"), field("achieved_tflops"),
                             field("flops") / bound / 1e3 if bound > 0 else float("nan"),
                             attr(s, "ceiling", "none"), attr(s, "check", "?")))
    return rows


def pipeline_rows(out):
    """Scheduled runs: the schedule, microbatches, the theory bubble and each stage's measured one."""
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "h5", "*.h5"))):
        with h5py.File(path, "r") as f:
            if "summary" not in f or "bubble_theory" not in f["summary"].attrs:
                continue
            s = f["summary"]
            stages = sorted(k for k in s.attrs if k.startswith("stage") and k.endswith(".bubble"))
            if len(stages) < 2:
                continue
            rows.append((os.path.basename(path)[:-3], attr(s, "schedule", "?"),
                         int(attr(s, "microbatches", 0)), attr(s, "p50_ns") / 1e6,
                         attr(s, "bubble_theory"), [attr(s, k) for k in stages]))
    return rows


def main():
    if sys.argv[1] == "--attention-bwd":
        ours, theirs, ratio = attention_bwd_turn(sys.argv[2], sys.argv[3])
        print(f"fused bwd {ours:.1f} TFLOP/s, torch flash bwd {theirs:.1f} TFLOP/s, ratio {ratio:.3f}")
        return
    out = sys.argv[1]
    print(f"{'run':<28} {'p50 ms':>9} {'torch ms':>9} {'ratio':>6} {'check':<8} {'instr %':>7} {'gemm/ref':>8}")
    for r in layer_rows(out):
        print(f"{r[0]:<28} {r[1]:>9.4f} {r[2]:>9.4f} {r[3]:>6.3f} {str(r[4])[:8]:<8} {r[5]:>7.2f} {r[6]:>8.3f}")
    rows = pipeline_rows(out)
    if rows:
        print(f"\n{'pipeline':<24} {'schedule':<14} {'m':>3} {'p50 ms':>9} {'theory':>7}  stage bubbles")
        for r in rows:
            print(f"{r[0]:<24} {r[1]:<14} {r[2]:>3} {r[3]:>9.3f} {r[4]:>7.3f}  "
                  + " ".join(f"{b:.3f}" for b in r[5]))
    rows = collective_rows(out)
    if rows:
        print(f"\n{'sweep':<26} {'collective':<15} {'max bytes':>11} {'busbw GB/s':>10} {'max us <=128K':>13}")
        for r in rows:
            print(f"{r[0]:<26} {r[1]:<15} {r[2]:>11} {r[3]:>10.1f} {r[4]:>13.1f}")
    rows = attention_rows(out)
    if rows:
        impls = ["fused", "fused-sm80", "cudnn", "naive", "torch cudnn", "torch flash", "torch efficient",
                 "torch math"]
        print(f"\n{'attention alone: TFLOP/s':<24} " + " ".join(f"{n:>9}" for n in
              ["fused", "f.sm80", "cudnn", "naive", "t.cudnn", "t.flash", "t.effic", "t.math"])
              + f" {'cudnn/t.cudnn time':>18} {'fused/cudnn':>11}")
        for (seq, kv, pass_), tflops, ratio, own in rows:
            print(f"{f's={seq} kv={kv} {pass_}':<24} " + " ".join(f"{tflops.get(n, float('nan')):>9.1f}" for n in impls)
                  + f" {ratio:>18.3f} {own:>11.3f}")
        print("FLOPs: forward 4*b*h*s*s*d/2 (causal), backward 2.5 x forward; medians over the turns; "
              "the ratios are taken within each turn (fused/cudnn in TFLOP/s)")
    rows = attention_bwd_rows(out)
    if rows:
        print(f"\n{'attention_bwd turn':<24} {'fused':>9} {'t.flash':>9} {'ratio':>7}")
        for turn, ours, theirs, ratio in rows:
            print(f"{turn:<24} {ours:>9.1f} {theirs:>9.1f} {ratio:>7.3f}")
        print("s=4096 d=128 32 heads causal b=1, backward TFLOP/s (2.5 x the forward's FLOPs)")
    rows = attention_layer_rows(out)
    if rows:
        print(f"\n{'layer':<24} {'attention':<9} {'step ms':>9} {'attn ms':>9} {'share %':>7} {'TFLOP/s':>8} "
              f"{'ceil TF/s':>9} {'step ceiling':<13} check")
        for r in rows:
            print(f"{r[0]:<24} {r[1]:<9} {r[2]:>9.3f} {r[3]:>9.3f} {r[4]:>7.1f} {r[5]:>8.1f} {r[6]:>9.1f} "
                  f"{str(r[7]):<13} {r[8]}")
    rows = reference_rows(out)
    if rows:
        print(f"\n{'np':>2} {'collective':<15} {'size':>11} {'us':>9} {'torch us':>9} {'t ratio':>7} "
              f"{'busbw':>7} {'torch':>7} {'bw ratio':>8}  torch NCCL")
        for r in rows:
            print(f"{r[0]:>2} {r[1]:<15} {r[2]:>11} {r[3]:>9.2f} {r[4]:>9.2f} {r[3] / r[4]:>7.3f} "
                  f"{r[5]:>7.1f} {r[6]:>7.1f} {r[5] / r[6] if r[6] else float('nan'):>8.3f}  {r[7]}")


if __name__ == "__main__":
    main()
