#!/usr/bin/env bash
# Session 15, call 1: w0 = 624bac6 (session 14's HEAD), w1 = 99d43bb (backward matvec over 16-lane groups of four
# units: 4 shared-memory loads a step instead of 7), w2 = c9248f9 (+ streaming GEMM: last chunk 8 steps, old values
# of the fused buffer loaded before the chunks). Fused* on w2 (correctness + budget lines); A/B w0/w1/w2 at K=1, 128.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s15
SECONDS=0; timeout 150 $C/w2/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w2.log 2>&1; rc=$?
echo "gpu_tests Fused* w2 rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|Failure|budget.*H=50 K=(1|128) T=96 last" $OUT/gpu_fused_w2.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-300 | head -14
[ $rc = 0 ] || { grep -aB5 -A15 "Failure" $OUT/gpu_fused_w2.log | head -60; }
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w0 $C/w1 $C/w2" CASES="50:1 50:128" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
$CUOBJ -sass $C/w2/ragtrain 2>/dev/null | awk '/Function : .*fused_lstm_kernelILi52/{p=1} p&&/Function : /&&!/fused_lstm_kernelILi52/{p=0} p' | gzip > $OUT/sass_w2.txt.gz
