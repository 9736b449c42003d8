#!/usr/bin/env bash
# Issue 14, session 18's last call: the step's start, after session 18's d1 showed its once-run phases are latency and
# issue chains. Carries .devcarry-s18 (prepare.sh with BUILDS="w0: p1:p1-w-ih-bulk16 p2:p2-fc-async p12:p12-combined
# d2:d2-diag-prologue p12d2:p12d2-combined" RAGTRAIN="w0 p1 p2 p12" TESTS=all):
#   p1: the projection stages W_ih as 16-byte cp.async copies (recurrence kernel byte-identical to main's);
#   p2: the recurrence's prologue copies the head's parameters by cp.async instead of loads and stores;
#   p12: both; d2 / p12d2: main / p12 with cycle marks inside the recurrence's prologue and the projection's body.
# 1. FusedBudget.WholeStepK1 of w0, p1, p2, p12 (2 rounds, 2 runs a process), 2. FusedBudget of d2 and p12d2 (the
# [ diag2 ] lines), 3. the fastest of p1 / p2 / p12: Fused*, then (if it is 1.3 us faster than w0 or more) the issue's
# table and the rest of the GPU suite, each phase only if LIMIT (s) leaves it time.
#   LIMIT=240 bash bench/plans/issue14-next/call-p.sh
start=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=${C:-.devcarry-s18}
LIMIT=${LIMIT:-240}
left() { echo $(( LIMIT - $(date +%s) + start )); }
for f in "$C"/*/*.xz; do xz -dkf -T0 "$f" && chmod +x "${f%.xz}"; done
mkdir -p build-gpu/lib && cp "$C/libnvtx_count.so" build-gpu/lib/ 2>/dev/null
for r in 1 2; do
  for b in w0 p1 p2 p12; do
    timeout 30 "$C/$b/gpu_tests" --gtest_filter=FusedBudget.WholeStepK1 --gtest_repeat=2 2>&1 |
      grep -a "whole training step" | sed "s/^/$b /" >> "$OUT/steps.log"
  done
done
B=$(python3 - "$OUT/steps.log" <<'PY'
import collections, statistics, sys
runs = collections.OrderedDict()
for line in open(sys.argv[1]):
    runs.setdefault(line.split()[0], []).append(float(line.split(":")[-1].split()[0]))
base = statistics.median(runs["w0"])
for b, v in runs.items():
    print(f"{b:5s} {' '.join(f'{x:6.2f}' for x in v)} | median {statistics.median(v):6.2f} "
          f"{statistics.median(v) - base:+5.2f}", file=sys.stderr)
best = min((b for b in runs if b != "w0"), key=lambda b: statistics.median(runs[b]))
print(best, f"{statistics.median(runs[best]) - base:.2f}")
PY
)
echo "steps done at $(( $(date +%s) - start )) s; fastest: $B"
for b in d2 p12d2; do
  echo "== $b" >> "$OUT/diag.log"
  timeout 40 "$C/$b/gpu_tests" --gtest_filter='FusedBudget.CyclesPerTimestep' >> "$OUT/diag.log" 2>&1
done
grep -a "== \|diag2\|H=50 K=1 T=96 last" "$OUT/diag.log" | cut -c1-330 | head -12
set -- $B; B=$1 gain=$2
[ "$(left)" -ge 55 ] || { echo "no time for Fused* ($(left) s left)"; exit 0; }
SECONDS=0; timeout 60 "$C/$B/gpu_tests" --gtest_filter='Fused*' > "$OUT/gpu_fused_$B.log" 2>&1; rc=$?
echo "gpu_tests Fused* $B rc=$rc ${SECONDS}s"; grep -aE "FAILED|PASSED" "$OUT/gpu_fused_$B.log" | head -6
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= -1.3 else 1)" "$gain" || { echo "gain $gain us: no table"; exit 0; }
[ $rc = 0 ] && [ "$(left)" -ge 95 ] || { echo "no table ($(left) s left)"; exit 0; }
SECONDS=0; mkdir -p "$OUT/table"
BIN=$C/$B TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
echo "run_fused $B rc=$? ${SECONDS}s"; cat "$OUT/table/summary.txt"; rm -f "$OUT/table/results.tgz"
[ "$(left)" -ge 60 ] || { echo "no time for the rest of the suite"; exit 0; }
SECONDS=0; timeout $(( $(left) - 3 )) "$C/$B/gpu_tests" --gtest_filter='-Fused*' > "$OUT/gpu_rest_$B.log" 2>&1
echo "gpu_tests rest $B rc=$? ${SECONDS}s"; grep -aE "FAILED|PASSED" "$OUT/gpu_rest_$B.log" | head -6
