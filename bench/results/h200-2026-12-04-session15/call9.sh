#!/usr/bin/env bash
# Session 15, call 9: w9 = w8 with the backward weights' reads after the head instead of before it (the head's
# loads no longer queued behind them). A/B w8/w9 at H=50 K=1, 3 rounds.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s15
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w8 $C/w9" CASES="50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
