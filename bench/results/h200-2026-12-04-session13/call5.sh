#!/usr/bin/env bash
# Session 13, call 5: w1 = w0 + the next step launched ahead (Backend::prepare_next, CudaBackend::launch_ahead).
# Fused* tests on w1; A/B w0 vs w1 at H=50 K=128 and K=1; kernel timelines of w1.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s13
SECONDS=0; timeout 150 $C/w1/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w1.log 2>&1; rc=$?
echo "gpu_tests Fused* w1 rc=$rc ${SECONDS}s"
grep -aE "FAILED|tests ran|PASSED|Failure|FusedAhead" $OUT/gpu_fused_w1.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-300 | head -12
[ $rc = 0 ] || exit 1
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w0 $C/w1" CASES="50:128 50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5 --hidden 50"
for K in 1 128; do
  rm -f /tmp/kt5_$K.json
  KT_OUT=/tmp/kt5_$K.csv KT_KEEP=40000 CUDA_INJECTION64_PATH=$PWD/$C/lib/libkernel_timeline.so timeout 100 \
    mpirun -np 1 -x KT_OUT -x KT_KEEP -x CUDA_INJECTION64_PATH -x LD_LIBRARY_PATH $C/w1/ragtrain bench $B \
    --batch-per-rank $K --steps 2000 --warmup 300 --out /tmp/kt5_$K.json 2>&1 | grep -aE "^  [a-z]|rror" | head -6
  python3 bench/timeline_summary.py /tmp/kt5_$K.csv --steps 400 --json $OUT/timeline_w1_k$K.json | tee $OUT/timeline_w1_k$K.txt
  gzip -c /tmp/kt5_$K.csv > $OUT/kt_w1_k$K.csv.gz
done
