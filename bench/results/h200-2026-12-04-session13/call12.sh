#!/usr/bin/env bash
# Session 13, call 12 (diagnostics for the next session, no code change): kernel timelines of w6 (= main's device code)
# at H=50 K=1 and K=128, and ncu's full set with SASS-level stall samples of the one-block recurrence kernel at K=1.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s13
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
$C/w6/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5 --hidden 50"
for K in 1 128; do
  rm -f /tmp/kt12_$K.json
  KT_OUT=/tmp/kt12_$K.csv KT_KEEP=40000 CUDA_INJECTION64_PATH=$PWD/$C/lib/libkernel_timeline.so timeout 100 \
    mpirun -np 1 -x KT_OUT -x KT_KEEP -x CUDA_INJECTION64_PATH -x LD_LIBRARY_PATH $C/w6/ragtrain bench $B \
    --batch-per-rank $K --steps 2000 --warmup 300 --out /tmp/kt12_$K.json 2>&1 | grep -aE "^  cuda" | head -2
  python3 bench/timeline_summary.py /tmp/kt12_$K.csv --steps 400 --json $OUT/timeline_w6_k$K.json | tee $OUT/timeline_w6_k$K.txt
done
SECONDS=0
timeout 150 mpirun -np 1 ncu --clock-control none --kernel-name regex:fused_lstm_kernel --launch-skip 20 --launch-count 1 \
  --set full --import-source no --warp-sampling-interval 0 -f -o /tmp/rec $C/w6/ragtrain bench $B --warmup 5 \
  --batch-per-rank 1 --steps 40 --out /tmp/ncu12.json > /tmp/rec.log 2>&1
echo "ncu rc=$? ${SECONDS}s"
ncu --import /tmp/rec.ncu-rep --page details > $OUT/ncu_rec1_w6_details.txt 2>&1
grep -aE "Duration|Elapsed Cycles|Issue Slots Busy|Registers Per|Executed Instructions  " $OUT/ncu_rec1_w6_details.txt | head -6
ncu --import /tmp/rec.ncu-rep --page source --csv --print-source sass > /tmp/rec_source.csv 2>/dev/null
python3 bench/ncu_stalls.py /tmp/rec_source.csv top 80 > $OUT/ncu_rec1_w6_stalls.txt 2>&1; head -14 $OUT/ncu_rec1_w6_stalls.txt
gzip -c /tmp/rec_source.csv > $OUT/ncu_rec1_w6_source.csv.gz; ls -la $OUT
