#!/usr/bin/env bash
# Session 9, call 2: w1 = main + projection stages W_ih through shared memory (coalesced) + pack blocks write W_hh in
# the recurrence's register order (flags) + weight-gradient GEMM 4x4 per thread. GPU tests (Fused*, budget), the
# bench beside main (w21), per-kernel durations (ncu) of w1.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s9
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
W=${W:-w1}
SECONDS=0; timeout 120 mpirun -np 1 $C/$W/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_$W.log 2>&1
rc=$?; echo "gpu_tests Fused* $W rc=$rc ${SECONDS}s"
grep -aE "FAILED|tests ran|budget|Failure" $OUT/gpu_fused_$W.log | sed 's/\x1b\[[0-9;]*m//g' | head -30
for B in w21 $W; do
  SECONDS=0
  BIN=$C/$B TORCH=0 OUT=/tmp/out_$B WORK=/tmp/w_$B timeout 100 bash bench/run_fused.sh > /dev/null 2>&1
  echo "bench $B rc=$? ${SECONDS}s"; grep -E "H=|phases" /tmp/out_$B/summary.txt
done
cp /tmp/out_$W/bench.log $OUT/bench_$W.log
B="--device cuda --lstm fused --pool last --data /tmp/w_$W/data.h5 --optimizer adam --lr 1e-3 --warmup 5"
for c in 50:1 128:1 50:128; do
  H=${c%%:*} K=${c##*:}
  timeout 60 mpirun -np 1 ncu --clock-control none --kernel-name regex:"projection|fused_lstm|weight_grad|sums|fused_opt" \
    --metrics gpu__time_duration.sum --launch-skip 100 --launch-count 12 --csv \
    $C/$W/ragtrain bench $B --hidden $H --batch-per-rank $K --steps 60 > /tmp/d.csv 2>/dev/null
  echo "ncu H=$H K=$K rc=$?"
  python3 - /tmp/d.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
print("   " + "  ".join(f"{r[k].split('(')[0].split(' ')[-1][:18]}={r[v]}" for r in rows[1:]))
PY
done 2>&1 | tee $OUT/durations_$W.txt
