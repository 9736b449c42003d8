#!/usr/bin/env bash
# Session 14, call 6: w6 = w5 (= f4efe00) + the backward's d-gate factors computed before its matvec (chain after d h: add, FMA, product) + the forward's weights and projection prescaled by -log2(e) (the projection starts the sum) + h as one FMA after the reciprocal; w7 = w6 without the backward change.
# Fused* on w6 (budget lines); A/B w5 / w6 / w7 at K=128 and K=1; w6's SASS.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s14
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 150 $C/w6/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w6.log 2>&1; rc=$?
echo "gpu_tests Fused* w6 rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|Failure|budget.*H=50 K=(1|128) T=96 last" $OUT/gpu_fused_w6.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-300 | head -12
[ $rc = 0 ] || { grep -aB5 -A15 "Failure" $OUT/gpu_fused_w6.log | head -60; }
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w5 $C/w6 $C/w7" CASES="50:128 50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
for w in w6; do
  $CUOBJ -sass $C/$w/ragtrain 2>/dev/null | awk '/Function : .*fused_lstm_kernelILi52/{p=1} p&&/Function : /&&!/fused_lstm_kernelILi52/{p=0} p' > $OUT/sass_$w.txt
done
