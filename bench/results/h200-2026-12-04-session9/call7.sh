#!/usr/bin/env bash
# Session 9, call 7 (final): w6 = the code committed as main. The issue-14 bench with the PyTorch eager loop and the
# CUDA-graph anchor beside it (TORCH=1, all columns of a row in one run), then H=128 K=1 twice more (ragtrain only),
# then the default model (--pool mean, --lstm auto) against --lstm cudnn.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s9
B=w6
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
SECONDS=0
BIN=$C/$B TORCH=1 OUT=/tmp/out_b WORK=/tmp/w_b timeout 200 bash bench/run_fused.sh > /dev/null 2>&1
echo "bench $B TORCH=1 rc=$? ${SECONDS}s"; cat /tmp/out_b/summary.txt
cp /tmp/out_b/bench.log $OUT/bench_$B.log; cp /tmp/out_b/summary.json $OUT/summary_$B.json
for i in 1 2; do
  CASES="128:1" BIN=$C/$B TORCH=0 OUT=/tmp/out_r$i WORK=/tmp/w_r$i timeout 60 bash bench/run_fused.sh > /dev/null 2>&1
  echo "repeat $i rc=$?"; grep -E "H=" /tmp/out_r$i/summary.txt
done 2>&1 | tee $OUT/repeat_h128.log
DATA="--features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1"
for lstm in auto cudnn; do
  timeout 25 mpirun -np 1 $C/$B/ragtrain bench --device cuda --lstm $lstm --hidden 50 $DATA --optimizer adam --lr 1e-3 \
    --steps 5000 --warmup 300 --out /tmp/default_$lstm.json > /tmp/default_$lstm.txt 2>&1
  echo "default model $B --lstm $lstm rc=$?"; grep -E "^  cuda|LSTM|fused|pool" /tmp/default_$lstm.txt | head -4
done 2>&1 | tee $OUT/default_model.log
