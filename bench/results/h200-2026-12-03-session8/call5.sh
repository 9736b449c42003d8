#!/usr/bin/env bash
# Session 8, call 5: w20 = w19 + the optimizer as one cluster of 16 blocks up to 98 K parameters.
# Fused* tests (budget included), the rest of the GPU suite, then the bench beside w19.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s8
mkdir -p build-gpu/lib && cp $C/w13/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 120 mpirun -np 1 $C/w20/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused.log 2>&1; echo "gpu_tests Fused* rc=$? ${SECONDS}s"
grep -aE "PASSED|FAILED|tests ran" $OUT/gpu_fused.log | sed 's/\x1b\[[0-9;]*m//g' | head -12
grep -a "whole run" $OUT/gpu_fused.log | sed "s/\x1b\[[0-9;]*m//g"
SECONDS=0; timeout 150 mpirun -np 1 $C/w20/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest.log 2>&1; echo "gpu_tests rest rc=$? ${SECONDS}s"
grep -aE "PASSED|FAILED|tests ran" $OUT/gpu_rest.log | sed 's/\x1b\[[0-9;]*m//g' | head -12
for b in w20 w19; do
  SECONDS=0
  BIN=$C/$b TORCH=0 OUT=/tmp/out_$b WORK=/tmp/w_$b timeout 170 bash bench/run_fused.sh > /dev/null 2>&1
  echo "bench $b rc=$? ${SECONDS}s"; cat /tmp/out_$b/summary.txt
  cp /tmp/out_$b/bench.log $OUT/bench_$b.log
done
