#!/usr/bin/env bash
# Issue 14, the next device session's first call (~7 min), from the repository root with .devcarry-next (prepare.sh)
# carried:   bash bench/plans/issue14-next/call1.sh
# 1. FusedBudget of every build, into budget.log: the recurrence's cycles a step and its head phase (H=50 K=1 T=96,
#    block 0) and the whole training step as the trainer drives the backend (WholeStepK1: 3,000 steps launched ahead,
#    Adam), for d1 (the diagnostic build: the head run twice, the projection's body twice, the prologue's phases;
#    README.md, "What d1 decides"), main (w0), the eleven v8 builds (the head in the last warp beside the other warps'
#    backward-weight reads, each compiling the recurrence loops differently) and the seven below; then
#    budget_rank.py's table, ranked by the whole step.
# 2. A/B at H=50 K=1 (`ragtrain bench`, 2 rounds: a call has 600 s) of the builds that leave the recurrence kernel as it is: v2b
#    (speculative optimizer update, 992 threads x 4), v3 (compact projection), v6 (the optimizer polls the GEMM
#    blocks' flags), v23 = v2b + v3, v236 = v2b + v3 + v6, v37 = v3 + v7 (the recurrence starts on the optimizer's
#    counter), v2367 = all four: the issue's metric, and a check of WholeStepK1's order against it.
start=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=${C:-.devcarry-next}
here=$(dirname "$0")
for f in "$C"/*/*.xz; do xz -dkf "$f" && chmod +x "${f%.xz}"; done
mkdir -p build-gpu/lib && cp "$C/libnvtx_count.so" build-gpu/lib/ 2>/dev/null
for b in ${BUDGET:-d1 w0 v8a v8b v8c v8d v8e v8f v8g v8h v8i v8j v8k v2b v3 v6 v23 v236 v37 v2367}; do
  SECONDS=0; echo "== $b" >> "$OUT/budget.log"
  timeout 90 "$C/$b/gpu_tests" --gtest_filter='FusedBudget*' >> "$OUT/budget.log" 2>&1
  echo "$b FusedBudget rc=$? ${SECONDS}s"
done
grep -a "diag" "$OUT/budget.log" | cut -c1-200
python3 "$here/budget_rank.py" "$OUT/budget.log" w0
echo "budget done at $(( $(date +%s) - start )) s"
SECONDS=0; mkdir -p "$OUT/ab"
BUILDS="$C/w0 $C/v2b $C/v3 $C/v6 $C/v23 $C/v236 $C/v37 $C/v2367" CASES=${CASES:-50:1} ROUNDS=${ROUNDS:-2} OUT=$OUT/ab \
  bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat "$OUT/ab/ab.txt"; rm -f "$OUT/ab/bench.log"
