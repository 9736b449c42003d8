#!/usr/bin/env bash
# Issue 14, the next device session's second call: the candidates call 1 pointed at — the best v8 builds by
# budget_rank.py, each with the combination of v2b / v3 / v6 that call 1's A/B found fastest (those leave the v8
# builds' recurrence loops byte-identical), or that combination alone. Here first, e.g.:
#   CARRY=.devcarry-call2 BUILDS="w0: c1:v8e-head-unroll1,v2b-speculative-wide,v3-projection-compact \
#     c2:v8a-head-beside-weights,v2b-speculative-wide,v3-projection-compact" RAGTRAIN=all TESTS="c1 c2" \
#     bench/plans/issue14-next/prepare.sh
# then, carrying .devcarry-call2:   CANDS="c1 c2" bash bench/plans/issue14-next/call2.sh
# A/B of w0 and the candidates at H=50 K=1 (3 rounds); the fastest (B, or the one named by B=) then gets the whole GPU
# suite (Fused* then the rest), the A/B against main at H=50 K=128 and H=128 K=1 (the other targets must not get
# slower), and the issue's table (`TORCH=1 bench/run_fused.sh`: cuDNN, fused, PyTorch eager and CUDA graphs side by
# side). ~10 min. Eight files come back: ab1/ab.txt (with its json), the two gpu_tests logs, ab/, table/.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=${C:-.devcarry-call2}
CANDS=${CANDS:?set CANDS to the candidate builds}
for f in "$C"/*/*.xz; do xz -dkf "$f" && chmod +x "${f%.xz}"; done
mkdir -p build-gpu/lib && cp "$C/libnvtx_count.so" build-gpu/lib/ 2>/dev/null
SECONDS=0; mkdir -p "$OUT/ab1"
BUILDS="$C/w0 $(for c in $CANDS; do printf '%s ' "$C/$c"; done)" CASES=50:1 ROUNDS=3 OUT=$OUT/ab1 bench/ab_fused.sh \
  > /dev/null 2>&1
echo "ab1 rc=$? ${SECONDS}s"; cat "$OUT/ab1/ab.txt"
B=${B:-$(CANDS="$CANDS" python3 -c '
import json, os, sys
r = json.load(open(sys.argv[1]))["h50_k1"]
print(min(os.environ["CANDS"].split(), key=lambda c: r[c]["median"]))' "$OUT/ab1/ab.json")}
echo "B=$B"
cat "$OUT/ab1/ab.json" >> "$OUT/ab1/ab.txt"; rm -f "$OUT/ab1/ab.json" "$OUT/ab1/bench.log"
SECONDS=0; timeout 150 "$C/$B/gpu_tests" --gtest_filter='Fused*' > "$OUT/gpu_fused_$B.log" 2>&1; rc=$?
echo "gpu_tests Fused* $B rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|budget.*H=50 K=(1|128) T=96 last" "$OUT/gpu_fused_$B.log" | cut -c1-300 | head -8
SECONDS=0; timeout 200 "$C/$B/gpu_tests" --gtest_filter='-Fused*' > "$OUT/gpu_rest_$B.log" 2>&1; rc2=$?
echo "gpu_tests rest $B rc=$rc2 ${SECONDS}s"; grep -aE "FAILED|PASSED" "$OUT/gpu_rest_$B.log" | head -6
[ $rc = 0 ] && [ $rc2 = 0 ] || exit 1
SECONDS=0; mkdir -p "$OUT/ab"
BUILDS="$C/w0 $C/$B" CASES="50:128 128:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat "$OUT/ab/ab.txt"; rm -f "$OUT/ab/bench.log"
SECONDS=0; mkdir -p "$OUT/table"
BIN=$C/$B TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
echo "run_fused $B rc=$? ${SECONDS}s"; cat "$OUT/table/summary.txt"; rm -f "$OUT/table/results.tgz"
