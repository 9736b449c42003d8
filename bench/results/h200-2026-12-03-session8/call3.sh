#!/usr/bin/env bash
# Session 8, call 3: w18 = progress published once per 4-step group, streaming only for the one-block kernel at
# K <= 16, optimizer loads up front (cluster only up to 32 K parameters), 128 weight-gradient groups. Whole GPU
# suite (budget test included), then the issue-14 bench beside the build before this session.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s8
mkdir -p build-gpu/lib && cp $C/w13/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 120 mpirun -np 1 $C/w18/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused.log 2>&1; echo "gpu_tests Fused* rc=$? ${SECONDS}s"
grep -aE "PASSED|FAILED|tests ran" $OUT/gpu_fused.log | sed 's/\x1b\[[0-9;]*m//g' | head -12
grep -a "budget" $OUT/gpu_fused.log | sed 's/\x1b\[[0-9;]*m//g; s/(block 0: staging W_hh [0-9]*, //; s/total [0-9]* cycles = //'
SECONDS=0; timeout 150 mpirun -np 1 $C/w18/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest.log 2>&1; echo "gpu_tests rest rc=$? ${SECONDS}s"
grep -aE "PASSED|FAILED|tests ran" $OUT/gpu_rest.log | sed 's/\x1b\[[0-9;]*m//g' | head -12
for b in w18 old; do
  SECONDS=0
  BIN=$C/$b TORCH=0 OUT=/tmp/out_$b WORK=/tmp/w_$b timeout 170 bash bench/run_fused.sh > /dev/null 2>&1
  echo "bench $b rc=$? ${SECONDS}s"; cat /tmp/out_$b/summary.txt
  cp /tmp/out_$b/bench.log $OUT/bench_$b.log
done
