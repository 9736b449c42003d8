#!/usr/bin/env bash
# Session 9, call 9: w9 = w7 + at K > 16 each one-block recurrence block sums its own sequence's weight gradients
# after its backward (no weight-gradient GEMM; the sums kernel adds the B rows). The whole GPU suite (with the new
# agreement and determinism tests for it), then the bench's H=50 cases for w7 and w9 in one call.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s9
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 75 mpirun -np 1 $C/w9/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w9.log 2>&1
echo "gpu_tests Fused* w9 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|Failure|budget.*K=128 T=96 last|budget.*K=16 T=96 last|budget.*K=1 T=96 last" $OUT/gpu_fused_w9.log | sed 's/\x1b\[[0-9;]*m//g' | head -24
SECONDS=0; timeout 80 mpirun -np 1 $C/w9/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_w9.log 2>&1
echo "gpu_tests rest w9 rc=$? ${SECONDS}s"; grep -aE "FAILED|tests ran" $OUT/gpu_rest_w9.log | sed 's/\x1b\[[0-9;]*m//g' | head
for B in w7 w9; do
  CASES="50:1 50:128" BIN=$C/$B TORCH=0 OUT=/tmp/out_$B WORK=/tmp/w_$B timeout 40 bash bench/run_fused.sh > /dev/null 2>&1
  echo "bench $B rc=$?"; grep -E "H=|fused phases" /tmp/out_$B/summary.txt
  cp /tmp/out_$B/bench.log $OUT/bench_$B.log
done
