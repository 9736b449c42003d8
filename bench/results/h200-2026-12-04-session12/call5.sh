#!/usr/bin/env bash
# Session 12, call 5 (final): w7 = main 152bcd0 (split GEMM and projection on the tensor cores). The whole GPU suite;
# the table (TORCH=1 bench/run_fused.sh); A/B w0 (main before, cd7ecc1) / w7; ncu full set + SASS stalls of
# w7's split_grad_kernel at H=50 K=128 (for the next session). w8 = w7 with one block tile per part at H = 50 (21
# warps, one block an SM, 132 parts): in the A/B, and its Fused* at the end.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s12
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 150 $C/w7/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w7.log 2>&1
echo "gpu_tests Fused* w7 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|PASSED|Failure" $OUT/gpu_fused_w7.log | sed 's/\x1b\[[0-9;]*m//g' | head -10
SECONDS=0; timeout 200 $C/w7/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_w7.log 2>&1
echo "gpu_tests rest w7 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|PASSED|Failure" $OUT/gpu_rest_w7.log | sed 's/\x1b\[[0-9;]*m//g' | head -10
SECONDS=0; mkdir -p $OUT/table
BIN=$C/w7 TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
echo "run_fused rc=$? ${SECONDS}s"; cat $OUT/table/summary.txt; rm -f $OUT/table/results.tgz
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w0 $C/w7 $C/w8" CASES="50:128 50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5"
SECONDS=0
timeout 150 mpirun -np 1 ncu --clock-control none --kernel-name regex:split_grad --launch-skip 20 --launch-count 1 \
  --set full --import-source no --warp-sampling-interval 0 -f -o /tmp/sg $C/w7/ragtrain bench $B --warmup 5 --hidden 50 \
  --batch-per-rank 128 --steps 40 > /tmp/sg.log 2>&1
echo "ncu sg rc=$? ${SECONDS}s"
ncu --import /tmp/sg.ncu-rep --page details > $OUT/ncu_split128_w7_details.txt 2>&1
grep -aE "Duration|Elapsed Cycles|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occ|Executed Ipc A|Executed Instructions  |L2 Hit|DRAM Through|L2 Cache Through" $OUT/ncu_split128_w7_details.txt | head -16
ncu --import /tmp/sg.ncu-rep --page source --csv --print-source sass > /tmp/sg_source.csv 2>/dev/null
python3 bench/ncu_stalls.py /tmp/sg_source.csv top 40 > $OUT/ncu_split128_w7_stalls.txt 2>&1; head -24 $OUT/ncu_split128_w7_stalls.txt
SECONDS=0; timeout 150 $C/w8/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w8.log 2>&1
echo "gpu_tests Fused* w8 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|PASSED|Failure|budget.*K=128 T=96 last" $OUT/gpu_fused_w8.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-300 | head -10
