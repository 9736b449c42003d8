#!/usr/bin/env bash
# Issue 14, the call session 19 wrote (README.md beside this file): the recurrence loops' instructions between the
# barrier and the step's loads, and beside the chain; the projection's W_ih staging as 16-byte loads. Carries
# .devcarry-s19, built here (~22 min, ~44 MB; ~65.5 MB with the ~21.6 MB tree, inside the 64 MiB that travel) by
#   make BUILD=build-gpu PORTABLE=1 build-gpu/bin/ragtrain build-gpu/bin/gpu_tests
#   CXX="ccache g++" bash bench/plans/issue14-s19/prepare-s19.sh      (its header lists the builds and their patches)
# then checked here (OUT=/tmp/o DEVICE=cpu LSTM= STEPS=3 bash bench/plans/issue14-s19/call-s19.sh) and what that
# unpacked deleted again (find .devcarry-s19 -type f ! -name '*.xz' ! -name '*.so' ! -name '*.log' -delete).
# 1. FusedBudget.WholeStepK1 of every build (2 rounds, 2 runs a process); 2. FusedBudget.CyclesPerTimestep of every
# build (budget.log, ranked by budget_rank.py: the loops' and the head's cycles); 3. the A/B (`ragtrain bench`, the
# issue's metric) at H=50 K=1 of w0 and the four builds with a ragtrain that WholeStepK1 ranks first; 4. Fused* on the
# A/B's builds, fastest first, until one passes; 5. if that one gains 1.3 us or more: the issue's table, the rest of
# the GPU suite, the A/B at K=128 and H=128 against w0. Each phase only if LIMIT (s) leaves it time.
#   LIMIT=540 bash bench/plans/issue14-s19/call-s19.sh
start=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=${C:-.devcarry-s19}
LIMIT=${LIMIT:-540}
BUILDS=${BUILDS:-w0 v9 v9a v9b v9bc v9bd v9bde v9bdeh p3 v9bdep3 v10 v10L v10u1 v10Lu1 v10F v10LF v9bdeF v10LFp3 v9bdeFp3 v10LFp34 v9bdeFp34}
left() { echo $(( LIMIT - $(date +%s) + start )); }
for f in "$C"/*/*.xz; do xz -dkf -T0 "$f" && chmod +x "${f%.xz}"; done
mkdir -p build-gpu/lib && cp "$C/libnvtx_count.so" build-gpu/lib/ 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
for r in 1 2; do
  for b in $BUILDS; do
    timeout 30 "$C/$b/gpu_tests" --gtest_filter=FusedBudget.WholeStepK1 --gtest_repeat=2 2>&1 |
      grep -a "whole training step" | sed "s/^/$b /" >> "$OUT/steps.log"
  done
done
rank() {   # builds by their median in steps.log; prints "fastest gain" (gain against w0, us)
  python3 - "$OUT/steps.log" <<'PY'
import collections, statistics, sys
runs = collections.OrderedDict()
for line in open(sys.argv[1]):
    runs.setdefault(line.split()[0], []).append(float(line.split(":")[-1].split()[0]))
base = statistics.median(runs["w0"])
for b, v in sorted(runs.items(), key=lambda kv: statistics.median(kv[1])):
    print(f"{b:7s} {' '.join(f'{x:6.2f}' for x in v)} | median {statistics.median(v):6.2f} "
          f"{statistics.median(v) - base:+5.2f}", file=sys.stderr)
cands = [b for b in runs if b != "w0"]
best = min(cands, key=lambda b: statistics.median(runs[b]))
print(best, f"{statistics.median(runs[best]) - base:.2f}")
PY
}
B=$(rank)
echo "steps done at $(( $(date +%s) - start )) s; fastest: $B"
for b in $BUILDS; do
  [ "$(left)" -ge 200 ] || { echo "no time for $b's budget"; break; }
  echo "== $b" >> "$OUT/budget.log"
  timeout 40 "$C/$b/gpu_tests" --gtest_filter='FusedBudget.CyclesPerTimestep' >> "$OUT/budget.log" 2>&1
done
python3 bench/plans/issue14-next/budget_rank.py "$OUT/budget.log" w0 2>&1 | head -30
echo "budget done at $(( $(date +%s) - start )) s"
[ "$(left)" -ge 90 ] || { echo "no time for the A/B ($(left) s left)"; exit 0; }
# The A/B of w0 and the four builds with a ragtrain that WholeStepK1 ranks first (it ordered session 18's builds as
# the A/B did, within ~0.1 us).
R="$C/w0 "$(python3 - "$OUT/steps.log" "$C" <<'PY'
import collections, os, statistics, sys
runs = collections.OrderedDict()
for line in open(sys.argv[1]):
    runs.setdefault(line.split()[0], []).append(float(line.split(":")[-1].split()[0]))
ok = [b for b in runs if b != "w0" and os.path.exists(os.path.join(sys.argv[2], b, "ragtrain"))]
print(" ".join(os.path.join(sys.argv[2], b) for b in sorted(ok, key=lambda b: statistics.median(runs[b]))[:4]))
PY
)
echo "A/B builds: $R"
SECONDS=0; mkdir -p "$OUT/ab"
BUILDS="$R" CASES=50:1 ROUNDS=2 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat "$OUT/ab/ab.txt"; rm -f "$OUT/ab/bench.log"
[ -s "$OUT/ab/ab.json" ] || { echo "no ab.json"; exit 0; }
# The A/B's builds, fastest first, each with its gain against w0 (us); Fused* on them in that order until one passes
# (a build that is fast because it is wrong must not take the table).
ORDER=$(python3 - "$OUT/ab/ab.json" <<'PY'
import json, sys
med = {n: v["median"] for n, v in json.load(open(sys.argv[1]))["h50_k1"].items() if v["median"]}
print(" ".join(f"{b}:{med[b] - med['w0']:.2f}" for b in sorted((b for b in med if b != "w0"), key=med.get)))
PY
)
echo "A/B order: $ORDER"
AB="" gain="" rc=1
for bg in $ORDER; do
  b=${bg%%:*} g=${bg##*:}
  [ "$(left)" -ge 60 ] || break
  SECONDS=0; timeout 70 "$C/$b/gpu_tests" --gtest_filter='Fused*' > "$OUT/gpu_fused_$b.log" 2>&1; rc=$?
  echo "gpu_tests Fused* $b rc=$rc ${SECONDS}s"; grep -aE "FAILED|PASSED" "$OUT/gpu_fused_$b.log" | head -6
  if [ $rc = 0 ]; then AB=$b gain=$g; break; fi
done
[ -n "$AB" ] || { echo "no A/B build passed Fused*"; exit 0; }
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= -1.3 else 1)" "$gain" || { echo "$AB: gain $gain us: no table"; exit 0; }
[ $rc = 0 ] && [ "$(left)" -ge 100 ] || { echo "no table ($(left) s left)"; exit 0; }
SECONDS=0; mkdir -p "$OUT/table"
BIN=$C/$AB TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
echo "run_fused $AB rc=$? ${SECONDS}s"; cat "$OUT/table/summary.txt"; rm -f "$OUT/table/results.tgz"
[ "$(left)" -ge 60 ] || { echo "no time for the rest of the suite"; exit 0; }
SECONDS=0; timeout $(( $(left) - 50 )) "$C/$AB/gpu_tests" --gtest_filter='-Fused*' > "$OUT/gpu_rest_$AB.log" 2>&1
echo "gpu_tests rest $AB rc=$? ${SECONDS}s"; grep -aE "FAILED|PASSED" "$OUT/gpu_rest_$AB.log" | head -6
[ "$(left)" -ge 40 ] || exit 0
SECONDS=0; mkdir -p "$OUT/ab2"
BUILDS="$C/w0 $C/$AB" CASES="50:128 128:1" ROUNDS=1 OUT=$OUT/ab2 bench/ab_fused.sh > /dev/null 2>&1
echo "ab2 rc=$? ${SECONDS}s"; cat "$OUT/ab2/ab.txt"; rm -f "$OUT/ab2/bench.log"
echo "done at $(( $(date +%s) - start )) s"
