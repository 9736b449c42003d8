#!/usr/bin/env python3
"""Per-step view of a kernel timeline written by bench/kernel_timeline.cpp (CUPTI, no nsys needed).

A step starts at each kernel whose name contains --first (default: projection_kernel). For the last --steps complete
steps it prints, per kernel of the step, its start and end relative to the step's start (us), its duration, the
gap after the kernel before it (negative: the two overlapped, as programmatic dependent launch allows), and when
the host's launch call for it began (the first kernel's gap is after the previous step's last record) (from the runtime records, matched by correlation id). Then the medians over
those steps, and writes them as JSON with --json.

usage: timeline_summary.py TIMELINE.csv [--steps 200] [--first projection_kernel] [--json OUT.json]
"""
import argparse
import csv
import json
import os
import re
import statistics
import sys

SHORT = ["projection", "fused_lstm_kernel", "cluster", "weight_grad", "split_grad", "sums_kernel", "fused_optimizer",
         "gather", "head_loss", "fill"]


def short(name):
    for s in SHORT:
        if s in name:
            return s
    m = re.search(r"\d+([A-Za-z_]\w+?)E", name)
    return m.group(1) if m else name[:40]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--first", default="projection_kernel")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.json and os.path.exists(args.json):
        sys.exit(f"timeline_summary.py: {args.json} exists; not overwritten (name another --json)")
    gpu, host = [], {}
    with open(args.csv) as f:
        for r in csv.DictReader(f):
            rec = dict(kind=r["kind"], name=r["name"], start=int(r["start_ns"]), end=int(r["end_ns"]),
                       queued=int(r["queued_ns"]), corr=int(r["correlation"]))
            if rec["kind"] == "R":
                host[rec["corr"]] = rec
            else:
                gpu.append(rec)
    gpu.sort(key=lambda r: r["start"])
    starts = [i for i, r in enumerate(gpu) if r["kind"] == "K" and args.first in r["name"]]
    if len(starts) < 3:
        sys.exit("fewer than 3 steps in the timeline (is --first right?)")
    steps = []
    for a, b in zip(starts[-args.steps - 1:-1], starts[-args.steps:]):
        t0 = gpu[a]["start"]
        rows = []
        prev_end = max(r["end"] for r in gpu[max(0, a - 16):a]) if a > 0 else None   # the step before's last end
        for r in gpu[a:b]:
            launch = host.get(r["corr"])
            rows.append(dict(name=short(r["name"]) if r["kind"] == "K" else r["name"],
                             start=(r["start"] - t0) / 1e3, end=(r["end"] - t0) / 1e3,
                             dur=(r["end"] - r["start"]) / 1e3,
                             gap=None if prev_end is None else (r["start"] - prev_end) / 1e3,
                             launch=None if launch is None else (launch["start"] - t0) / 1e3,
                             call=None if launch is None else (launch["end"] - launch["start"]) / 1e3))
            prev_end = r["end"] if prev_end is None else max(prev_end, r["end"])
        steps.append(dict(length=(gpu[b]["start"] - t0) / 1e3, rows=rows))
    # Medians per (position in the step, name), over the steps whose kernel sequence is the most common one.
    sig = statistics.mode([tuple(r["name"] for r in s["rows"]) for s in steps])
    same = [s for s in steps if tuple(r["name"] for r in s["rows"]) == sig]
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    out = dict(steps=len(same), step_us=med([s["length"] for s in same]), rows=[])
    print(f"# {len(same)} of the last {len(steps)} steps have the usual sequence; times in us from the step's start "
          f"(its first '{args.first}'); medians")
    print(f"# step {out['step_us']:.2f} us (start to next start)")
    print(f"# {'kernel':<18} {'start':>8} {'end':>8} {'dur':>8} {'gap':>8} {'launch':>8} {'call':>6}")
    for i, name in enumerate(sig):
        col = lambda k: med([s["rows"][i][k] for s in same if s["rows"][i][k] is not None])
        row = dict(name=name, start=col("start"), end=col("end"), dur=col("dur"), gap=col("gap"),
                   launch=col("launch"), call=col("call"))
        out["rows"].append(row)
        print(f"  {name:<18} {row['start']:8.2f} {row['end']:8.2f} {row['dur']:8.2f} {row['gap']:8.2f} "
              f"{row['launch']:8.2f} {row['call']:6.2f}")
    if args.json:
        # Whole under another name, then linked in place: no half file if killed, never over an existing one.
        part = f"{args.json}.part.{os.getpid()}"
        try:
            with open(part, "x") as f:
                json.dump(out, f, indent=1)
            os.link(part, args.json)
        except FileExistsError:
            sys.exit(f"timeline_summary.py: {args.json} exists; not overwritten (name another --json)")
        finally:
            if os.path.exists(part):
                os.unlink(part)


if __name__ == "__main__":
    main()
