#!/usr/bin/env python3
"""FusedBudget's H=50 K=1 lines of several builds (call1.sh's budget.log: "== build" before each build's output),
side by side: the recurrence's phases in cycles (T=96, last pool, block 0 of a recorded run), the fused run as
training launches it, the whole training step (FusedBudget.WholeStepK1: the backend driven as the trainer drives it),
and each build's difference from BASE (default w0) in the loops and head (cycles and us at the printed clock) and in
the whole step -- ranked by the whole step where every build has it, else by the cycles saved.

    budget_rank.py budget.log [BASE]

In a v8 build the backward weights' reads (~860 cycles in main) moved from the "forward" phase into the "head" one;
their sum with the backward is what the step sees.
"""
import re
import sys

PHASES = re.compile(r"H=50 K=1 T=96 last pool: projection kernel .*?\(block 0: staging W_hh (\d+), forward (\d+) "
                    r"\(\d+/step\), head (\d+), backward (\d+) \(\d+/step\), total (\d+) cycles = [\d.]+ us at "
                    r"([\d.]+) GHz\)")
WHOLE = re.compile(r"H=50 K=1 T=96 last pool: whole run ([\d.]+) us streaming")
STEP = re.compile(r"H=50 K=1 whole training step .*: ([\d.]+) us a step")


def read(path):
    builds, name = {}, None
    for line in open(path, errors="replace"):
        if line.startswith("== "):
            name = line[3:].strip()
            builds[name] = {}
            continue
        if name is None:
            continue
        m = PHASES.search(line)
        if m:
            stage, fwd, head, bwd, total = (int(m.group(i)) for i in range(1, 6))
            builds[name].update(stage=stage, fwd=fwd, head=head, bwd=bwd, total=total, ghz=float(m.group(6)))
        m = WHOLE.search(line)
        if m:
            builds[name]["whole"] = float(m.group(1))
        m = STEP.search(line)
        if m:
            builds[name]["step"] = float(m.group(1))
    return {k: v for k, v in builds.items() if "fwd" in v}


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    builds = read(sys.argv[1])
    base = sys.argv[2] if len(sys.argv) == 3 else "w0"
    if base not in builds:
        sys.exit(f"budget_rank.py: no budget line for {base} in {sys.argv[1]}")
    b = builds[base]
    loops = lambda v: v["fwd"] + v["head"] + v["bwd"]
    by_step = all("step" in v for v in builds.values())
    print(f"{'build':8s} {'fwd/step':>9s} {'head':>7s} {'bwd/step':>9s} {'total':>8s} {'run us':>7s} "
          f"{'saved cyc':>10s} {'saved us':>9s} {'step us':>8s} {'saved':>6s}")
    rank = (lambda v: v["step"]) if by_step else (lambda v: -(loops(b) - loops(v)))
    for name, v in sorted(builds.items(), key=lambda kv: (kv[0] != base, rank(kv[1]))):
        saved = loops(b) - loops(v)
        step = v.get("step", float("nan"))
        print(f"{name:8s} {v['fwd'] / 96:9.1f} {v['head']:7d} {v['bwd'] / 96:9.1f} {v['total']:8d} "
              f"{v.get('whole', float('nan')):7.1f} {saved:10d} {saved / (v['ghz'] * 1e3):9.2f} {step:8.2f} "
              f"{b.get('step', float('nan')) - step:6.2f}")

if __name__ == "__main__":
    main()
