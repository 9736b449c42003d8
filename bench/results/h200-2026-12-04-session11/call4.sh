#!/usr/bin/env bash
# Session 11, call 4: w4 = w2 + each thread's 8 z columns as a quad in each half of the tile (no bank conflicts);
# w5 = w4 + clusters of 4 parts adding their tiles through distributed shared memory (4x fewer partials).
# Fused* on w5 (with the new K=24 training test and the shared rerun helper), the many-sequence tests on w4; the
# fused bench w0/w2/w4/w5 alternating at K=128; ncu durations of w4 and w5.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s11
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 150 mpirun -np 1 $C/w5/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w5.log 2>&1
echo "gpu_tests Fused* w5 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|budget.*K=128 T=96 last|Failure|K=24" $OUT/gpu_fused_w5.log | sed 's/\x1b\[[0-9;]*m//g' | head -20
SECONDS=0; timeout 60 mpirun -np 1 $C/w4/gpu_tests --gtest_filter='*Sequences*' > $OUT/gpu_many_w4.log 2>&1
echo "gpu_tests *Sequences* w4 rc=$? ${SECONDS}s"; grep -aE "FAILED|tests ran" $OUT/gpu_many_w4.log | sed 's/\x1b\[[0-9;]*m//g'
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --data /tmp/d.h5 --optimizer adam --lr 1e-3 --schedule balanced"
n=0
for W in w0 w2 w4 w5 w0 w2 w4 w5; do
  n=$((n+1))
  timeout 40 mpirun -np 1 $C/$W/ragtrain bench $B --hidden 50 --batch-per-rank 128 --steps 3000 --warmup 300 \
    --out /tmp/r$n.json > /tmp/r$n.log 2>&1
  echo "$W K=128 rc=$? $(grep -E '^  cuda' /tmp/r$n.log)"; cat /tmp/r$n.log >> $OUT/bench_alt.log
done
for W in w4 w5; do
  timeout 60 mpirun -np 1 ncu --clock-control none --kernel-name regex:"projection|fused_lstm|weight_grad|split_grad|sums|fused_opt" \
    --metrics gpu__time_duration.sum --launch-skip 100 --launch-count 10 --csv \
    $C/$W/ragtrain bench $B --warmup 5 --hidden 50 --batch-per-rank 128 --steps 40 > /tmp/d.csv 2>/dev/null
  echo "ncu $W H=50 K=128 rc=$?"
  python3 - /tmp/d.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
print("   " + "  ".join(f"{r[k].split('(')[0].split(' ')[-1][:18]}={r[v]}" for r in rows[1:]))
PY
done 2>&1 | tee $OUT/durations.txt
