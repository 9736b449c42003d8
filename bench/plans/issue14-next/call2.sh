#!/usr/bin/env bash
# Issue 14, the next device session's second call, for the build call 1 found fastest (its patches, on their own or
# with the v2b/v3/v6 ones that call 1's second table favoured: they leave the v8 builds' recurrence loops as they
# are). Here first, e.g. for v8a with v23's patches (B names the build):
#   CARRY=.devcarry-call2 BUILDS="w0: v8a23:v8a-head-beside-weights,v2b-speculative-wide,v3-projection-compact" \
#     TESTS=v8a23 bench/plans/issue14-next/prepare.sh
# then, carrying .devcarry-call2:   C=.devcarry-call2 B=v8a23 bash bench/plans/issue14-next/call2.sh
# The whole GPU suite on it (Fused* then the rest), A/B against main at H=50 K=128 and H=128 K=1 (the other targets
# must not get slower), then the issue's table (`TORCH=1 bench/run_fused.sh`: cuDNN, fused, PyTorch eager and CUDA
# graphs side by side) on it. ~8 min.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=${C:-.devcarry-call2}
B=${B:?set B to the build to test}
for f in "$C"/*/*.xz; do xz -dkf "$f" && chmod +x "${f%.xz}"; done
mkdir -p build-gpu/lib && cp "$C/libnvtx_count.so" build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 150 "$C/$B/gpu_tests" --gtest_filter='Fused*' > "$OUT/gpu_fused_$B.log" 2>&1; rc=$?
echo "gpu_tests Fused* $B rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|budget.*H=50 K=(1|128) T=96 last" "$OUT/gpu_fused_$B.log" | cut -c1-300 | head -8
SECONDS=0; timeout 200 "$C/$B/gpu_tests" --gtest_filter='-Fused*' > "$OUT/gpu_rest_$B.log" 2>&1; rc2=$?
echo "gpu_tests rest $B rc=$rc2 ${SECONDS}s"; grep -aE "FAILED|PASSED" "$OUT/gpu_rest_$B.log" | head -6
[ $rc = 0 ] && [ $rc2 = 0 ] || exit 1
SECONDS=0; mkdir -p "$OUT/ab"
BUILDS="$C/w0 $C/$B" CASES="50:128 128:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat "$OUT/ab/ab.txt"; rm -f "$OUT/ab/bench.log"
SECONDS=0; mkdir -p "$OUT/table"
BIN=$C/$B TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
echo "run_fused $B rc=$? ${SECONDS}s"; cat "$OUT/table/summary.txt"; rm -f "$OUT/table/results.tgz"
