#!/usr/bin/env bash
# Session 14, call 10: w9 = w8 (+ the H55 test) + the head's weight loops instantiated for the staged shared-memory
# copy (no generic loads; same arithmetic and order). Fused* on w9 (budget lines); A/B w8 / w9; if w9 is faster at
# K=1 (by > 0.3 us) and not slower at K=128: the rest of the suite and the table on w9.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s14
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 120 $C/w9/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w9.log 2>&1; rc=$?
echo "gpu_tests Fused* w9 rc=$rc ${SECONDS}s"; grep -aE "FAILED|PASSED|budget.*H=50 K=(1|128) T=96 last pool: p" $OUT/gpu_fused_w9.log | cut -c1-300 | head -6
[ $rc = 0 ] || exit 1
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w8 $C/w9" CASES="50:128 50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
better=$(python3 -c "
import json; d=json.load(open('$OUT/ab/ab.json'))
k1=d['h50_k1']; k128=d['h50_k128']
print(int(k1['w9']['median'] < k1['w8']['median'] - 0.3 and k128['w9']['median'] <= k128['w8']['median'] + 0.2))")
echo "w9 better: $better"
[ "$better" = 1 ] || exit 0
SECONDS=0; timeout 100 $C/w9/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_w9.log 2>&1; rc=$?
echo "gpu_tests rest w9 rc=$rc ${SECONDS}s"; grep -aE "FAILED|PASSED" $OUT/gpu_rest_w9.log | head -3
[ $rc = 0 ] || exit 1
SECONDS=0; mkdir -p $OUT/table
BIN=$C/w9 TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
echo "run_fused w9 rc=$? ${SECONDS}s"; cat $OUT/table/summary.txt; rm -f $OUT/table/results.tgz $OUT/table/summary.json
