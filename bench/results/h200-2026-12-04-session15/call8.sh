#!/usr/bin/env bash
# Session 15, call 8 (final): w8 = this session's main after the reverts (its src identical to w5 = 97f0d2e: the
# backward over 16-lane groups, the GEMM's 8-step last chunk, the head in one warp, W_hh staged through shared
# memory, the optimizer's publishing warp). Fused* on w8 (the rest passed on w5's identical source in call 4); the
# issue's table (TORCH=1 bench/run_fused.sh), every column of a row in one run.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s15
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 150 $C/w8/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w8.log 2>&1; rc=$?
echo "gpu_tests Fused* w8 rc=$rc ${SECONDS}s"; grep -aE "FAILED|PASSED|budget.*H=(50|128) K=(1|128) T=96 last" $OUT/gpu_fused_w8.log | cut -c1-330 | head -10
[ $rc = 0 ] || exit 1
SECONDS=0; mkdir -p $OUT/table
BIN=$C/w8 TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
echo "run_fused w8 rc=$? ${SECONDS}s"; cat $OUT/table/summary.txt; rm -f $OUT/table/results.tgz
