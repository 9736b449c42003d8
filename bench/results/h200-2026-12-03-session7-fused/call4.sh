#!/usr/bin/env bash
# fused7 helper (issue 14), session 7, call 4 (the last): the candidate build B4 (./ragtrain, ./gpu_tests in $D) runs
# the fused and CUDA-backend GPU tests; if they fail, B3 does (and is benched), else A (call 3's build, tested
# then). The benched build runs bench/run_fused.sh with PyTorch eager and the CUDA-graph anchor; A runs it again
# without PyTorch (same call, for the comparison); then the cycle budget (FusedBudget) of A, B1, B2, B3 and
# --lstm auto's choice with the benched build (diag.log). Builds: A = commit of call 3; B1 = + stores after the
# next matvec; B2 = + bare ex2/rcp; B3 = + 3-deep GEMM pipeline, warp-parallel head; B4 = + 8-byte h sends.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
D=${D:-.devcarry-fused7}
FILTER='Fused*:GpuBackend*:GpuTraining*:GpuNccl*'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
ldd $D/ragtrain $D/gpu_tests | grep 'not found'
SECONDS=0
timeout 150 mpirun -np 1 $D/gpu_tests --gtest_filter="$FILTER" > $OUT/gpu_tests.log 2>&1; rc=$?
echo "B4 gpu_tests rc=$rc (${SECONDS}s)"
grep -aE "PASSED|FAILED|budget" $OUT/gpu_tests.log | cut -c1-400 | head -24
grep -aB3 -A6 Failure $OUT/gpu_tests.log | head -30
BIN=$D NAME=B4
if [ $rc != 0 ]; then
  SECONDS=0
  timeout 150 mpirun -np 1 $D/B3/gpu_tests --gtest_filter="$FILTER" > $OUT/gpu_tests_B3.log 2>&1; rc3=$?
  echo "B3 gpu_tests rc=$rc3 (${SECONDS}s)"; grep -aE "PASSED|FAILED" $OUT/gpu_tests_B3.log | head
  if [ $rc3 = 0 ]; then BIN=$D/B3 NAME=B3; else BIN=$D/A NAME=A; fi
fi
echo "benched build: $NAME"
SECONDS=0; mkdir -p $OUT/bench
BIN=$BIN SCRIPTS=$D TORCH=1 OUT=$OUT/bench WORK=/tmp/bf timeout 240 bash $D/run_fused.sh > /dev/null 2>&1
echo "bench ($NAME) rc=$? (${SECONDS}s)"; cat $OUT/bench/summary.txt
SECONDS=0; mkdir -p $OUT/benchA
BIN=$D/A SCRIPTS=$D TORCH=0 OUT=$OUT/benchA WORK=/tmp/bfA timeout 90 bash $D/run_fused.sh > /dev/null 2>&1
echo "bench (A) rc=$? (${SECONDS}s)"; cat $OUT/benchA/summary.txt; rm -f $OUT/benchA/results.tgz $OUT/benchA/summary.json
DATA="--features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1"
{
  echo "benched build: $NAME"
  for V in A B1 B2 B3; do
    echo "== $V"; timeout 30 mpirun -np 1 $D/$V/gpu_tests --gtest_filter='FusedBudget.*' 2>&1 | grep -a budget
  done
  for HK in 50:1 50:128 128:1; do
    H=${HK%%:*} K=${HK##*:}
    timeout 40 mpirun -np 1 $BIN/ragtrain bench --device cuda --lstm auto --pool last --hidden $H $DATA --optimizer adam \
      --lr 1e-3 --batch-per-rank $K --schedule balanced --steps 2000 --warmup 200 --force \
      --out /tmp/bf/auto_h${H}_k$K.json > /tmp/bf/auto_h${H}_k$K.txt 2>&1
    echo "auto H=$H K=$K rc=$?"; grep -oE "LSTM (fused|cuDNN)[^#]*|auto at[^)]*\)" /tmp/bf/auto_h${H}_k$K.txt | head -3
    grep -E "^  cuda" /tmp/bf/auto_h${H}_k$K.txt
  done
} > $OUT/diag.log 2>&1
cut -c1-330 $OUT/diag.log
