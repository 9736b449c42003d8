#!/usr/bin/env bash
# Session 14, call 8 (diagnostics for the next session, no code change): ncu's full set with SASS stall samples of
# w8's one-block recurrence kernel at H=50 K=1 (the table's build), and its SASS.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s14
R=$C/w8/ragtrain
$R gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5 --hidden 50"
SECONDS=0
timeout 150 mpirun -np 1 ncu --clock-control none --cache-control none --kernel-name regex:fused_lstm_kernel --launch-skip 20 \
  --launch-count 1 --set full --import-source no --warp-sampling-interval 0 -f -o /tmp/rec $R bench $B --warmup 5 \
  --batch-per-rank 1 --steps 40 --out /tmp/ncu8.json > /tmp/rec.log 2>&1
echo "ncu rc=$? ${SECONDS}s"
ncu --import /tmp/rec.ncu-rep --page details > $OUT/ncu_rec1_w8_details.txt 2>&1
grep -aE "Duration|Elapsed Cycles|Issue Slots Busy|Registers Per|Executed Instructions  " $OUT/ncu_rec1_w8_details.txt | head -6
ncu --import /tmp/rec.ncu-rep --page source --csv --print-source sass > /tmp/rec_source.csv 2>/dev/null
python3 bench/ncu_stalls.py /tmp/rec_source.csv top 80 > $OUT/ncu_rec1_w8_stalls.txt 2>&1; head -16 $OUT/ncu_rec1_w8_stalls.txt
gzip -c /tmp/rec_source.csv > $OUT/ncu_rec1_w8_source.csv.gz
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
$CUOBJ -sass $R 2>/dev/null | awk '/Function : .*fused_lstm_kernelILi52/{p=1} p&&/Function : /&&!/fused_lstm_kernelILi52/{p=0} p' | gzip > $OUT/sass_w8.txt.gz
