#!/usr/bin/env bash
# Session 11, call 6: w7 = w6 + the split GEMM's rows fastest in a warp (d-gate loads adjacent, z loads broadcast),
# two barriers a chunk (the map two chunks ahead), partials column-major (coalesced stores). The whole GPU suite on
# w7; the fused bench w4/w6/w7 alternating at K=128 and w4/w7 at K=1; ncu durations of w7 at K=128; then
# bench/run_fused.sh with PyTorch (all three cases, every column in this one run) on w7.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s11
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SECONDS=0; timeout 150 mpirun -np 1 $C/w7/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w7.log 2>&1
echo "gpu_tests Fused* w7 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|budget.*T=96 last|Failure|K=24" $OUT/gpu_fused_w7.log | sed 's/\x1b\[[0-9;]*m//g' | head -24
SECONDS=0; timeout 120 mpirun -np 1 $C/w7/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_w7.log 2>&1
echo "gpu_tests rest w7 rc=$? ${SECONDS}s"; grep -aE "FAILED|tests ran" $OUT/gpu_rest_w7.log | sed 's/\x1b\[[0-9;]*m//g' | head
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --data /tmp/d.h5 --optimizer adam --lr 1e-3 --schedule balanced"
n=0
for WK in w4:128 w6:128 w7:128 w4:128 w6:128 w7:128 w4:1 w7:1 w4:1 w7:1; do
  W=${WK%%:*} K=${WK##*:}
  st=3000; [ $K = 1 ] && st=5000
  n=$((n+1))
  timeout 40 mpirun -np 1 $C/$W/ragtrain bench $B --hidden 50 --batch-per-rank $K --steps $st --warmup 300 \
    --out /tmp/r$n.json > /tmp/r$n.log 2>&1
  echo "$W K=$K rc=$? $(grep -E '^  cuda' /tmp/r$n.log)"; cat /tmp/r$n.log >> $OUT/bench_alt.log
done
timeout 60 mpirun -np 1 ncu --clock-control none --kernel-name regex:"projection|fused_lstm|weight_grad|split_grad|sums|fused_opt" \
  --metrics gpu__time_duration.sum --launch-skip 100 --launch-count 10 --csv \
  $C/w7/ragtrain bench $B --warmup 5 --hidden 50 --batch-per-rank 128 --steps 40 > /tmp/d.csv 2>/dev/null
echo "ncu w7 H=50 K=128 rc=$?"
python3 - /tmp/d.csv <<'PY' | tee $OUT/durations_w7.txt
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
print("   " + "  ".join(f"{r[k].split('(')[0].split(' ')[-1][:18]}={r[v]}" for r in rows[1:]))
PY
SECONDS=0
BIN=$C/w7 TORCH=1 OUT=$OUT WORK=/tmp/w_final timeout 300 bash bench/run_fused.sh > /dev/null 2>&1
echo "run_fused w7 rc=$? ${SECONDS}s"; cat $OUT/summary.txt
rm -f $OUT/results.tgz
