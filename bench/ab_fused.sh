#!/usr/bin/env bash
# A/B of ragtrain builds on one GPU: `ragtrain bench` for each case (H:K, or H:K:L for L stacked layers) with each build, the builds interleaved
# round by round on the same data (run_fused.sh's: F=36, 10 classes, lengths 60..130, Adam, balanced schedule), then
# a table of microseconds a step per build (every round, and the median) and ab.json. Runs of one build in different
# device calls differed by up to ~4% on the H200 (doc/performance.md), so builds are compared within one call only.
# usage, from the repository root:
#   BUILDS="dir_a dir_b" [CASES="50:128 50:1 128:1:2"] [ROUNDS=3] [LSTM=fused] OUT=$OUT bench/ab_fused.sh
# Each build dir holds a `ragtrain`; a build is named by its folder's name. STEPS / WARMUP override the step counts
# (default 5000 at K=1, 3000 else, after 300), SCHEDULE the --schedule (balanced); DEVICE=cpu (with LSTM=) runs the
# script without a GPU. NCU=1 adds each build's kernel durations (ncu, the fused step's kernels or those NCU_KERNELS
# matches: NCU_LAUNCHES launches (10) after 100 of a 150-step run, so that a filter matching one kernel a step still
# reaches them; serialized, caches not flushed between kernels: the step's kernels read each other's output from L2)
# for each case of NCU_CASES (CASES), in ncu.txt; ROUNDS=0 NCU=1 gives the kernel durations alone.
set -uo pipefail
BUILDS=${BUILDS:?set BUILDS to the folders of the ragtrain builds to compare}
CASES=${CASES:-50:128 50:1}
ROUNDS=${ROUNDS:-3}
LSTM=${LSTM-fused}
DEVICE=${DEVICE:-cuda}
OUT=${OUT:-runs/ab-fused}
WORK=${WORK:-/tmp/ragtrain-ab-fused}
read -r -a builds <<< "$BUILDS"
names=$(for b in "${builds[@]}"; do basename "$b"; done)
[ "$(sort <<< "$names" | uniq -d)" = "" ] || { echo "ab_fused.sh: builds need distinct folder names: $BUILDS" >&2; exit 2; }
BIN=${builds[0]}
common=$(dirname "$0")/bench_common.sh
[ -f "$common" ] || common=bench/bench_common.sh
. "$common"
lstm_opt=()
[ -n "$LSTM" ] && lstm_opt=(--lstm "$LSTM")
for c in $CASES; do
  IFS=: read -r H K L <<< "$c"
  L=${L:-1}
  steps=${STEPS:-$([ "$K" = 1 ] && echo 5000 || echo 3000)}
  for r in $(seq 1 "$ROUNDS"); do
    for b in "${builds[@]}"; do
      name=$(basename "$b")
      json=$WORK/ab_${name}_h${H}_k${K}_l${L}_r$r.json
      rm -f "$json"
      timeout 150 mpirun -np 1 "$b/ragtrain" bench --device "$DEVICE" "${lstm_opt[@]}" --pool last --hidden "$H" \
        --layers "$L" \
        "${DATA[@]}" --optimizer adam --lr 1e-3 --batch-per-rank "$K" --schedule "${SCHEDULE:-balanced}" \
        --steps "$steps" --warmup "${WARMUP:-300}" --out "$json" >> "$LOG" 2>&1
      echo "$name H=$H K=$K L=$L round $r: rc=$?" | tee -a "$LOG"
    done
  done
done
BUILDS="$BUILDS" CASES="$CASES" ROUNDS="$ROUNDS" python3 - "$WORK" "$OUT/ab.json" <<'PY' 2>&1 | tee "$OUT/ab.txt" | tee -a "$LOG"
import json, os, statistics, sys
work, out_path = sys.argv[1], sys.argv[2]
names = [os.path.basename(b.rstrip("/")) for b in os.environ["BUILDS"].split()]
rounds = int(os.environ["ROUNDS"])
def us(name, h, k, l, r):
    try:
        with open(os.path.join(work, f"ab_{name}_h{h}_k{k}_l{l}_r{r}.json")) as f:
            return json.load(f)["us_per_step"]
    except (OSError, ValueError, KeyError):
        return None
print("# microseconds a step (every round, then the median), builds interleaved round by round on one GPU")
result = {}
for c in os.environ["CASES"].split():
    h, k, l = ([int(v) for v in c.split(":")] + [1])[:3]
    base = None
    for name in names:
        runs = [us(name, h, k, l, r) for r in range(1, rounds + 1)]
        ok = [v for v in runs if v is not None]
        med = statistics.median(ok) if ok else None
        base = med if base is None else base
        cells = " ".join(f"{v:7.1f}" if v is not None else f"{'-':>7}" for v in runs)
        rel = f"  {med / base:6.3f}x of {names[0]}" if med is not None and base else ""
        case = f"H={h} K={k}" + (f" L={l}" if l > 1 else "")
        print(f"  {case:<14} {name:<12} {cells} | median {med if med is None else round(med, 1)}{rel}")
        result.setdefault(f"h{h}_k{k}" + (f"_l{l}" if l > 1 else ""), {})[name] = {"us_per_step": runs, "median": med}
with open(out_path, "w") as f:
    json.dump(result, f, indent=1)
PY
[ "${NCU:-0}" = 1 ] || exit 0
# The fused step's kernels (the bench first runs cuDNN's, which a bare --launch-skip would time instead).
fused_kernels="projection|group_|wide_|pool_head|split_grad|weight_grad|sums|fused_optimizer|recurrence|cluster|gather|input_grad|layer_input"
for c in ${NCU_CASES:-$CASES}; do
  IFS=: read -r H K L <<< "$c"
  L=${L:-1}
  for b in "${builds[@]}"; do
    timeout 120 mpirun -np 1 ncu --clock-control none --cache-control none --print-kernel-base function \
      --kernel-name "regex:${NCU_KERNELS:-$fused_kernels}" \
      --metrics gpu__time_duration.sum --launch-skip 100 --launch-count "${NCU_LAUNCHES:-10}" --csv \
      "$b/ragtrain" bench --device "$DEVICE" "${lstm_opt[@]}" --pool last --hidden "$H" --layers "$L" "${DATA[@]}" --optimizer adam \
      --lr 1e-3 --batch-per-rank "$K" --schedule "${SCHEDULE:-balanced}" --steps 150 --warmup 5 > "$WORK/ncu.csv" 2>/dev/null
    echo "ncu $(basename "$b") H=$H K=$K rc=$?"
    python3 - "$WORK/ncu.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if rows:   # each kernel's launches and mean duration, in the order first seen
    h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value"); u = h.index("Metric Unit")
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
    seen = {}
    for r in rows[1:]:
        seen.setdefault(r[k], []).append(float(r[v].replace(",", "")) * scale.get(r[u], float("nan")))
    for name, d in seen.items():
        print(f"   {name[:28]:<28} {len(d):3d} launches  mean {sum(d) / len(d):9.1f} us")
if len(rows) < 2:
    print("   no launch timed: the filter matched fewer than the 100 skipped launches plus those timed")
PY
  done
done 2>&1 | tee "$OUT/ncu.txt" | tee -a "$LOG"
