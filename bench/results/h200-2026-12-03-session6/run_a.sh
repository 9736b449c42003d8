#!/usr/bin/env bash
# Lead's H200 call A, session 6: every GPU test (incl. the fused kernel's mean/max pooling), PyTorch agreement on
# CUDA, the speed of the default model and of the issue-14 cases, and the timeline/NVTX check. Logs under $OUT.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
D=.devcarry; B=$D/ragtrain; W=/tmp/w; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
ldd $B $D/gpu_tests | grep 'not found'
SECONDS=0
timeout 220 mpirun -np 1 $D/gpu_tests > $OUT/gpu_tests.log 2>&1
echo "gpu_tests rc=$? (${SECONDS}s)"; grep -aE "^.{0,12}\[  (PASSED|FAILED)|tests ran" $OUT/gpu_tests.log | tail -12
grep -aB2 -A6 "Failure" $OUT/gpu_tests.log | head -40
SECONDS=0
timeout 100 python3 tools/test_torch_agreement.py --bin $B --out $W/ta --devices cuda > $OUT/torch.log 2>&1
echo "torch rc=$? (${SECONDS}s)"; grep -v '^+' $OUT/torch.log | tail -9
DATA="--features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1"
bn() { local n=$1 s=$2 w=$3; shift 3
  timeout 60 mpirun -np 1 $B bench --device cuda --hidden 50 $DATA --optimizer adam --lr 1e-3 --steps $s --warmup $w \
    --force --out $W/$n.json "$@" > $W/$n.txt 2>&1; echo "== $n rc=$? $*" >> $OUT/bench.log; cat $W/$n.txt >> $OUT/bench.log; }
SECONDS=0
bn k1_default 4000 400
bn k1_last_auto 4000 400 --pool last
bn k1_last_cudnn 4000 400 --pool last --lstm cudnn
bn k1_mean_cudnn 4000 400 --pool mean --lstm cudnn
bn k1_max_fused 4000 400 --pool max --lstm fused
bn k128_last_auto 2000 200 --pool last --batch-per-rank 128
bn k128_mean_auto 2000 200 --batch-per-rank 128
echo "bench (${SECONDS}s)"; grep -aE "^== |^  cuda|LSTM (fused|cuDNN)" $OUT/bench.log
cp $W/*.json $OUT/ 2>/dev/null
SECONDS=0
T=/tmp/t16; mkdir -p $T && $B gen --out $T/tr.h5 --sequences 2000 --quiet && $B gen --out $T/va.h5 --sequences 500 --seed 2 --quiet
NVTX_INJECTION64_PATH=$PWD/$D/libnvtx_count.so RAGTRAIN_NVTX_COUNTS=$OUT/nvtx timeout 90 mpirun -np 1 $B train --device cuda \
  --data $T/tr.h5 --val $T/va.h5 --out $T/run --epochs 2 --log-every 500 --trace $OUT/trace.json > $OUT/train.txt 2>&1
echo "trace train rc=$? (${SECONDS}s)"; tail -4 $OUT/train.txt; cat $OUT/nvtx.0 2>/dev/null | head -12
python3 tests/tensorboard/read_events.py $T/run > $OUT/events.json && python3 -c "import json;d=json.load(open('$OUT/events.json'));print({k:len(v) for k,v in d['scalars'].items()})"
cp $T/run/metrics.csv $T/run/summary.json $OUT/ 2>/dev/null
for t in 0 1; do timeout 60 mpirun -np 1 $B bench --device cuda --hidden 50 $DATA --pool last --steps 3000 --warmup 300 --force \
  --out $W/tr$t.json $([ $t = 1 ] && echo --trace $W/tr.json) 2>&1 | grep -aE "^  cuda" | sed "s/^/trace=$t /"; done | tee $OUT/trace_overhead.txt
