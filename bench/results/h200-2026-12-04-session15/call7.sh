#!/usr/bin/env bash
# Session 15, call 7: w7 = 92b8e71 (w6 + the K=1 chain: projection -> recurrence and GEMM -> optimizer by epoch-tagged
# flags instead of the grids' ends). The whole GPU suite on w7; A/B w6/w7 at H=50 K=1, 128.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s15
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 150 $C/w7/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w7.log 2>&1; rc=$?
echo "gpu_tests Fused* w7 rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|Failure|budget.*H=50 K=(1|128) T=96 last" $OUT/gpu_fused_w7.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-330 | head -12
[ $rc = 0 ] || { grep -aB5 -A15 "Failure" $OUT/gpu_fused_w7.log | head -60; }
SECONDS=0; timeout 200 $C/w7/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_w7.log 2>&1; rc=$?
echo "gpu_tests rest w7 rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|Failure" $OUT/gpu_rest_w7.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-300 | head -12
[ $rc = 0 ] || { grep -aB5 -A15 "Failure" $OUT/gpu_rest_w7.log | head -60; }
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w6 $C/w7" CASES="50:1 50:128" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
