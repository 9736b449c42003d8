#!/usr/bin/env bash
# Session 8, call 2: w17 = w16 + publishing only in streaming runs + the budget test timing whole runs streaming vs
# waiting. The budget test, then ncu source-level PC sampling of the H=50 one-block recurrence, the H=128 cluster
# recurrence and the optimizer kernel.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s8
mkdir -p build-gpu/lib && cp $C/w13/libnvtx_count.so build-gpu/lib/
$C/w17/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
SECONDS=0; timeout 100 mpirun -np 1 $C/w17/gpu_tests --gtest_filter='FusedBudget*' > $OUT/budget.log 2>&1; echo "budget rc=$? ${SECONDS}s"
grep -a "budget" $OUT/budget.log | sed 's/\x1b\[[0-9;]*m//g'
prof() {  # name kernel-regex H K
  SECONDS=0
  timeout 100 mpirun -np 1 ncu --clock-control none --kernel-name regex:$2 --launch-skip 40 --launch-count 1 \
    --set full --warp-sampling-interval 0 -f -o /tmp/$1 $C/w17/ragtrain bench --device cuda --lstm fused --pool last \
    --hidden $3 --batch-per-rank $4 --data /tmp/d.h5 --optimizer adam --lr 1e-3 --steps 60 --warmup 5 > /tmp/$1.log 2>&1
  echo "ncu $1 rc=$? ${SECONDS}s"; grep -a "==ERROR==" /tmp/$1.log | head -3
  ncu --import /tmp/$1.ncu-rep --page details > $OUT/$1_details.txt 2>&1
  grep -aE "^  [a-z_]|Duration|Elapsed Cycles|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per" $OUT/$1_details.txt | head -12
  ncu --import /tmp/$1.ncu-rep --page source --csv --print-source sass > $OUT/$1_source.csv 2> /tmp/$1.err || \
    ncu --import /tmp/$1.ncu-rep --page source --csv > $OUT/$1_source.csv 2>> /tmp/$1.err
  head -c 300 /tmp/$1.err; wc -c $OUT/$1_source.csv
}
prof rec50 fused_lstm_kernel 50 1
prof rec128 fused_lstm_cluster_kernel 128 1
prof opt50 fused_optimizer 50 1
