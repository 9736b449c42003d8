#!/usr/bin/env bash
# Session 11, call 7: w9 = w7 + the epoch repeat fraction built only when run() writes epoch records (w6/w7 built it
# in bench too, ~200 us a 16-step epoch on rank 0) from the kept previous order + the sums kernel reading a 128-byte
# line a load (a warp per slice of the partials, 32 entries a block). The whole GPU suite on w9; the fused bench
# w4/w7/w9 alternating at K=128, w4/w9 at K=1; ncu durations of w9; bench/run_fused.sh with PyTorch on w9.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s11
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 150 mpirun -np 1 $C/w9/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w9.log 2>&1
echo "gpu_tests Fused* w9 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|budget.*K=128 T=96 last|Failure" $OUT/gpu_fused_w9.log | sed 's/\x1b\[[0-9;]*m//g' | head -24
SECONDS=0; timeout 120 mpirun -np 1 $C/w9/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_w9.log 2>&1
echo "gpu_tests rest w9 rc=$? ${SECONDS}s"; grep -aE "FAILED|tests ran" $OUT/gpu_rest_w9.log | sed 's/\x1b\[[0-9;]*m//g' | head
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --data /tmp/d.h5 --optimizer adam --lr 1e-3 --schedule balanced"
n=0
for WK in w4:128 w7:128 w9:128 w9:128 w7:128 w4:128 w4:128 w9:128 w4:1 w9:1 w9:1 w4:1; do
  W=${WK%%:*} K=${WK##*:}
  st=3000; [ $K = 1 ] && st=5000
  n=$((n+1))
  timeout 40 mpirun -np 1 $C/$W/ragtrain bench $B --hidden 50 --batch-per-rank $K --steps $st --warmup 300 \
    --out /tmp/r$n.json > /tmp/r$n.log 2>&1
  echo "$W K=$K rc=$? $(grep -E '^  cuda' /tmp/r$n.log)"; cat /tmp/r$n.log >> $OUT/bench_alt.log
done
timeout 60 mpirun -np 1 ncu --clock-control none --kernel-name regex:"projection|fused_lstm|weight_grad|split_grad|sums|fused_opt" \
  --metrics gpu__time_duration.sum --launch-skip 100 --launch-count 10 --csv \
  $C/w9/ragtrain bench $B --warmup 5 --hidden 50 --batch-per-rank 128 --steps 40 > /tmp/d.csv 2>/dev/null
echo "ncu w9 H=50 K=128 rc=$?"
python3 - /tmp/d.csv <<'PY' | tee $OUT/durations_w9.txt
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
print("   " + "  ".join(f"{r[k].split('(')[0].split(' ')[-1][:18]}={r[v]}" for r in rows[1:]))
PY
SECONDS=0
BIN=$C/w9 TORCH=1 OUT=$OUT WORK=/tmp/w_final timeout 300 bash bench/run_fused.sh > /dev/null 2>&1
echo "run_fused w9 rc=$? ${SECONDS}s"; cat $OUT/summary.txt
rm -f $OUT/results.tgz
