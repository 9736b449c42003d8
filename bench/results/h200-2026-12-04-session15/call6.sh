#!/usr/bin/env bash
# Session 15, call 6: which arrangement of the one-block kernel's head keeps the backward's step. w5 = 97f0d2e,
# w6 = 7071191 (head in the last warp, the others reading their backward weights meanwhile); w6b = w6 with the head
# in warp 0; w6c = w6 with the weights' reads and the head in a two-pass loop (one copy of each); w6d = w5's
# recurrence with w6's optimizer. A/B at H=50 K=1 (the target still missed), 3 rounds.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s15
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w5 $C/w6 $C/w6b $C/w6c $C/w6d" CASES="50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
