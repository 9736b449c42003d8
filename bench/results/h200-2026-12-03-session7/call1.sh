#!/usr/bin/env bash
# Session 7 lead's call: the merged tree's whole GPU suite, the fused tests of the store-order patch, and the
# issue-14 cases for both builds (ragtrain only; the PyTorch anchors ran beside the same kernel in fused7's call 4).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s7
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
ldd $C/main/ragtrain $C/main/gpu_tests | grep 'not found'
mkdir -p build-gpu/lib && cp $C/main/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 260 mpirun -np 1 $C/main/gpu_tests > $OUT/gpu_main.log 2>&1; echo "gpu_tests main rc=$? ${SECONDS}s"
grep -aE "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $OUT/gpu_main.log | head -20
SECONDS=0; timeout 120 mpirun -np 1 $C/p/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_patch.log 2>&1; echo "gpu_tests patch rc=$? ${SECONDS}s"
grep -aE "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $OUT/gpu_patch.log | head -20
for b in main p; do
  SECONDS=0
  BIN=$C/$b TORCH=0 OUT=/tmp/out_$b WORK=/tmp/w_$b timeout 150 bash bench/run_fused.sh > /dev/null 2>&1
  echo "bench $b rc=$? ${SECONDS}s"; cat /tmp/out_$b/summary.txt
  cp /tmp/out_$b/summary.json $OUT/summary_$b.json; cp /tmp/out_$b/bench.log $OUT/bench_$b.log
done
