#!/usr/bin/env bash
# Session 11, call 3: w2 = the split GEMM with 4 x 8 outputs a thread (95 registers, 2 blocks an SM) and 16-byte
# copies of the d gates; w3 = w2 + 128 slots in the kernel parameters (no slot-table copy up to K = 128).
# Fused* tests on w2; the fused bench w0/w2/w3 alternating at K=128 and K=1; ncu durations of w2 at K=128.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s11
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 120 mpirun -np 1 $C/w2/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w2.log 2>&1
echo "gpu_tests Fused* w2 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|budget.*K=128 T=96 last|Failure" $OUT/gpu_fused_w2.log | sed 's/\x1b\[[0-9;]*m//g' | head -20
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --data /tmp/d.h5 --optimizer adam --lr 1e-3 --schedule balanced"
n=0
for K in 128 1; do
  st=3000; [ $K = 1 ] && st=5000
  for W in w0 w2 w3 w0 w2 w3; do
    n=$((n+1))
    timeout 40 mpirun -np 1 $C/$W/ragtrain bench $B --hidden 50 --batch-per-rank $K --steps $st --warmup 300 \
      --out /tmp/r$n.json > /tmp/r$n.log 2>&1
    echo "$W K=$K rc=$? $(grep -E '^  cuda' /tmp/r$n.log)"; cat /tmp/r$n.log >> $OUT/bench_alt.log
  done
done
for c in 50:128 50:32; do
  H=${c%%:*} K=${c##*:}
  timeout 60 mpirun -np 1 ncu --clock-control none --kernel-name regex:"projection|fused_lstm|weight_grad|split_grad|sums|fused_opt" \
    --metrics gpu__time_duration.sum --launch-skip 100 --launch-count 10 --csv \
    $C/w2/ragtrain bench $B --warmup 5 --hidden $H --batch-per-rank $K --steps 40 > /tmp/d.csv 2>/dev/null
  echo "ncu w2 H=$H K=$K rc=$?"
  python3 - /tmp/d.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
print("   " + "  ".join(f"{r[k].split('(')[0].split(' ')[-1][:18]}={r[v]}" for r in rows[1:]))
PY
done 2>&1 | tee $OUT/durations_w2.txt
