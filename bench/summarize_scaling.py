#!/usr/bin/env python3
"""Table of bench/run_multi_gpu.sh's results (issue 8): weak scaling at batch one per GPU, ragtrain with the balanced
and random schedules against PyTorch DDP, plus the correctness comparisons and the watchdog checks.

Per P: sequences/s, weak-scaling efficiency seq/s(P) / (P x seq/s(1)) (of the same program and schedule), the wait
fraction, the length imbalance `ragtrain simulate` predicts for the schedule, and ragtrain balanced / DDP.
Wait fraction: ragtrain: rank 0's "allreduce" phase (GPU events from the end of its backward to the end of NCCL's
all-reduce, i.e. waiting for the slowest rank plus the transfer) over its whole step; the bench JSON holds rank 0's
phases only. DDP: each rank's time in the all-reduce hook (the same span, from ddp_reference.py) over its timed
seconds, median (min..max) over ranks.
Targets: balanced efficiency >= 95% at every P >= 2; ragtrain balanced >= 10x DDP throughput at every P.
usage: summarize_scaling.py WORK_DIR [SUMMARY.json]"""
import glob
import json
import math
import os
import re
import sys

EFF_TARGET = 0.95
RATIO_TARGET = 10.0
NAN = float("nan")


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def clean(x):
    """NaN -> None, recursively: strict JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x


def seq_s(r):
    return r["sequences_per_second"] if r else NAN


def ragtrain_wait(r):
    """Rank 0's all-reduce phase over its step (GPU events); NaN without phases (CPU backend: host timings)."""
    if not r:
        return NAN
    ph = r.get("phase_us_per_step_rank0") or {}
    total = sum(ph.values())
    if total > 0 and "allreduce" in ph:
        return ph["allreduce"] / total
    t = r.get("timings", {})   # CPU backend: host clock, median rank
    c, m = t.get("compute_s", {}).get("median"), t.get("comm_s", {}).get("median")
    return m / (c + m) if c is not None and m is not None and c + m > 0 else NAN


def fmt(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) and math.isfinite(x) else "-".rjust(len(format(0.0, spec)))


def main():
    work = sys.argv[1]
    ps = sorted({int(m.group(1)) for p in glob.glob(os.path.join(work, "*_p*.json"))
                 if (m := re.search(r"_p(\d+)(?:_[a-z]+)?\.json$", p))})
    sim = load(os.path.join(work, "simulate.json"))
    imbalance = {row["ranks"]: row for row in (sim or {}).get("rows", [])}
    base = {s: seq_s(load(os.path.join(work, f"ragtrain_{s}_p1.json"))) for s in ("balanced", "random")}
    base["ddp"] = seq_s(load(os.path.join(work, "ddp_p1.json")))

    rows = []
    print("# issue 8: weak scaling at batch one per GPU, H=50, F=36, 10 classes, lengths 60..130, Adam; efficiency = "
          "seq/s(P) / (P x seq/s(1)); wait = all-reduce share of the step (ragtrain: rank 0, GPU events; DDP: median "
          "rank, min..max); imb = length imbalance `ragtrain simulate` predicts")
    print(f"# {'P':>2} | {'balanced seq/s':>14} {'us/step':>8} {'eff':>6} {'wait':>6} {'imb':>6} | {'random seq/s':>12}"
          f" {'eff':>6} {'wait':>6} {'imb':>6} | {'DDP seq/s':>9} {'eff':>6} {'wait (min..max)':>19} | {'bal/DDP':>7}")
    for p in ps:
        b = load(os.path.join(work, f"ragtrain_balanced_p{p}.json"))
        r = load(os.path.join(work, f"ragtrain_random_p{p}.json"))
        d = load(os.path.join(work, f"ddp_p{p}.json"))
        row = {"ranks": p}
        for name, res in (("balanced", b), ("random", r)):
            row[name] = {"sequences_per_second": seq_s(res), "us_per_step": res["us_per_step"] if res else NAN,
                         "efficiency": seq_s(res) / (p * base[name]), "wait_fraction_rank0": ragtrain_wait(res),
                         "predicted_imbalance": imbalance.get(p, {}).get(f"{name}_imbalance", NAN),
                         "valid": res.get("valid") if res else None,
                         "phase_us_per_step_rank0": res.get("phase_us_per_step_rank0") if res else None}
        dw = (d or {}).get("wait_fraction", {})
        row["ddp"] = {"sequences_per_second": seq_s(d), "us_per_step": d["us_per_step"] if d else NAN,
                      "efficiency": seq_s(d) / (p * base["ddp"]), "wait_fraction": dw or None,
                      "allreduce_us_per_step": (d or {}).get("allreduce_us_per_step"),
                      "valid": d.get("valid") if d else None}
        row["ratio_balanced_to_ddp"] = seq_s(b) / seq_s(d)
        rows.append(row)
        B, R, D = row["balanced"], row["random"], row["ddp"]
        dws = (f"{fmt(dw.get('median', NAN), '.3f')} ({fmt(dw.get('min', NAN), '.3f')}..{fmt(dw.get('max', NAN), '.3f')})"
               if dw else "-")
        print(f"  {p:>2} | {fmt(B['sequences_per_second'], '14.1f')} {fmt(B['us_per_step'], '8.1f')}"
              f" {fmt(B['efficiency'], '6.3f')} {fmt(B['wait_fraction_rank0'], '6.3f')} {fmt(B['predicted_imbalance'], '6.3f')}"
              f" | {fmt(R['sequences_per_second'], '12.1f')} {fmt(R['efficiency'], '6.3f')}"
              f" {fmt(R['wait_fraction_rank0'], '6.3f')} {fmt(R['predicted_imbalance'], '6.3f')}"
              f" | {fmt(D['sequences_per_second'], '9.1f')} {fmt(D['efficiency'], '6.3f')} {dws:>19}"
              f" | {fmt(row['ratio_balanced_to_ddp'], '6.1f')}x")
        for name in ("balanced", "random"):
            ph = row[name]["phase_us_per_step_rank0"]
            if ph:
                print(f"       {name} phases rank 0 (us/step): " + ", ".join(f"{k} {v:.1f}" for k, v in ph.items()))
        bad = [n for n in ("balanced", "random", "ddp") if row[n]["valid"] is False]
        if bad:
            print(f"       INVALID (loss not falling or not finite): {', '.join(bad)}")

    # Targets.
    targets = {}
    multi = [row for row in rows if row["ranks"] >= 2]
    effs = [row["balanced"]["efficiency"] for row in multi]
    if not multi:
        targets["efficiency"] = "not measured (one GPU)"
    elif all(math.isfinite(e) for e in effs):
        worst = min(effs)
        targets["efficiency"] = f"{'MET' if worst >= EFF_TARGET else 'MISSED'} (worst {100 * worst:.1f}%)"
    else:
        targets["efficiency"] = "incomplete (a run is missing)"
    ratios = [row["ratio_balanced_to_ddp"] for row in rows]
    if rows and all(math.isfinite(x) for x in ratios):
        targets["ratio_to_ddp"] = f"{'MET' if min(ratios) >= RATIO_TARGET else 'MISSED'} (lowest {min(ratios):.1f}x)"
    else:
        targets["ratio_to_ddp"] = "incomplete (a run is missing)"
    print(f"# target: balanced efficiency >= {100 * EFF_TARGET:.0f}% at every P >= 2: {targets['efficiency']}")
    print(f"# target: ragtrain balanced >= {RATIO_TARGET:.0f}x DDP at every P: {targets['ratio_to_ddp']}")

    # Correctness.
    corr = []
    for path in sorted(glob.glob(os.path.join(work, "corr_p*_*.json"))):
        c = load(path)
        if not c:
            continue
        corr.append({k: c.get(k) for k in ("label", "passed", "steps_compared", "loss_max_rel_diff",
                                           "param_worst_fraction_of_tolerance", "problems")})
        print(f"# correctness [{c.get('label')}]: {'PASSED' if c.get('passed') else 'FAILED'}: "
              f"{c.get('steps_compared')} steps, loss max rel diff {fmt(c.get('loss_max_rel_diff', NAN), '.3g')} "
              f"(<= {c.get('loss_rtol')}), params worst {fmt(c.get('param_worst_fraction_of_tolerance', NAN), '.3g')} "
              f"of tolerance ({c.get('param_rtol')})" + (f"; {c['problems'][0]}" if c.get("problems") else ""))
    if not corr:
        print("# correctness: no comparison found")

    # Watchdog.
    dog = []
    for sig in ("KILL", "STOP"):
        k = load(os.path.join(work, f"kill_{sig}.json"))
        if not k:
            continue
        dog.append(k)
        named = k.get("lines_naming_rank") or []
        print(f"# watchdog SIG{sig} to rank {k['victim']} of {k['ranks']} (--comm-timeout {k['comm_timeout_s']:g} s): "
              f"job ended after {k['seconds_to_end']:.1f} s{'' if k['ended_by_itself'] else ' (only when ended by the script)'}"
              f", exit {k['exit_code']}; " + (f"names the rank: {named[0].strip()}" if named else "NO line names the rank"))
    if not dog:
        print("# watchdog: not run (needs P >= 2)")

    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            json.dump(clean({"rows": rows, "targets": targets, "correctness": corr, "watchdog": dog,
                             "simulate": sim}), f, indent=1)


if __name__ == "__main__":
    main()
