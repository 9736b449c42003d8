#!/usr/bin/env bash
# Session 14, call 9: the new test FusedAgreement.ClassificationRegistersH55 (H = 55 padded to 56: the forward's
# float2 column tail, the backward's padded last half block, an octet with a unit past H) on w8's device code.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s14
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 120 $C/w8/gpu_tests --gtest_filter='FusedAgreement.*' > $OUT/gpu_agreement_w8.log 2>&1; rc=$?
echo "gpu_tests FusedAgreement.* rc=$rc ${SECONDS}s"; grep -aE "^\[ *(OK|FAILED|PASSED) |Failure" $OUT/gpu_agreement_w8.log | head -20
