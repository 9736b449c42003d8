#!/usr/bin/env bash
# Session 15, call 4: w5 = 97f0d2e (w4 + the optimizer's cluster shape with a publishing warp, its kind a template
# parameter, the partial norms read together; the head's old gradient values copied in the recurrence's prologue).
# The whole GPU suite on w5 (the optimizer changed); A/B w4/w5 at H=50 K=1, 128; stamps of w5s.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s15
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 150 $C/w5/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w5.log 2>&1; rc=$?
echo "gpu_tests Fused* w5 rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|Failure|budget.*H=50 K=(1|128) T=96 last" $OUT/gpu_fused_w5.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-330 | head -12
[ $rc = 0 ] || { grep -aB5 -A15 "Failure" $OUT/gpu_fused_w5.log | head -60; }
SECONDS=0; timeout 200 $C/w5/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_w5.log 2>&1; rc=$?
echo "gpu_tests rest w5 rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|Failure" $OUT/gpu_rest_w5.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-300 | head -12
[ $rc = 0 ] || { grep -aB5 -A15 "Failure" $OUT/gpu_rest_w5.log | head -60; }
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w4 $C/w5" CASES="50:1 50:128" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
$C/w5/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5 --hidden 50"
rm -f /tmp/st.txt
RAGTRAIN_STAMPS=/tmp/st.txt timeout 100 mpirun -np 1 -x RAGTRAIN_STAMPS $C/w5s/ragtrain bench $B --batch-per-rank 1 \
  --steps 3000 --warmup 300 --out /tmp/st_1.json 2>&1 | grep -aE "^  cuda" | head -2
gzip -c /tmp/st.txt > $OUT/stamps_w5s_k1.txt.gz
python3 $C/stamps_summary.py /tmp/st.txt | tee $OUT/stamps_w5s_k1.summary.txt
