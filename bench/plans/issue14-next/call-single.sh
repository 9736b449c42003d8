#!/usr/bin/env bash
# Issue 14 in ONE device call (for a session whose machine starts are refused more often than not: the two-call plan
# needs two starts). Carries .devcarry-combo (prepare.sh, README.md "One call"): w0 (main), v236 (v2b + v3 + v6) and
# the eleven v8 builds each with v2b + v3 + v6 on top ("v8a+236" ...; the three leave the v8 loops byte-identical, so
# each combination's loop cycles are its v8 build's too).
#   bash bench/plans/issue14-next/call-single.sh
# 1. FusedBudget of every build (budget.log: the loops' and head's cycles, WholeStepK1's whole step), ranked.
# 2. A/B (`ragtrain bench`, the issue's metric) at H=50 K=1 of w0, v236 and the $TOP combinations with the fastest
#    whole step, $ROUNDS rounds interleaved.
# 3. The fastest of those (B) then gets the fused GPU tests, the issue's table (TORCH=1 bench/run_fused.sh: cuDNN,
#    fused, PyTorch eager and CUDA graphs in one run), the rest of the GPU suite and the A/B against w0 at H=50 K=128
#    and H=128 K=1 — each phase only if the time it needs is left of the call's 600 s (LIMIT), so that what ran comes
#    back with its output. Eight files: budget.log, ab1/ab.txt, gpu_fused_B.log, table/{bench.log,summary.txt,
#    summary.json}, gpu_rest_B.log, ab/ab.txt.
start=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=${C:-.devcarry-combo}
here=$(dirname "$0")
LIMIT=${LIMIT:-585}
TOP=${TOP:-3}
elapsed() { echo $(( $(date +%s) - start )); }
fits() {   # fits SECONDS PHASE: is there time for the phase?
  local left=$(( LIMIT - $(elapsed) ))
  [ "$left" -ge "$1" ] && return 0
  echo "SKIPPED $2: ${left}s left, it needs ~$1s"; return 1
}
for f in "$C"/*/*.xz; do xz -dkf -T0 "$f" && chmod +x "${f%.xz}"; done
mkdir -p build-gpu/lib && cp "$C/libnvtx_count.so" build-gpu/lib/ 2>/dev/null
builds=$(cd "$C" && for d in */; do printf '%s ' "${d%/}"; done)
echo "builds: $builds (unpacked at $(elapsed) s)"
for b in $builds; do
  fits 200 "the rest of FusedBudget" || break
  SECONDS=0; echo "== $b" >> "$OUT/budget.log"
  timeout 60 "$C/$b/gpu_tests" --gtest_filter='FusedBudget*' >> "$OUT/budget.log" 2>&1
  echo "$b FusedBudget rc=$? ${SECONDS}s"
done
python3 "$here/budget_rank.py" "$OUT/budget.log" w0
top=$(TOP=$TOP python3 - "$here" "$OUT/budget.log" <<'PY'
import math, os, sys
sys.path.insert(0, sys.argv[1])
from budget_rank import read
b = read(sys.argv[2])
combos = [n for n in b if n not in ("w0", "v236")]
loops = lambda v: v["fwd"] + v["head"] + v["bwd"]
key = lambda n: b[n].get("step", math.inf) if all("step" in b[m] for m in combos) else loops(b[n])
print(" ".join(sorted(combos, key=key)[: int(os.environ["TOP"])]))
PY
)
echo "budget done at $(elapsed) s; A/B: w0 v236 $top"
fits 90 "the A/B at K=1" || exit 1
SECONDS=0; mkdir -p "$OUT/ab1"
BUILDS="$C/w0 $C/v236 $(for c in $top; do printf '%s ' "$C/$c"; done)" CASES=50:1 ROUNDS=${ROUNDS:-2} OUT=$OUT/ab1 \
  bench/ab_fused.sh > /dev/null 2>&1
echo "ab1 rc=$? ${SECONDS}s"; cat "$OUT/ab1/ab.txt"
B=${B:-$(CANDS="v236 $top" python3 -c '
import json, os, sys
r = json.load(open(sys.argv[1]))["h50_k1"]
c = [n for n in os.environ["CANDS"].split() if r.get(n, {}).get("median")]
print(min(c, key=lambda n: r[n]["median"]) if c else "")' "$OUT/ab1/ab.json")}
cat "$OUT/ab1/ab.json" >> "$OUT/ab1/ab.txt"; rm -f "$OUT/ab1/ab.json" "$OUT/ab1/bench.log"
[ -n "$B" ] || { echo "no candidate ran"; exit 1; }
echo "B=$B at $(elapsed) s"
fits 70 "Fused* on $B" || exit 1
SECONDS=0; timeout 120 "$C/$B/gpu_tests" --gtest_filter='Fused*' > "$OUT/gpu_fused_${B//+/_}.log" 2>&1; rc=$?
echo "gpu_tests Fused* $B rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|budget.*H=50 K=(1|128) T=96 last" "$OUT/gpu_fused_${B//+/_}.log" | cut -c1-300 | head -8
[ $rc = 0 ] || exit 1
if fits 170 "the issue's table"; then
  SECONDS=0; mkdir -p "$OUT/table"
  BIN=$C/$B TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
  echo "run_fused $B rc=$? ${SECONDS}s"; cat "$OUT/table/summary.txt"; rm -f "$OUT/table/results.tgz"
fi
if fits 75 "the rest of the GPU suite on $B"; then
  SECONDS=0; timeout $(( LIMIT - $(elapsed) - 5 )) "$C/$B/gpu_tests" --gtest_filter='-Fused*' > "$OUT/gpu_rest_${B//+/_}.log" 2>&1
  echo "gpu_tests rest $B rc=$? ${SECONDS}s"; grep -aE "FAILED|PASSED" "$OUT/gpu_rest_${B//+/_}.log" | head -6
fi
if fits 60 "the A/B at H=50 K=128 and H=128 K=1"; then
  SECONDS=0; mkdir -p "$OUT/ab"
  BUILDS="$C/w0 $C/$B" CASES="50:128 128:1" ROUNDS=2 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
  echo "ab rc=$? ${SECONDS}s"; cat "$OUT/ab/ab.txt"
  cat "$OUT/ab/ab.json" >> "$OUT/ab/ab.txt" 2>/dev/null; rm -f "$OUT/ab/ab.json" "$OUT/ab/bench.log"
fi
echo "done at $(elapsed) s"
