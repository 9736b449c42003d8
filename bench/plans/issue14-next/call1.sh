#!/usr/bin/env bash
# Issue 14, the next device session's first call (~8 min), from the repository root with .devcarry-next (prepare.sh)
# carried:   bash bench/plans/issue14-next/call1.sh
# 1. FusedBudget (H=50 K=1 T=96: the recurrence's cycles a step, the head's phase) of d1 (the diagnostic build: the
#    head run twice, the projection's body twice, the prologue's phases; README.md, "What d1 decides"), main (w0) and
#    the four v8 builds (the head in the last warp beside the other warps' backward-weight reads, each compiled
#    differently: their loops differ from main's and from each other's), all into budget.log.
# 2. A/B at H=50 K=1, the v8 builds against w0 (3 rounds), then the builds that leave the recurrence kernel as it is
#    (2 rounds): v2b (speculative optimizer update, 992 threads x 4), v3 (compact projection), v6 (the optimizer
#    polls the GEMM blocks' flags), v23 = v2b + v3, v236 = v2b + v3 + v6, v37 = v3 + v7 (the recurrence starts on the
#    optimizer's counter), v2367 = all four. Each group's table is written as soon as it is done (ab1/, ab2/).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=${C:-.devcarry-next}
for f in "$C"/*/*.xz; do xz -dkf "$f" && chmod +x "${f%.xz}"; done
mkdir -p build-gpu/lib && cp "$C/libnvtx_count.so" build-gpu/lib/ 2>/dev/null
for b in ${BUDGET:-d1 w0 v8a v8b v8c v8d}; do
  SECONDS=0; echo "== $b" >> "$OUT/budget.log"
  timeout 90 "$C/$b/gpu_tests" --gtest_filter='FusedBudget*' >> "$OUT/budget.log" 2>&1
  echo "$b FusedBudget rc=$? ${SECONDS}s"
done
grep -aE "^== |diag|budget.*H=50 K=1 T=96 last pool: proj" "$OUT/budget.log" | sed 's/.*(block 0: //' | cut -c1-200
ab() {   # group, rounds, builds...
  local g=$1 r=$2; shift 2
  SECONDS=0; mkdir -p "$OUT/$g"
  BUILDS="$*" CASES=${CASES:-50:1} ROUNDS=$r OUT=$OUT/$g bench/ab_fused.sh > /dev/null 2>&1
  echo "$g rc=$? ${SECONDS}s"; cat "$OUT/$g/ab.txt"; rm -f "$OUT/$g/bench.log"
}
ab ab1 3 $C/w0 $C/v8a $C/v8b $C/v8c $C/v8d
ab ab2 2 $C/w0 $C/v2b $C/v3 $C/v6 $C/v23 $C/v236 $C/v37 $C/v2367
