#!/usr/bin/env bash
# Session 13, call 9: w6 = w5 (main 3f9b...) + the optimizer loading parameters and moments before its wait for the
# step's gradients. The whole GPU suite on w6; A/B w5 / w6; if w6 is faster at K=128, the table on w6.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s13
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 150 $C/w6/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w6.log 2>&1; rc=$?
echo "gpu_tests Fused* w6 rc=$rc ${SECONDS}s"; grep -aE "FAILED|PASSED" $OUT/gpu_fused_w6.log | head -5
[ $rc = 0 ] || exit 1
SECONDS=0; timeout 200 $C/w6/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_w6.log 2>&1; rc=$?
echo "gpu_tests rest w6 rc=$rc ${SECONDS}s"; grep -aE "FAILED|PASSED" $OUT/gpu_rest_w6.log | head -5
[ $rc = 0 ] || exit 1
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w5 $C/w6" CASES="50:128 50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
better=$(python3 -c "import json; d=json.load(open('$OUT/ab/ab.json'))['h50_k128']; print(int(d['w6']['median'] < d['w5']['median'] - 0.3))")
echo "w6 faster at K=128: $better"
if [ "$better" = 1 ]; then
  SECONDS=0; mkdir -p $OUT/table
  BIN=$C/w6 TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
  echo "run_fused w6 rc=$? ${SECONDS}s"; cat $OUT/table/summary.txt; rm -f $OUT/table/results.tgz
fi
