#!/usr/bin/env bash
# Session 14, call 2: w2 = main + the recurrences' matvecs split over lanes (forward: a quad's lanes hold column
# slices of the unit's four gate rows; backward: an octet's lanes hold halves of two units' columns), fewer
# shared-memory loads a step. Fused* on w2 (with the budget lines), then A/B w0 / w2 at K=128 and K=1.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s14
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 150 $C/w2/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w2.log 2>&1; rc=$?
echo "gpu_tests Fused* w2 rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|Failure|budget" $OUT/gpu_fused_w2.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-300 | head -30
[ $rc = 0 ] || { grep -aB5 -A15 "Failure" $OUT/gpu_fused_w2.log | head -80; exit 1; }
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w0 $C/w2" CASES="50:128 50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
