# Summarize diag-stamps output: per fused run (epoch tag), each phase's time relative to the projection's start,
# with the previous and next optimizer's stamps matched by time. usage: stamps_summary.py stamps.txt
import sys, statistics as st
fused = {}; opt = {}
for line in open(sys.argv[1]):
    who, tag, kind, t = line.split()
    d = fused if who == "fused" else opt
    d.setdefault(int(tag), {})[int(kind)] = int(t)
names = {0: "proj start", 1: "proj after wait", 2: "proj first block end", 3: "proj last block end",
         10: "rec start", 11: "rec prologue done", 12: "rec after wait", 13: "rec forward done", 14: "rec head done",
         15: "rec backward done", 16: "rec end", 17: "head logits", 18: "head softmax", 19: "head dh", 24: "rec forward loop end", 20: "gemm start", 21: "gemm last ready", 22: "gemm loop done",
         23: "gemm end"}
onames = {0: "opt start", 1: "opt after wait", 2: "opt sums", 3: "opt cluster sync", 4: "opt update done", 5: "opt end", 6: "opt published", 7: "opt norm"}
opts = sorted(opt.values(), key=lambda o: o.get(1, 0))
rows = {}
runs = [f for f in fused.values() if 0 in f and 12 in f and 23 in f]
runs.sort(key=lambda f: f[0])
res = 0
for f in runs:
    t0 = f[0]
    for k, v in f.items(): rows.setdefault(names.get(k, str(k)), []).append(v - t0)
    nxt = [o for o in opts if o.get(1, 0) >= f[22]]
    prv = [o for o in opts if o.get(5, 0) <= f[12] and o.get(5, 0) > 0]
    if nxt:
        for k, v in nxt[0].items(): rows.setdefault("next " + onames[k], []).append(v - t0)
    if prv:
        for k, v in prv[-1].items(): rows.setdefault("prev " + onames[k], []).append(v - t0)
    for k, v in f.items(): res |= v
print(f"# {len(runs)} runs; timer values' common low bits: {res & -res} ns granularity at least")
order = sorted(rows, key=lambda k: st.median(rows[k]))
print(f"{'event':28s} {'median':>9s} {'mean':>9s} {'p10':>9s} {'p90':>9s}   (us from the projection's start)")
for k in order:
    v = sorted(rows[k]); n = len(v)
    print(f"{k:28s} {st.median(v)/1e3:9.2f} {sum(v)/n/1e3:9.2f} {v[n//10]/1e3:9.2f} {v[9*n//10]/1e3:9.2f}  n={n}")
