#!/usr/bin/env bash
# Session 13, call 8: w5 = w3 (main 25cbab2) + the one-block recurrence's W_hh rows staged through shared memory by
# coalesced warp copies (its prologue sits on the K=128 critical path). Fused* on w5; A/B w3 / w5; then the final
# build's whole suite and the table (TORCH=1 bench/run_fused.sh).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s13
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 150 $C/w5/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w5.log 2>&1; rc5=$?
echo "gpu_tests Fused* w5 rc=$rc5 ${SECONDS}s"
grep -aE "FAILED|tests ran|PASSED|Failure|budget.*H=50 K=(1|128) T=96 last" $OUT/gpu_fused_w5.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-300 | head -12
F=w3
if [ $rc5 = 0 ]; then
  SECONDS=0; mkdir -p $OUT/ab
  BUILDS="$C/w3 $C/w5" CASES="50:128 50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
  echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
  F=$(python3 -c "import json; d=json.load(open('$OUT/ab/ab.json'))['h50_k128']; print('w5' if d['w5']['median'] < d['w3']['median'] - 0.3 else 'w3')")
fi
echo "final build: $F"
SECONDS=0; timeout 200 $C/$F/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_$F.log 2>&1
echo "gpu_tests rest $F rc=$? ${SECONDS}s"; grep -aE "FAILED|PASSED" $OUT/gpu_rest_$F.log | head -5
if [ $F = w3 ]; then SECONDS=0; timeout 150 $C/w3/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w3.log 2>&1; echo "Fused* w3 rc=$? ${SECONDS}s"; grep -aE "PASSED|FAILED" $OUT/gpu_fused_w3.log | head -3; fi
SECONDS=0; mkdir -p $OUT/table
BIN=$C/$F TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
echo "run_fused $F rc=$? ${SECONDS}s"; cat $OUT/table/summary.txt; rm -f $OUT/table/results.tgz
