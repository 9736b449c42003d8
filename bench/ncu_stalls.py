#!/usr/bin/env python3
"""Where a kernel's warps wait, from Nsight Compute's source page: the stall reasons summed over the kernel, then the
instructions with the most PC samples (or every instruction between two addresses) with their top reasons.

usage: ncu --set full --warp-sampling-interval 0 -o REP ...;  ncu --import REP.ncu-rep --page source --csv \
           --print-source sass > SRC.csv;  bench/ncu_stalls.py SRC.csv [top [N] | ADDR_LO:ADDR_HI]
(addresses: the last 5 hex digits shown in the output). Used in session 8 (bench/results/h200-2026-12-03-session8).
"""
import csv, sys, collections
f = sys.argv[1]
rows = list(csv.reader(open(f)))
h = rows[1]
data = rows[2:]
ix = {k: i for i, k in enumerate(h)}
reasons = [k for k in h if k.startswith('stall_') and '(Not Issued)' not in k]
tot = collections.Counter()
insts = []
for r in data:
    if len(r) < len(h): continue
    try: s = int(r[ix['Warp Stall Sampling (All Samples)']] or 0)
    except ValueError: continue
    per = {k: int(r[ix[k]] or 0) for k in reasons}
    for k, v in per.items(): tot[k] += v
    insts.append((s, r[ix['Address']][-5:], r[ix['Source']].strip(), per, r[ix['Instructions Executed']]))
S = sum(tot.values())
print("total samples", S, "instructions", len(insts))
for k, v in tot.most_common(12): print(f"  {k:28s} {v:7d} {100*v/S:5.1f}%")
mode = sys.argv[2] if len(sys.argv) > 2 else 'top'
if mode == 'top':
    for s, a, src, per, ex in sorted(insts, key=lambda x: -x[0])[:int(sys.argv[3]) if len(sys.argv)>3 else 40]:
        top = ", ".join(f"{k[6:]}={v}" for k, v in sorted(per.items(), key=lambda x: -x[1])[:3] if v)
        print(f"{s:6d} {a} {ex:>7} {src[:60]:60s} {top}")
else:
    lo, hi = mode.split(':')
    on = False
    for s, a, src, per, ex in insts:
        if a == lo: on = True
        if on:
            top = ", ".join(f"{k[6:]}={v}" for k, v in sorted(per.items(), key=lambda x: -x[1])[:3] if v)
            print(f"{s:6d} {a} {ex:>7} {src[:70]:70s} {top}")
        if a == hi: break
