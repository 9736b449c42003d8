#!/usr/bin/env bash
# Session 8, call 6 (final, short of device time): w21 = w19 + the cooperative optimizer as a programmatic dependent
# launch. The fused tests without the budget test (they include 100 SGD/Adam steps at H = 96 and 128, the cooperative
# optimizer's shape); then the issue-14 bench with the PyTorch eager loop and CUDA-graph anchor beside it (TORCH=1)
# for w21 if they passed, else w19; then the default model (auto, --pool mean) against cuDNN.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s8
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
mkdir -p build-gpu/lib && cp $C/w13/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 60 mpirun -np 1 $C/w21/gpu_tests --gtest_filter='Fused*:-FusedBudget*' > $OUT/gpu_fused_w21.log 2>&1
rc=$?; echo "gpu_tests Fused* w21 rc=$rc ${SECONDS}s"
grep -aE "PASSED|FAILED|tests ran" $OUT/gpu_fused_w21.log | sed 's/\x1b\[[0-9;]*m//g' | head -8
B=w21; [ $rc = 0 ] || B=w19
SECONDS=0
BIN=$C/$B TORCH=1 OUT=/tmp/out_b WORK=/tmp/w_b timeout 170 bash bench/run_fused.sh > /dev/null 2>&1
echo "bench $B TORCH=1 rc=$? ${SECONDS}s"; cat /tmp/out_b/summary.txt
cp /tmp/out_b/bench.log $OUT/bench_$B.log; cp /tmp/out_b/summary.json $OUT/summary_$B.json
DATA="--features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1"
for lstm in auto cudnn; do
  timeout 25 mpirun -np 1 $C/$B/ragtrain bench --device cuda --lstm $lstm --hidden 50 $DATA --optimizer adam --lr 1e-3 \
    --steps 5000 --warmup 300 --out /tmp/default_$lstm.json > /tmp/default_$lstm.txt 2>&1
  echo "default model $B --lstm $lstm rc=$?"; grep -E "^  cuda|LSTM|fused|pool" /tmp/default_$lstm.txt | head -4
done 2>&1 | tee $OUT/default_model.log
