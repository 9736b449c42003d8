#!/usr/bin/env bash
# Session 7 lead's second call: the whole GPU suite with the store-order patch (now main), and the default model
# (pool mean, --lstm auto) beside --lstm cudnn at H=50 K=1.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s7
mkdir -p build-gpu/lib && cp $C/main/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 260 mpirun -np 1 $C/p/gpu_tests > $OUT/gpu_all_patched.log 2>&1; echo "gpu_tests patched rc=$? ${SECONDS}s"
grep -aE "PASSED|FAILED" $OUT/gpu_all_patched.log | tail -12
DATA="--features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1"
for lstm in auto cudnn; do
  timeout 90 mpirun -np 1 $C/p/ragtrain bench --device cuda --lstm $lstm --hidden 50 $DATA --optimizer adam --lr 1e-3 \
    --steps 5000 --warmup 300 --out /tmp/default_$lstm.json > /tmp/default_$lstm.txt 2>&1
  echo "default model --lstm $lstm rc=$?"; grep -E "^  cuda|LSTM|fused|pool" /tmp/default_$lstm.txt | head -6
done 2>&1 | tee $OUT/default_model.log
