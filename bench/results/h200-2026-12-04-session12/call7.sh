#!/usr/bin/env bash
# Session 12, call 7: profiles for the next session of main's kernels (w9 = 0a934a9's device code) at H=50 K=128:
# ncu's full set and SASS stalls of the projection, the sums kernel and the recurrence kernel (its launch and
# occupancy: why its W_hh prologue cannot overlap the projection at K=128).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s12
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5"
full() {  # name kernel-regex K
  SECONDS=0
  timeout 150 mpirun -np 1 ncu --clock-control none --cache-control none --kernel-name regex:$2 --launch-skip 20 \
    --launch-count 1 --set full --import-source no --warp-sampling-interval 0 -f -o /tmp/$1 $C/w9/ragtrain bench $B \
    --warmup 5 --hidden 50 --batch-per-rank $3 --steps 40 > /tmp/$1.log 2>&1
  echo "ncu $1 rc=$? ${SECONDS}s"
  ncu --import /tmp/$1.ncu-rep --page details > $OUT/$1_details.txt 2>&1
  grep -aE "Duration|Elapsed Cycles|Issue Slots Busy|Warp Cycles Per Issued|Registers Per|Achieved Occ|Executed Ipc A|Executed Instructions  |Block Size|Grid Size|L2 Hit|Block Limit (Reg|Shared)" $OUT/$1_details.txt | head -16
  ncu --import /tmp/$1.ncu-rep --page source --csv --print-source sass > /tmp/$1_source.csv 2>/dev/null
  python3 bench/ncu_stalls.py /tmp/$1_source.csv top 40 > $OUT/$1_stalls.txt 2>&1; head -14 $OUT/$1_stalls.txt
}
full proj128_w9 projection 128
full sums128_w9 sums 128
full proj1_w9 projection 1
full rec128_w9 fused_lstm 128
