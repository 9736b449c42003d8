#!/usr/bin/env bash
# Session 14, call 4: w3 = w2 + the rings of values loaded 4 steps ahead filled by predicated loads into their own
# registers (load_if), against the moves that waited for those loads (call 3's stall samples). Fused* on w3 (budget
# lines); A/B w0 / w2 / w3 at K=128 and K=1; the SASS of the H=50 one-block kernel of w2 and w3.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s14
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 150 $C/w3/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w3.log 2>&1; rc=$?
echo "gpu_tests Fused* w3 rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|Failure|budget.*H=50 K=(1|128) T=96 last" $OUT/gpu_fused_w3.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-300 | head -12
[ $rc = 0 ] || { grep -aB5 -A15 "Failure" $OUT/gpu_fused_w3.log | head -60; }
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w0 $C/w2 $C/w3" CASES="50:128 50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
for w in w2 w3; do
  $CUOBJ -sass $C/$w/ragtrain 2>/dev/null | awk '/Function : .*fused_lstm_kernelILi52/{p=1} p&&/Function : /&&!/fused_lstm_kernelILi52/{p=0} p' > $OUT/sass_$w.txt
  echo "$w sass lines $(wc -l < $OUT/sass_$w.txt)"
done
