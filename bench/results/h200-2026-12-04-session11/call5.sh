#!/usr/bin/env bash
# Session 11, call 5: where w4's K=128 step goes: ncu's full set and SASS stalls of the split weight-gradient GEMM and
# of the projection at H=50 K=128; the bench on 2,000 sequences (16 steps an epoch) vs 20,480 (160 steps an epoch:
# the per-epoch host work, a new schedule order, 10x rarer); w6 = w4 + the next epoch's order built while the GPU
# runs an epoch's last step.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s11
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
$C/w0/ragtrain gen --force --out /tmp/d20k.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 20480 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced"
n=0
for WD in w4:d w6:d w4:d20k w6:d20k w4:d w6:d; do
  W=${WD%%:*} D=${WD##*:}
  n=$((n+1))
  timeout 40 mpirun -np 1 $C/$W/ragtrain bench $B --data /tmp/$D.h5 --hidden 50 --batch-per-rank 128 --steps 3000 --warmup 300 \
    --out /tmp/r$n.json > /tmp/r$n.log 2>&1
  echo "$W $D K=128 rc=$? $(grep -E '^  cuda' /tmp/r$n.log) | $(grep -E 'host_gap' /tmp/r$n.log)"
done
full() {  # name kernel-regex H K
  SECONDS=0
  timeout 120 mpirun -np 1 ncu --clock-control none --kernel-name regex:$2 --launch-skip 20 --launch-count 1 \
    --set full --import-source no --warp-sampling-interval 0 -f -o /tmp/$1 $C/w4/ragtrain bench $B --data /tmp/d.h5 --warmup 5 --hidden $3 --batch-per-rank $4 --steps 40 > /tmp/$1.log 2>&1
  echo "ncu $1 rc=$? ${SECONDS}s"
  ncu --import /tmp/$1.ncu-rep --page details > $OUT/$1_details.txt 2>&1
  grep -aE "Duration|Elapsed Cycles|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occ|Executed Ipc A|Executed Instructions  |Block Size|Grid Size|bank|Est. Speedup: [1-9][0-9]" $OUT/$1_details.txt | head -24
  ncu --import /tmp/$1.ncu-rep --page source --csv --print-source sass > $OUT/$1_source.csv 2>/dev/null
  python3 bench/ncu_stalls.py $OUT/$1_source.csv top 30 > $OUT/$1_stalls.txt 2>&1; head -16 $OUT/$1_stalls.txt
}
full sg split_grad 50 128
full pj projection 50 128
gzip $OUT/*_source.csv
