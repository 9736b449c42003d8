#!/usr/bin/env python3
"""Table of bench/run_multi_gpu.sh's results (issue 8): weak scaling at batch one per GPU, ragtrain with the balanced
and random schedules against PyTorch DDP, plus the correctness comparisons and the watchdog checks.

Per P: sequences/s, weak-scaling efficiency seq/s(P) / (P x seq/s(1)) (of the same program and schedule), the wait
fraction, the length imbalance `ragtrain simulate` predicts for the schedule, and ragtrain balanced / DDP.
Wait fraction, median (min..max) over ranks: ragtrain: a rank's "allreduce" phase (GPU events from the end of its
backward to the end of NCCL's all-reduce, i.e. waiting for the slowest rank plus the transfer) over its whole step.
DDP: each rank's time in the all-reduce hook (the same span, from ddp_reference.py) over its timed seconds.
Targets: balanced efficiency >= 95% at every P >= 2; ragtrain balanced >= 10x DDP throughput at every P.
usage: summarize_scaling.py WORK_DIR [SUMMARY.json]"""
import glob
import json
import math
import os
import re
import sys

from summarize import load   # a result file's JSON, or None where it is missing or cut short

EFF_TARGET = 0.95
RATIO_TARGET = 10.0
NAN = float("nan")


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


def spread(values):
    v = sorted(x for x in values if math.isfinite(x))
    if not v:
        return {}
    n = len(v)
    return {"min": v[0], "median": v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2]), "max": v[-1]}


def ragtrain_wait(r):
    """Each rank's all-reduce phase over its step (GPU events), min/median/max over ranks; older JSON files hold
    rank 0's phases only; the CPU backend has no phases (host timings instead)."""
    if not r:
        return {}
    by_rank = r.get("phase_us_per_step_by_rank") or {k: [v] for k, v in (r.get("phase_us_per_step_rank0") or {}).items()}
    if "allreduce" in by_rank:
        n = len(by_rank["allreduce"])
        totals = [sum(v[i] for v in by_rank.values()) for i in range(n)]
        return spread(by_rank["allreduce"][i] / totals[i] for i in range(n) if totals[i] > 0)
    return r.get("timings", {}).get("wait_fraction") or {}   # CPU backend: host clock, comm / (compute + comm)


def wait_text(w):
    return (f"{fmt(w.get('median', NAN), '.3f')} ({fmt(w.get('min', NAN), '.3f')}..{fmt(w.get('max', NAN), '.3f')})"
            if w else "-")


def fmt(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) and math.isfinite(x) else "-".rjust(len(format(0.0, spec)))


def main():
    work = sys.argv[1]
    # The P of the throughput runs only (the correctness files carry a P too, for other purposes).
    ps = sorted({int(m.group(1)) for p in glob.glob(os.path.join(work, "*_p*.json"))
                 if (m := re.search(r"/(?:ragtrain_[a-z]+|ddp)_p(\d+)\.json$", p))})
    sim = load(os.path.join(work, "simulate.json"))
    imbalance = {row["ranks"]: row for row in (sim or {}).get("rows", [])}
    base = {s: seq_s(load(os.path.join(work, f"ragtrain_{s}_p1.json"))) for s in ("balanced", "random")}
    base["ddp"] = seq_s(load(os.path.join(work, "ddp_p1.json")))

    rows = []
    print("# issue 8: weak scaling at batch one per GPU, H=50, F=36, 10 classes, lengths 60..130, Adam; efficiency = "
          "seq/s(P) / (P x seq/s(1)); wait = all-reduce share of the step, median rank (min..max) "
          "(ragtrain: GPU events; DDP: hook time); imb = length imbalance `ragtrain simulate` predicts")
    print(f"# {'P':>2} | {'balanced seq/s':>14} {'us/step':>8} {'eff':>6} {'wait (min..max)':>19} {'imb':>6}"
          f" | {'random seq/s':>12} {'eff':>6} {'wait (min..max)':>19} {'imb':>6}"
          f" | {'DDP seq/s':>9} {'eff':>6} {'wait (min..max)':>19} | {'bal/DDP':>7}")
    for p in ps:
        b = load(os.path.join(work, f"ragtrain_balanced_p{p}.json"))
        r = load(os.path.join(work, f"ragtrain_random_p{p}.json"))
        d = load(os.path.join(work, f"ddp_p{p}.json"))
        row = {"ranks": p}
        for name, res in (("balanced", b), ("random", r)):
            row[name] = {"sequences_per_second": seq_s(res), "us_per_step": res["us_per_step"] if res else NAN,
                         "efficiency": seq_s(res) / (p * base[name]), "wait_fraction": ragtrain_wait(res) or None,
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
        print(f"  {p:>2} | {fmt(B['sequences_per_second'], '14.1f')} {fmt(B['us_per_step'], '8.1f')}"
              f" {fmt(B['efficiency'], '6.3f')} {wait_text(B['wait_fraction']):>19} {fmt(B['predicted_imbalance'], '6.3f')}"
              f" | {fmt(R['sequences_per_second'], '12.1f')} {fmt(R['efficiency'], '6.3f')}"
              f" {wait_text(R['wait_fraction']):>19} {fmt(R['predicted_imbalance'], '6.3f')}"
              f" | {fmt(D['sequences_per_second'], '9.1f')} {fmt(D['efficiency'], '6.3f')} {wait_text(dw):>19}"
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
    for path in sorted(glob.glob(os.path.join(work, "corr_p*_*.json")) + glob.glob(os.path.join(work, "cross_p*.json"))
                       + glob.glob(os.path.join(work, "shared_p*.json"))):
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
    for tag, sig in [(t, s) for t in ("", "shared_") for s in ("KILL", "STOP")]:
        k = load(os.path.join(work, f"{tag}kill_{sig}.json"))
        if not k:
            continue
        k["ranks_share_one_gpu"] = tag == "shared_"
        dog.append(k)
        named = k.get("lines_naming_rank") or []
        where = " sharing one GPU" if tag else ""
        print(f"# watchdog SIG{sig} to rank {k['victim']} of {k['ranks']}{where} (--comm-timeout {k['comm_timeout_s']:g} s): "
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
