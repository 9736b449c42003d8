#!/usr/bin/env bash
# Session 9, call 4: w3 = w2 + the recurrence projects its first 16 steps itself (waits for the projection kernel only
# before step 16); w4 = w3 + the one-block kernel's W_hh from a packed copy (scalar, coalesced). w3: Fused* tests;
# w4: the budget test; bench (ragtrain only) main w21, w3, w4.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s9
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 120 mpirun -np 1 $C/w3/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w3.log 2>&1
echo "gpu_tests Fused* w3 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|budget|Failure" $OUT/gpu_fused_w3.log | sed 's/\x1b\[[0-9;]*m//g' | grep -v "K=128 T=96 m\|H=96" | head -30
SECONDS=0; timeout 60 mpirun -np 1 $C/w4/gpu_tests --gtest_filter='FusedBudget*' > $OUT/gpu_budget_w4.log 2>&1
echo "gpu_tests budget w4 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|budget|Failure" $OUT/gpu_budget_w4.log | sed 's/\x1b\[[0-9;]*m//g' | grep -v "K=128 T=96 m\|H=96\|mean pool\|max pool" | head -30
for B in w21 w3 w4; do
  SECONDS=0
  BIN=$C/$B TORCH=0 OUT=/tmp/out_$B WORK=/tmp/w_$B timeout 100 bash bench/run_fused.sh > /dev/null 2>&1
  echo "bench $B rc=$? ${SECONDS}s"; grep -E "H=|fused phases" /tmp/out_$B/summary.txt
  cp /tmp/out_$B/bench.log $OUT/bench_$B.log
done
