#!/usr/bin/env bash
# Session 13, call 2 (call 1's timeline files were empty: records lost at exit; now flushed every 50 ms): kernel
# timeline of main (w0 = a44355f) at H=50 K=1 and K=128 (kernels only), and K=128 with the runtime calls (KT_API=1,
# slows the host), beside the plain bench.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s13
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5 --hidden 50"
run_kt() {   # K API tag
  K=$1; steps=$([ $K = 1 ] && echo 3000 || echo 2000)
  KT_API=$2 KT_OUT=/tmp/kt_$3.csv KT_KEEP=40000 CUDA_INJECTION64_PATH=$PWD/$C/lib/libkernel_timeline.so timeout 100 \
    mpirun -np 1 -x KT_API -x KT_OUT -x KT_KEEP -x CUDA_INJECTION64_PATH -x LD_LIBRARY_PATH $C/w0/ragtrain bench $B \
    --batch-per-rank $K --steps $steps --warmup 300 --out /tmp/kt_$3.json 2>&1 | grep -aE "^  [a-z]|rror" | head -6
  ls -la /tmp/kt_$3.csv
  python3 bench/timeline_summary.py /tmp/kt_$3.csv --steps 400 --json $OUT/timeline_$3.json | tee $OUT/timeline_$3.txt
  gzip -c /tmp/kt_$3.csv > $OUT/kt_$3.csv.gz
}
for K in 1 128; do
  timeout 100 mpirun -np 1 $C/w0/ragtrain bench $B --batch-per-rank $K --steps 2000 --warmup 300 --out /tmp/plain_$K.json 2>&1 | grep -aE "^  [a-z]" | head -6
  run_kt $K 0 w0_k$K
done
run_kt 128 1 w0_k128_api
