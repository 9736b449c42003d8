#!/usr/bin/env bash
# Session 13, call 10: w7 = main after the review (three device slot tables instead of two; host code only): Fused*.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s13
SECONDS=0; timeout 150 $C/w7/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w7.log 2>&1; rc=$?
echo "gpu_tests Fused* w7 rc=$rc ${SECONDS}s"; grep -aE "FAILED|PASSED|FusedAhead" $OUT/gpu_fused_w7.log | head -6
