#!/usr/bin/env bash
# Session 9, call 5: w3b = w3 with the first steps projection from registers (one block: W_ih via shared memory); w5 = w3b + one-block W_hh via shared memory. w5: Fused* tests; w3b: budget; bench w21, w3b, w5.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s9
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 120 mpirun -np 1 $C/w5/gpu_tests --gtest_filter="Fused*" > $OUT/gpu_fused_w5.log 2>&1
echo "gpu_tests Fused* w5 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|budget|Failure" $OUT/gpu_fused_w5.log | sed 's/\x1b\[[0-9;]*m//g' | grep -v "K=128 T=96 m\|H=96" | head -30
SECONDS=0; timeout 60 mpirun -np 1 $C/w3b/gpu_tests --gtest_filter='FusedBudget*' > $OUT/gpu_budget_w3b.log 2>&1
echo "gpu_tests budget w3b rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|budget|Failure" $OUT/gpu_budget_w3b.log | sed 's/\x1b\[[0-9;]*m//g' | grep -v "K=128 T=96 m\|H=96\|mean pool\|max pool" | head -30
for B in w21 w3b w5; do
  SECONDS=0
  BIN=$C/$B TORCH=0 OUT=/tmp/out_$B WORK=/tmp/w_$B timeout 100 bash bench/run_fused.sh > /dev/null 2>&1
  echo "bench $B rc=$? ${SECONDS}s"; grep -E "H=|fused phases" /tmp/out_$B/summary.txt
  cp /tmp/out_$B/bench.log $OUT/bench_$B.log
done
