#!/usr/bin/env bash
# Issue 14, a short call (~2.5 min) after call-single.sh found v236 (v2b + v3 + v6) 2.4 us a step slower than main:
# which of the three costs it, and what the v8 builds save without them. Carries .devcarry-next (prepare.sh's
# defaults). FusedBudget.WholeStepK1 alone (the whole training step at H=50 K=1, the backend driven as the trainer
# drives it; it ordered call-single's builds as `ragtrain bench` did) for every build, $ROUNDS rounds interleaved,
# twice a process; then the A/B (`ragtrain bench`, the issue's metric) of w0 and the seven builds that leave the
# recurrence alone. Files: steps.log, ab/ab.txt.
#   bash bench/plans/issue14-next/call-isolate.sh
start=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=${C:-.devcarry-next}
for f in "$C"/*/*.xz; do xz -dkf -T0 "$f" && chmod +x "${f%.xz}"; done
BUILDS=${BUILDS:-w0 v2b v3 v6 v23 v236 v37 v2367 v8a v8b v8c v8d v8e v8f v8g v8h v8i v8j v8k}
for r in $(seq 1 "${ROUNDS:-2}"); do
  for b in $BUILDS; do
    timeout 30 "$C/$b/gpu_tests" --gtest_filter=FusedBudget.WholeStepK1 --gtest_repeat=2 2>&1 |
      grep -a "whole training step" | sed "s/^/$b /" >> "$OUT/steps.log"
  done
  echo "round $r done at $(( $(date +%s) - start )) s"
done
python3 - "$OUT/steps.log" <<'PY'
import collections, statistics, sys
runs = collections.OrderedDict()
for line in open(sys.argv[1]):
    runs.setdefault(line.split()[0], []).append(float(line.split(":")[-1].split()[0]))
base = statistics.median(runs["w0"])
print("# FusedBudget.WholeStepK1, us a step (every run, then the median and the difference from w0)")
for b, v in sorted(runs.items(), key=lambda kv: statistics.median(kv[1])):
    m = statistics.median(v)
    print(f"{b:6s} {' '.join(f'{x:6.2f}' for x in v)} | median {m:6.2f}  {m - base:+5.2f}")
PY
SECONDS=0; mkdir -p "$OUT/ab"
BUILDS="$C/w0 $C/v2b $C/v3 $C/v6 $C/v23 $C/v236 $C/v37 $C/v2367" CASES=50:1 ROUNDS=2 OUT=$OUT/ab \
  bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat "$OUT/ab/ab.txt"
cat "$OUT/ab/ab.json" >> "$OUT/ab/ab.txt" 2>/dev/null; rm -f "$OUT/ab/ab.json" "$OUT/ab/bench.log"
echo "done at $(( $(date +%s) - start )) s"
