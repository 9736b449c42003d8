#!/usr/bin/env bash
# fused7 helper (issue 14), session 7: build check, the fused and CUDA-backend GPU tests, then the three
# cases (ragtrain --lstm cudnn|fused; PyTorch eager and graphs when TORCH=1) and --lstm auto's choice at
# H=50 K=1, H=50 K=128 and H=128 K=1. From the repository root on the GPU machine, the binaries in $D.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
D=${D:-.devcarry-fused7}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
ldd $D/ragtrain $D/gpu_tests | grep 'not found'
SECONDS=0
timeout ${TT:-200} mpirun -np 1 $D/gpu_tests --gtest_filter="${FILTER:-Fused*:GpuBackend*:GpuTraining*:GpuNccl*}" > $OUT/gpu_tests.log 2>&1
echo "gpu_tests rc=$? (${SECONDS}s)"
grep -aE "FAILED|PASSED|tests ran|budget|\[ fused" $OUT/gpu_tests.log | head -40
grep -aB3 -A6 "Failure" $OUT/gpu_tests.log | head -60
SECONDS=0
mkdir -p $OUT/bench
BIN=$D SCRIPTS=$D TORCH=${TORCH:-0} OUT=$OUT/bench WORK=/tmp/bf timeout ${BT:-400} bash $D/run_fused.sh > /dev/null 2>&1
echo "bench rc=$? (${SECONDS}s)"
cat $OUT/bench/summary.txt
DATA="--features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1"
for HK in 50:1 50:128 128:1; do
  H=${HK%%:*} K=${HK##*:}
  timeout ${AT:-60} mpirun -np 1 $D/ragtrain bench --device cuda --lstm auto --pool last --hidden $H $DATA --optimizer adam \
    --lr 1e-3 --batch-per-rank $K --schedule balanced --steps 2000 --warmup 200 --force --out /tmp/bf/auto_h${H}_k$K.json \
    > /tmp/bf/auto_h${H}_k$K.txt 2>&1
  echo "auto H=$H K=$K rc=$?"; grep -oE "LSTM (fused|cuDNN)[^#]*|auto at[^)]*\)" /tmp/bf/auto_h${H}_k$K.txt | head -3
  grep -E "^  cuda" /tmp/bf/auto_h${H}_k$K.txt
done | tee $OUT/auto.log
