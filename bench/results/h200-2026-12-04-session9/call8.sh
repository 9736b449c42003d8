#!/usr/bin/env bash
# Session 9, call 8: w7 = the committed code (w6's kernels, same cubin; the cooperative optimizer remembers whether
# it may be a programmatic dependent launch): the whole GPU suite. w8 = w7 + the projection's feature staging with 16
# rows a warp in flight (from 4): the budget test, and the bench's H=50 cases beside w7.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s9
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 120 mpirun -np 1 $C/w7/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w7.log 2>&1
echo "gpu_tests Fused* w7 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|Failure" $OUT/gpu_fused_w7.log | sed 's/\x1b\[[0-9;]*m//g' | head
SECONDS=0; timeout 100 mpirun -np 1 $C/w7/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_w7.log 2>&1
echo "gpu_tests rest w7 rc=$? ${SECONDS}s"; grep -aE "FAILED|tests ran" $OUT/gpu_rest_w7.log | sed 's/\x1b\[[0-9;]*m//g' | head
SECONDS=0; timeout 60 mpirun -np 1 $C/w8/gpu_tests --gtest_filter='FusedBudget*' > $OUT/gpu_budget_w8.log 2>&1
echo "gpu_tests budget w8 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|budget|Failure" $OUT/gpu_budget_w8.log | sed 's/\x1b\[[0-9;]*m//g' | grep -v "mean pool\|max pool\|H=96" | head -20
for B in w7 w8; do
  CASES="50:1 50:128" BIN=$C/$B TORCH=0 OUT=/tmp/out_$B WORK=/tmp/w_$B timeout 60 bash bench/run_fused.sh > /dev/null 2>&1
  echo "bench $B rc=$?"; grep -E "H=|fused phases" /tmp/out_$B/summary.txt
  cp /tmp/out_$B/bench.log $OUT/bench_$B.log
done
