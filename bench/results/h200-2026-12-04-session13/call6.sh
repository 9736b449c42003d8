#!/usr/bin/env bash
# Session 13, call 6: w2 = w1 + the slot table (K > 16) copied on its own stream, two device tables in turn (no copy
# on the compute stream). The whole GPU suite on w2; A/B w0 / w1 / w2 at H=50 K=128 and K=1; timeline of w2 at K=128.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s13
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 150 $C/w2/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w2.log 2>&1; rc=$?
echo "gpu_tests Fused* w2 rc=$rc ${SECONDS}s"
grep -aE "FAILED|tests ran|PASSED|Failure|FusedAhead" $OUT/gpu_fused_w2.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-300 | head -12
[ $rc = 0 ] || exit 1
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w0 $C/w1 $C/w2" CASES="50:128 50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5 --hidden 50"
rm -f /tmp/kt6.json
KT_OUT=/tmp/kt6.csv KT_KEEP=40000 CUDA_INJECTION64_PATH=$PWD/$C/lib/libkernel_timeline.so timeout 100 \
  mpirun -np 1 -x KT_OUT -x KT_KEEP -x CUDA_INJECTION64_PATH -x LD_LIBRARY_PATH $C/w2/ragtrain bench $B \
  --batch-per-rank 128 --steps 2000 --warmup 300 --out /tmp/kt6.json 2>&1 | grep -aE "^  [a-z]|rror" | head -6
python3 bench/timeline_summary.py /tmp/kt6.csv --steps 400 --json $OUT/timeline_w2_k128.json | tee $OUT/timeline_w2_k128.txt
gzip -c /tmp/kt6.csv > $OUT/kt_w2_k128.csv.gz
SECONDS=0; timeout 200 $C/w2/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_w2.log 2>&1
echo "gpu_tests rest w2 rc=$? ${SECONDS}s"; grep -aE "FAILED|PASSED" $OUT/gpu_rest_w2.log | head -5
