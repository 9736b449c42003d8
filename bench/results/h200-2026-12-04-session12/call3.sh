#!/usr/bin/env bash
# Session 12, call 3: the tf32 split by integer arithmetic on the bits (cvt.rna.tf32 is several SASS instructions).
# w4 = split GEMM + projection on the tensor cores, w5 = split GEMM only (the projection as main's); w0 = main before.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s12
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 150 $C/w4/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w4.log 2>&1; rc=$?
echo "gpu_tests Fused* w4 rc=$rc ${SECONDS}s"
grep -aE "FAILED|tests ran|PASSED|budget.*T=96 last|Failure" $OUT/gpu_fused_w4.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-330 | head -30
SECONDS=0
BUILDS="$C/w0 $C/w4 $C/w5" CASES="50:128 50:1 128:1" ROUNDS=2 OUT=$OUT bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab.txt
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5"
for WK in w4:128 w5:128 w4:1; do
  W=${WK%%:*} K=${WK##*:}
  timeout 100 mpirun -np 1 ncu --clock-control none --cache-control none \
    --kernel-name regex:"projection|fused_lstm|weight_grad|split_grad|sums|fused_opt" \
    --metrics gpu__time_duration.sum --launch-skip 100 --launch-count 10 --csv \
    $C/$W/ragtrain bench $B --hidden 50 --batch-per-rank $K --steps 40 --warmup 5 > /tmp/ncu.csv 2>/dev/null
  echo "ncu (no flush) $W H=50 K=$K rc=$? (ns)"
  python3 - /tmp/ncu.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if rows:
    h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
    print("   " + "  ".join(f"{r[k].split('(')[0].split(' ')[-1][:18]}={r[v]}" for r in rows[1:]))
PY
done 2>&1 | tee $OUT/ncu_noflush.txt
