#!/usr/bin/env bash
# Session 12, call 1: w1 = split weight-gradient GEMM on the tensor cores (3 x tf32); w2 = w1 + the projection on the
# tensor cores; w0 = main before (cd7ecc1). Fused* on w2 (on w1 too if w2 fails); A/B bench w0/w1/w2; ncu durations.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s12
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
SECONDS=0; timeout 150 $C/w2/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w2.log 2>&1; rc=$?
echo "gpu_tests Fused* w2 rc=$rc ${SECONDS}s"
grep -aE "FAILED|tests ran|PASSED|budget.*T=96|Failure" $OUT/gpu_fused_w2.log | sed 's/\x1b\[[0-9;]*m//g' | head -30
if [ $rc != 0 ]; then
  SECONDS=0; timeout 150 $C/w1/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w1.log 2>&1
  echo "gpu_tests Fused* w1 rc=$? ${SECONDS}s"
  grep -aE "FAILED|tests ran|PASSED|Failure" $OUT/gpu_fused_w1.log | sed 's/\x1b\[[0-9;]*m//g' | head -20
fi
SECONDS=0
BUILDS="$C/w0 $C/w1 $C/w2 $C/w3" CASES="50:128 50:1 128:1" ROUNDS=2 OUT=$OUT bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab.txt
SECONDS=0
DATA=(--features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1)
for W in w0 w2; do
  for K in 128 1; do
    timeout 100 mpirun -np 1 ncu --clock-control none \
      --kernel-name regex:"projection|fused_lstm|weight_grad|split_grad|sums|fused_opt" \
      --metrics gpu__time_duration.sum --launch-skip 100 --launch-count 10 --csv \
      $C/$W/ragtrain bench --device cuda --lstm fused --pool last --hidden 50 "${DATA[@]}" --optimizer adam \
      --lr 1e-3 --batch-per-rank $K --schedule balanced --steps 40 --warmup 5 > /tmp/ncu.csv 2>/dev/null
    echo "ncu $W H=50 K=$K rc=$? (ns)"
    python3 - /tmp/ncu.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if rows:
    h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
    print("   " + "  ".join(f"{r[k].split('(')[0].split(' ')[-1][:18]}={r[v]}" for r in rows[1:]))
PY
  done
done 2>&1 | tee $OUT/ncu.txt
echo "ncu ${SECONDS}s"
