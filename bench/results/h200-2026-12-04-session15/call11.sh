#!/usr/bin/env bash
# Session 15, call 11: w10 = main (w5's source) + w7's flags instead of the projection's and the GEMM's grid ends at
# K=1, with the optimizer polling its flags in parallel (w7 polled them one after another from one thread: call 10's
# timeline put its optimizer's end 6.6 us after the GEMM's, main's 4.4). A/B w8 / w10 at H=50 K=1; then, only if w10
# is faster than 66.9 us, Fused* on w10 and the table on it.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s15
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w8 $C/w10" CASES="50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
m=$(python3 -c "import json;d=json.load(open('$OUT/ab/ab.json'));print(d)" 2>/dev/null | grep -o "'w10'[^}]*" | head -1)
med=$(awk '/w10/ {for(i=1;i<=NF;i++) if ($i=="median") print $(i+1)}' $OUT/ab/ab.txt | head -1)
echo "w10 median $med"
python3 -c "import sys; sys.exit(0 if float('$med') < 66.9 else 1)" || exit 0
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 100 $C/w10/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w10.log 2>&1; rc=$?
echo "gpu_tests Fused* w10 rc=$rc ${SECONDS}s"; grep -aE "FAILED|PASSED|budget.*H=50 K=1 T=96 last" $OUT/gpu_fused_w10.log | cut -c1-300 | head -6
[ $rc = 0 ] || exit 1
SECONDS=0; mkdir -p $OUT/table
BIN=$C/w10 TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
echo "run_fused w10 rc=$? ${SECONDS}s"; cat $OUT/table/summary.txt; rm -f $OUT/table/results.tgz
