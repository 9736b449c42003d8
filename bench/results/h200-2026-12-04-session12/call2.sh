#!/usr/bin/env bash
# Session 12, call 2: why the tensor-core split GEMM (w2) takes as long as the CUDA-core one (w0): ncu's full set and
# SASS stalls of w2's split_grad_kernel and projection_kernel at H=50 K=128; kernel durations of w0 and w2 without
# ncu's cache flush between kernels (--cache-control none).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s12
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5"
for W in w0 w2; do
  timeout 100 mpirun -np 1 ncu --clock-control none --cache-control none \
    --kernel-name regex:"projection|fused_lstm|weight_grad|split_grad|sums|fused_opt" \
    --metrics gpu__time_duration.sum --launch-skip 100 --launch-count 10 --csv \
    $C/$W/ragtrain bench $B --hidden 50 --batch-per-rank 128 --steps 40 --warmup 5 > /tmp/ncu.csv 2>/dev/null
  echo "ncu (no flush) $W H=50 K=128 rc=$? (ns)"
  python3 - /tmp/ncu.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if rows:
    h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
    print("   " + "  ".join(f"{r[k].split('(')[0].split(' ')[-1][:18]}={r[v]}" for r in rows[1:]))
PY
done 2>&1 | tee $OUT/ncu_noflush.txt
full() {  # name kernel-regex H K
  SECONDS=0
  timeout 150 mpirun -np 1 ncu --clock-control none --kernel-name regex:$2 --launch-skip 20 --launch-count 1 \
    --set full --import-source no --warp-sampling-interval 0 -f -o /tmp/$1 $C/w2/ragtrain bench $B --warmup 5 --hidden $3 --batch-per-rank $4 --steps 40 > /tmp/$1.log 2>&1
  echo "ncu $1 rc=$? ${SECONDS}s"
  ncu --import /tmp/$1.ncu-rep --page details > $OUT/$1_details.txt 2>&1
  grep -aE "Duration|Elapsed Cycles|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occ|Executed Ipc A|Executed Instructions  |Block Size|Grid Size|L2 Hit|DRAM Through|L2 Cache Through|Est. Speedup: [1-9][0-9]" $OUT/$1_details.txt | head -24
  ncu --import /tmp/$1.ncu-rep --page source --csv --print-source sass > /tmp/$1_source.csv 2>/dev/null
  python3 bench/ncu_stalls.py /tmp/$1_source.csv top 40 > $OUT/$1_stalls.txt 2>&1; head -30 $OUT/$1_stalls.txt
}
full sg2 split_grad 50 128
full pj2 projection 50 128
