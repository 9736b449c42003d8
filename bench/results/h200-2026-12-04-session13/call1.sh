#!/usr/bin/env bash
# Session 13, call 1: a kernel timeline (bench/kernel_timeline.cpp, CUPTI) of main (w0 = a44355f) at H=50 K=1 and
# K=128, and the same bench without CUPTI beside it (does tracing change the step?).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s13
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
ls /usr/local/cuda/extras/CUPTI/lib64 2>/dev/null | head -3
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5 --hidden 50"
for K in 1 128; do
  steps=$([ $K = 1 ] && echo 3000 || echo 2000)
  timeout 100 mpirun -np 1 $C/w0/ragtrain bench $B --batch-per-rank $K --steps $steps --warmup 300 --out /tmp/plain_$K.json 2>&1 | grep -aE "^  [a-z]" | head -6
  KT_OUT=/tmp/kt_$K.csv KT_KEEP=40000 CUDA_INJECTION64_PATH=$PWD/$C/lib/libkernel_timeline.so timeout 100 \
    mpirun -np 1 -x KT_OUT -x KT_KEEP -x CUDA_INJECTION64_PATH -x LD_LIBRARY_PATH $C/w0/ragtrain bench $B --batch-per-rank $K --steps $steps --warmup 300 --out /tmp/kt_$K.json 2>&1 | grep -aE "^  [a-z]|rror" | head -6
  ls -la /tmp/kt_$K.csv
  python3 bench/timeline_summary.py /tmp/kt_$K.csv --steps 400 --json $OUT/timeline_w0_k$K.json | tee $OUT/timeline_w0_k$K.txt
  gzip -c /tmp/kt_$K.csv > $OUT/kt_w0_k$K.csv.gz
done
