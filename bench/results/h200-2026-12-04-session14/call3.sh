#!/usr/bin/env bash
# Session 14, call 3: why K=1 gained 0.4 us while the recurrence kernel lost ~5: kernel timelines of w0 and w2 at
# H=50 K=1 (and w2 at K=128); ncu SASS stall samples of w2's one-block recurrence at K=1; the rest of the GPU suite
# on w2.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s14
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5 --hidden 50"
for wk in w0:1 w2:1 w2:128; do
  w=${wk%%:*} K=${wk##*:}
  KT_OUT=/tmp/kt_${w}_$K.csv KT_KEEP=40000 CUDA_INJECTION64_PATH=$PWD/$C/lib/libkernel_timeline.so timeout 100 \
    mpirun -np 1 -x KT_OUT -x KT_KEEP -x CUDA_INJECTION64_PATH -x LD_LIBRARY_PATH $C/$w/ragtrain bench $B \
    --batch-per-rank $K --steps 2000 --warmup 300 --out /tmp/kt_${w}_$K.json 2>&1 | grep -aE "^  cuda" | head -2
  python3 bench/timeline_summary.py /tmp/kt_${w}_$K.csv --steps 400 --json $OUT/timeline_${w}_k$K.json | tee $OUT/timeline_${w}_k$K.txt
done
SECONDS=0
timeout 150 mpirun -np 1 ncu --clock-control none --kernel-name regex:fused_lstm_kernel --launch-skip 20 --launch-count 1 \
  --set full --import-source no --warp-sampling-interval 0 -f -o /tmp/rec $C/w2/ragtrain bench $B --warmup 5 \
  --batch-per-rank 1 --steps 40 --out /tmp/ncu3.json > /tmp/rec.log 2>&1
echo "ncu rc=$? ${SECONDS}s"
ncu --import /tmp/rec.ncu-rep --page details > $OUT/ncu_rec1_w2_details.txt 2>&1
grep -aE "Duration|Elapsed Cycles|Issue Slots Busy|Registers Per|Executed Instructions  " $OUT/ncu_rec1_w2_details.txt | head -6
ncu --import /tmp/rec.ncu-rep --page source --csv --print-source sass > /tmp/rec_source.csv 2>/dev/null
python3 bench/ncu_stalls.py /tmp/rec_source.csv top 80 > $OUT/ncu_rec1_w2_stalls.txt 2>&1; head -14 $OUT/ncu_rec1_w2_stalls.txt
gzip -c /tmp/rec_source.csv > $OUT/ncu_rec1_w2_source.csv.gz
SECONDS=0; timeout 200 $C/w2/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_w2.log 2>&1
echo "gpu_tests rest w2 rc=$? ${SECONDS}s"; grep -aE "FAILED|PASSED" $OUT/gpu_rest_w2.log | head -3
