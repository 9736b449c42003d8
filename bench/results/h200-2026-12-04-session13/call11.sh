#!/usr/bin/env bash
# Session 13, call 11: w8 = main (ed2e2a1) + W_hh staged whole through shared memory in the one-block prologue (rows
# and columns read there); w9 = w8 + the projection's inputs split into tf32 parts once, as they are staged. Fused* on
# w9; A/B w6 (the table's build) / w8 / w9; on the fastest at K=128 (if not w6): the rest of the suite (and Fused* if
# w8) and the table.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s13
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 150 $C/w9/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w9.log 2>&1; rc=$?
echo "gpu_tests Fused* w9 rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|Failure|budget.*H=50 K=(1|128) T=96 last" $OUT/gpu_fused_w9.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-260 | head -8
[ $rc = 0 ] || exit 1
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w6 $C/w8 $C/w9" CASES="50:128 50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
F=$(python3 -c "
import json; d=json.load(open('$OUT/ab/ab.json'))['h50_k128']
m={b: d[b]['median'] for b in ('w6','w8','w9')}
best=min(m, key=m.get); print(best if m[best] < m['w6'] - 0.3 else 'w6')")
echo "fastest at K=128: $F"
[ $F = w6 ] && exit 0
SECONDS=0; timeout 200 $C/$F/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_$F.log 2>&1
echo "gpu_tests rest $F rc=$? ${SECONDS}s"; grep -aE "FAILED|PASSED" $OUT/gpu_rest_$F.log | head -3
if [ $F = w8 ]; then SECONDS=0; timeout 150 $C/w8/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w8.log 2>&1; echo "Fused* w8 rc=$? ${SECONDS}s"; grep -aE "PASSED|FAILED" $OUT/gpu_fused_w8.log | head -3; fi
SECONDS=0; mkdir -p $OUT/table
BIN=$C/$F TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
echo "run_fused $F rc=$? ${SECONDS}s"; cat $OUT/table/summary.txt; rm -f $OUT/table/results.tgz
