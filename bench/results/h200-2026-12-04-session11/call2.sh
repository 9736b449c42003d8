#!/usr/bin/env bash
# Session 11, call 2: why w1's split weight-gradient GEMM takes 18-39 us (ncu's full set and its SASS stalls at
# H=50 K=32 and K=128), and the fused bench w0/w1 alternating at K=128 (each run its own output file).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s11
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --data /tmp/d.h5 --optimizer adam --lr 1e-3 --schedule balanced"
full() {  # name kernel-regex H K
  SECONDS=0
  timeout 120 mpirun -np 1 ncu --clock-control none --kernel-name regex:$2 --launch-skip 20 --launch-count 1 \
    --set full --import-source no --warp-sampling-interval 0 -f -o /tmp/$1 $C/w1/ragtrain bench $B --warmup 5 --hidden $3 --batch-per-rank $4 --steps 40 > /tmp/$1.log 2>&1
  echo "ncu $1 rc=$? ${SECONDS}s"
  ncu --import /tmp/$1.ncu-rep --page details > $OUT/$1_details.txt 2>&1
  grep -aE "Duration|Elapsed Cycles|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occ|L2 Hit|Memory Throughput|DRAM Through|Executed Ipc|Block Limit|Waves Per|Grid Size|Block Size|Dynamic Shared" $OUT/$1_details.txt | head -24
  ncu --import /tmp/$1.ncu-rep --page source --csv --print-source sass > /tmp/$1_source.csv 2>/dev/null
  python3 bench/ncu_stalls.py /tmp/$1_source.csv top 30 > $OUT/$1_stalls.txt 2>&1; head -40 $OUT/$1_stalls.txt
}
full sg32 split_grad 50 32
full sg128 split_grad 50 128
n=0
for W in w1 w0 w1 w0; do
  n=$((n+1))
  timeout 40 mpirun -np 1 $C/$W/ragtrain bench $B --hidden 50 --batch-per-rank 128 --steps 3000 --warmup 300 \
    --out /tmp/r$n.json > /tmp/r$n.log 2>&1
  echo "$W K=128 rc=$? $(grep -E '^  cuda' /tmp/r$n.log)"
done
