#!/usr/bin/env bash
# Issue 14, the next device session's first call (~5 min with the machine's start), from the repository root with
# .devcarry-next (prepare.sh) carried:   bash bench/plans/issue14-next/call1.sh
# 1. Is once-a-step code waiting on its instruction fetch? d1's FusedBudget prints, beside the usual budget, the
#    recurrence prologue's phases, the head run twice in a row (the second finds its code cached) and the projection's
#    body run twice in block 0 (README.md, "What d1 decides").
# 2. A/B at H=50 K=1 (3 alternating rounds): main (w0) against v1 (warm head), v2 (speculative optimizer update),
#    v2b (v2 + 992 threads x 4 elements a block), v3 (compact projection), v6 (the optimizer polls the GEMM blocks'
#    flags instead of waiting for the GEMM grid's end), v23 = v2b + v3, v236 = v2b + v3 + v6, v37 = v3 + v7 (the
#    recurrence starts on the optimizer's counter) and v2367 = all four. ~7 minutes.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=${C:-.devcarry-next}
for f in "$C"/*/*.xz; do xz -dkf "$f" && chmod +x "${f%.xz}"; done
mkdir -p build-gpu/lib && cp "$C/libnvtx_count.so" build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 120 "$C/d1/gpu_tests" --gtest_filter='FusedBudget*' > "$OUT/budget_d1.log" 2>&1
echo "d1 FusedBudget rc=$? ${SECONDS}s"
grep -aE "diag|budget.*T=96 last" "$OUT/budget_d1.log" | cut -c1-330 | head -20
SECONDS=0; mkdir -p "$OUT/ab"
BUILDS=${BUILDS:-"$C/w0 $C/v1 $C/v2 $C/v2b $C/v3 $C/v6 $C/v23 $C/v236 $C/v37 $C/v2367"} CASES=${CASES:-50:1} ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh \
  > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat "$OUT/ab/ab.txt"; rm -f "$OUT/ab/bench.log"
