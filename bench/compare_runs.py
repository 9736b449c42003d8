#!/usr/bin/env python3
"""Do two `ragtrain train` runs agree? For issue 8's correctness check: P ranks x --batch-per-rank 1 against one rank x
--batch-per-rank P, same data, seed and options, both with --log-every 1. The global batches are the same sequences
(the schedule depends only on the global batch, never on how it splits into ranks), so the runs differ only in the
order floats are summed (NCCL's all-reduce vs one rank's batch): the per-step losses must agree to --loss-rtol and
the final parameters to --param-rtol.

Losses: every "step" record of RUN_A/metrics.jsonl against RUN_B's, |a - b| <= loss_rtol |b|; both runs must have
the same steps, at least --steps of them.
Parameters: every dataset of /params in RUN_A/checkpoint.h5 against RUN_B's, elementwise
|a - b| <= param_rtol (|b| + max|b of that tensor|): relative to the element, with the tensor's scale as the floor
(Adam moves every weight by about lr per step whatever its gradient, so weights that pass near zero differ by
summation-order noise times lr, not times their own size).
Prints one line per check and exits 0 when all pass, 1 otherwise; --out writes the numbers as JSON.
usage: compare_runs.py RUN_A RUN_B [--steps 100] [--loss-rtol 1e-5] [--param-rtol 1e-4] [--out R.json]"""
import argparse
import json
import math
import os
import sys

import h5py
import numpy as np


def step_losses(run):
    """{step: loss} of the run's metrics.jsonl "step" records."""
    out = {}
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            rec = json.loads(line)
            if rec.get("event") == "step":
                out[int(rec["step"])] = float("nan") if rec["loss"] is None else float(rec["loss"])
    return out


def params(run):
    """{name: float64 array} of the run's checkpoint.h5 /params."""
    out = {}
    with h5py.File(os.path.join(run, "checkpoint.h5"), "r") as f:
        f["params"].visititems(lambda name, obj: out.__setitem__(name, np.asarray(obj, dtype=np.float64))
                               if isinstance(obj, h5py.Dataset) else None)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_a", help="train --out folder (e.g. P ranks x batch one)")
    ap.add_argument("run_b", help="train --out folder (e.g. one rank x batch P): the reference")
    ap.add_argument("--steps", type=int, default=100, help="both runs must have at least this many step records")
    ap.add_argument("--loss-rtol", type=float, default=1e-5)
    ap.add_argument("--param-rtol", type=float, default=1e-4)
    ap.add_argument("--label", default="", help="name of the comparison in the output")
    ap.add_argument("--out", help="JSON file to write")
    a = ap.parse_args()

    res = {"run_a": a.run_a, "run_b": a.run_b, "label": a.label, "loss_rtol": a.loss_rtol,
           "param_rtol": a.param_rtol, "steps_required": a.steps}
    problems = []
    try:
        la, lb = step_losses(a.run_a), step_losses(a.run_b)
        pa, pb = params(a.run_a), params(a.run_b)
    except (OSError, ValueError, KeyError) as e:
        problems.append(f"cannot read the runs: {e}")
        la = lb = pa = pb = {}

    # Losses, step by step.
    worst_loss, worst_step = 0.0, None
    if la or lb:
        if sorted(la) != sorted(lb):
            problems.append(f"different step records: {len(la)} in A (last {max(la, default=0)}), "
                            f"{len(lb)} in B (last {max(lb, default=0)})")
        if len(la) < a.steps:
            problems.append(f"only {len(la)} step records in A, need {a.steps} (train with --log-every 1)")
        for s in sorted(set(la) & set(lb)):
            x, y = la[s], lb[s]
            r = abs(x - y) / abs(y) if y != 0 else (0.0 if x == y else math.inf)
            if not (math.isfinite(x) and math.isfinite(y)):
                r = math.inf
            if r > worst_loss or worst_step is None:
                worst_loss, worst_step = r, s
        res.update(steps_compared=len(set(la) & set(lb)), loss_max_rel_diff=worst_loss, loss_worst_step=worst_step,
                   loss_first=[la.get(min(la, default=0)), lb.get(min(lb, default=0))],
                   loss_last=[la.get(max(la, default=0)), lb.get(max(lb, default=0))])
        if worst_loss > a.loss_rtol:
            problems.append(f"loss differs by {worst_loss:.3g} relative at step {worst_step} "
                            f"({la[worst_step]!r} vs {lb[worst_step]!r}), more than {a.loss_rtol:g}")

    # Parameters, tensor by tensor.
    tensors = {}
    if pa or pb:
        if sorted(pa) != sorted(pb):
            problems.append(f"different parameter tensors: {sorted(pa)} vs {sorted(pb)}")
        for name in sorted(set(pa) & set(pb)):
            x, y = pa[name], pb[name]
            if x.shape != y.shape:
                problems.append(f"{name}: shape {x.shape} vs {y.shape}")
                continue
            scale = float(np.abs(y).max()) if y.size else 0.0
            d = np.abs(x - y)
            ratio = d / (a.param_rtol * (np.abs(y) + scale)) if scale > 0 else np.where(d > 0, np.inf, 0.0)
            i = int(np.argmax(ratio)) if ratio.size else 0
            t = {"shape": list(x.shape), "scale": scale, "max_abs_diff": float(d.max()) if d.size else 0.0,
                 "max_rel_diff_of_scale": float(d.max() / scale) if scale > 0 else None,
                 "worst_fraction_of_tolerance": float(ratio.flat[i]) if ratio.size else 0.0,
                 "finite": bool(np.isfinite(x).all() and np.isfinite(y).all())}
            tensors[name] = t
            if not t["finite"]:
                problems.append(f"{name}: non-finite parameters")
            elif t["worst_fraction_of_tolerance"] > 1:
                problems.append(f"{name}: element {i} differs by {d.flat[i]:.3g} ({x.flat[i]!r} vs {y.flat[i]!r}), "
                                f"{t['worst_fraction_of_tolerance']:.2f}x the tolerance")
    res["params"] = tensors
    res["param_worst_fraction_of_tolerance"] = max((t["worst_fraction_of_tolerance"] for t in tensors.values()),
                                                   default=None)
    res["passed"] = not problems
    res["problems"] = problems

    tag = f"[{a.label}] " if a.label else ""
    if "steps_compared" in res:
        print(f"# {tag}losses: {res['steps_compared']} steps, max relative difference {worst_loss:.3g} "
              f"(step {worst_step}; tolerance {a.loss_rtol:g})")
    if tensors:
        print(f"# {tag}parameters: {len(tensors)} tensors, worst element at {res['param_worst_fraction_of_tolerance']:.3g}"
              f" of the tolerance {a.param_rtol:g} (|a-b| <= rtol (|b| + max|b|)); largest |a-b| / max|b| "
              f"{max((t['max_rel_diff_of_scale'] or 0) for t in tensors.values()):.3g}")
    for p in problems:
        print(f"# {tag}FAILED: {p}")
    print(f"# {tag}runs agree: {'yes' if res['passed'] else 'NO'}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0 if res["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
