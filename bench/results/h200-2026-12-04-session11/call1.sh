#!/usr/bin/env bash
# Session 11, call 1: w1 = main (w0) + the split weight-gradient GEMM at K > 16 (8 x 8 outputs a thread, the
# timesteps of all sequences cut into one part per SM) and the sums over parts in 8 slices per entry.
# Fused* tests on w1, then the fused bench at H=50 K=128 w0/w1 alternating, then ncu durations of w1's kernels.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s11
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 120 mpirun -np 1 $C/w1/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w1.log 2>&1
echo "gpu_tests Fused* w1 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|budget.*T=96 last|Failure" $OUT/gpu_fused_w1.log | sed 's/\x1b\[[0-9;]*m//g' | head -30
SECONDS=0
CASES="50:128" BIN=$C/w0 TORCH=0 OUT=/tmp/out_w0 WORK=/tmp/w_b timeout 60 bash bench/run_fused.sh > /dev/null 2>&1
echo "bench w0 rc=$? ${SECONDS}s"; grep -E "H=|phases" /tmp/out_w0/summary.txt; cp /tmp/out_w0/bench.log $OUT/bench_w0.log
B="--device cuda --lstm fused --pool last --data /tmp/w_b/data.h5 --optimizer adam --lr 1e-3 --schedule balanced"
for W in w1 w0 w1 w0 w1; do
  for K in 128 32; do
    timeout 40 mpirun -np 1 $C/$W/ragtrain bench $B --hidden 50 --batch-per-rank $K --steps 3000 --warmup 300 \
      --out /tmp/r.json > /tmp/r.log 2>&1
    echo "$W K=$K rc=$? $(grep -E '^  cuda' /tmp/r.log)"; cat /tmp/r.log >> $OUT/bench_alt.log
  done
done
for W in w1; do
  for c in 50:128 128:128 50:32; do
    H=${c%%:*} K=${c##*:}
    timeout 60 mpirun -np 1 ncu --clock-control none --kernel-name regex:"projection|fused_lstm|weight_grad|split_grad|sums|fused_opt" \
      --metrics gpu__time_duration.sum --launch-skip 100 --launch-count 10 --csv \
      $C/$W/ragtrain bench $B --warmup 5 --hidden $H --batch-per-rank $K --steps 40 > /tmp/d.csv 2>/dev/null
    echo "ncu $W H=$H K=$K rc=$?"
    python3 - /tmp/d.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
print("   " + "  ".join(f"{r[k].split('(')[0].split(' ')[-1][:18]}={r[v]}" for r in rows[1:]))
PY
  done
done 2>&1 | tee $OUT/durations_w1.txt
