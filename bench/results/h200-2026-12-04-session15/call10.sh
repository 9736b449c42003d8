#!/usr/bin/env bash
# Session 15, call 10: CUPTI kernel timelines at H=50 K=1 of w8 (main) and w7 (the flags instead of grid ends, 3.7 us
# slower in call 7), for the next session: where w7's time went.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s15
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
$C/w8/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5 --hidden 50"
for w in w8 w7; do
  KT_OUT=/tmp/kt_$w.csv KT_KEEP=40000 CUDA_INJECTION64_PATH=$PWD/$C/lib/libkernel_timeline.so timeout 100 \
    mpirun -np 1 -x KT_OUT -x KT_KEEP -x CUDA_INJECTION64_PATH -x LD_LIBRARY_PATH $C/$w/ragtrain bench $B \
    --batch-per-rank 1 --steps 2000 --warmup 300 --out /tmp/kt_$w.json 2>&1 | grep -aE "^  cuda" | head -2
  python3 bench/timeline_summary.py /tmp/kt_$w.csv --steps 400 --json $OUT/timeline_${w}_k1.json > $OUT/timeline_${w}_k1.txt
  head -8 $OUT/timeline_${w}_k1.txt
done
