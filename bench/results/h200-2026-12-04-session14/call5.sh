#!/usr/bin/env bash
# Session 14, call 5: w4 = w3 + the exchanges without selects (weights in lane-relative order), tanh's factor 2 folded
# into its -log2(e) product, the forward's stores through running pointers and the pooling after the h store, the
# backward's ring refilled after the barrier; w5 = w4 with the backward's ring refilled mid-step as in w3.
# Fused* on w4 (budget lines); A/B w3 / w4 / w5 at K=128 and K=1; w4's SASS of the H=50 kernel.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s14
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 150 $C/w4/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w4.log 2>&1; rc=$?
echo "gpu_tests Fused* w4 rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|Failure|budget.*H=50 K=(1|128) T=96 last" $OUT/gpu_fused_w4.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-300 | head -12
[ $rc = 0 ] || { grep -aB5 -A15 "Failure" $OUT/gpu_fused_w4.log | head -60; }
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w3 $C/w4 $C/w5" CASES="50:128 50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
for w in w4 w5; do
  $CUOBJ -sass $C/$w/ragtrain 2>/dev/null | awk '/Function : .*fused_lstm_kernelILi52/{p=1} p&&/Function : /&&!/fused_lstm_kernelILi52/{p=0} p' > $OUT/sass_$w.txt
done
