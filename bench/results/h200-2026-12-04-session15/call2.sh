#!/usr/bin/env bash
# Session 15, call 2: where the K=1 step's time goes after call 1. w2s = w2 (c9248f9) + %globaltimer stamps at the
# kernels' phase boundaries (branch diag-stamps, not main); w2's CUPTI kernel timeline beside it.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s15
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
$C/w2/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5 --hidden 50"
for K in 1; do
  rm -f /tmp/st.txt
  RAGTRAIN_STAMPS=/tmp/st.txt timeout 100 mpirun -np 1 -x RAGTRAIN_STAMPS $C/w2s/ragtrain bench $B --batch-per-rank $K \
    --steps 3000 --warmup 300 --out /tmp/st_$K.json 2>&1 | grep -aE "^  cuda|seq/s" | head -3
  cp /tmp/st.txt $OUT/stamps_w2s_k$K.txt
  python3 $C/stamps_summary.py /tmp/st.txt | tee $OUT/stamps_w2s_k$K.summary.txt
  KT_OUT=/tmp/kt_$K.csv KT_KEEP=40000 CUDA_INJECTION64_PATH=$PWD/$C/lib/libkernel_timeline.so timeout 100 \
    mpirun -np 1 -x KT_OUT -x KT_KEEP -x CUDA_INJECTION64_PATH -x LD_LIBRARY_PATH $C/w2/ragtrain bench $B \
    --batch-per-rank $K --steps 2000 --warmup 300 --out /tmp/kt_$K.json 2>&1 | grep -aE "^  cuda" | head -2
  python3 bench/timeline_summary.py /tmp/kt_$K.csv --steps 400 --json $OUT/timeline_w2_k$K.json > $OUT/timeline_w2_k$K.txt
  head -12 $OUT/timeline_w2_k$K.txt
done
