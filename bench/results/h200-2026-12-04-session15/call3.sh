#!/usr/bin/env bash
# Session 15, call 3: w3 = 866f6a5 (w2 + the head in one warp, head_emit's old values loaded during the head),
# w4 = c0c613e (w3 + W_hh staged whole through shared memory by cp.async, the backward's weights read after the
# forward). Fused* on w4; A/B w2/w3/w4 at H=50 K=1, 128 and w2/w4 at H=128 K=1 (the head is shared with the cluster
# variant); stamps of w4s (w4 + diag-stamps + a stamp after the optimizer's host publication).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s15
SECONDS=0; timeout 150 $C/w4/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w4.log 2>&1; rc=$?
echo "gpu_tests Fused* w4 rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|Failure|budget.*H=(50|128) K=(1|128) T=96 last" $OUT/gpu_fused_w4.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-330 | head -16
[ $rc = 0 ] || { grep -aB5 -A15 "Failure" $OUT/gpu_fused_w4.log | head -60; }
SECONDS=0; mkdir -p $OUT/ab $OUT/ab128
BUILDS="$C/w2 $C/w3 $C/w4" CASES="50:1 50:128" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
SECONDS=0; BUILDS="$C/w2 $C/w4" CASES="128:1" ROUNDS=2 STEPS=3000 OUT=$OUT/ab128 bench/ab_fused.sh > /dev/null 2>&1
echo "ab128 rc=$? ${SECONDS}s"; cat $OUT/ab128/ab.txt; rm -f $OUT/ab128/bench.log
$C/w4/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5 --hidden 50"
rm -f /tmp/st.txt
RAGTRAIN_STAMPS=/tmp/st.txt timeout 100 mpirun -np 1 -x RAGTRAIN_STAMPS $C/w4s/ragtrain bench $B --batch-per-rank 1 \
  --steps 3000 --warmup 300 --out /tmp/st_1.json 2>&1 | grep -aE "^  cuda" | head -2
gzip -c /tmp/st.txt > $OUT/stamps_w4s_k1.txt.gz
python3 $C/stamps_summary.py /tmp/st.txt | tee $OUT/stamps_w4s_k1.summary.txt
