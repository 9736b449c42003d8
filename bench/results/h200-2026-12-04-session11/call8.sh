#!/usr/bin/env bash
# Session 11, call 8: w10 = w9 with split_grad_kernel cut into helpers (the 150-line limit; 89 registers instead of
# 95) and launched with whole warps. Fused* on w10; the fused bench w9/w10 alternating at K=128 and K=1.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s11
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 150 mpirun -np 1 $C/w10/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w10.log 2>&1
echo "gpu_tests Fused* w10 rc=$? ${SECONDS}s"
grep -aE "FAILED|tests ran|budget.*K=128 T=96 last|Failure|K=24" $OUT/gpu_fused_w10.log | sed 's/\x1b\[[0-9;]*m//g' | head -24
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --data /tmp/d.h5 --optimizer adam --lr 1e-3 --schedule balanced"
n=0
for WK in w9:128 w10:128 w10:128 w9:128 w10:1 w9:1; do
  W=${WK%%:*} K=${WK##*:}
  st=3000; [ $K = 1 ] && st=5000
  n=$((n+1))
  timeout 40 mpirun -np 1 $C/$W/ragtrain bench $B --hidden 50 --batch-per-rank $K --steps $st --warmup 300 \
    --out /tmp/r$n.json > /tmp/r$n.log 2>&1
  echo "$W K=$K rc=$? $(grep -E '^  cuda' /tmp/r$n.log)"; cat /tmp/r$n.log >> $OUT/bench_alt.log
done
