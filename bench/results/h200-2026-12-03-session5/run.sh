#!/usr/bin/env bash
# Lead's final H200 call for session 5: every GPU test, PyTorch agreement on CUDA, the seed workload's speed
# (regression check against 5,704 seq/s), and the new model options' cost. Logs under $OUT.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
D=.devcarry-final; B=$D/ragtrain; W=/tmp/w; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
ldd $B | grep 'not found'
SECONDS=0
timeout 260 mpirun -np 1 $D/gpu_tests > $OUT/gpu_tests.log 2>&1
echo "gpu_tests rc=$? (${SECONDS}s)"; grep -E "^\[  (PASSED|FAILED)|tests ran" $OUT/gpu_tests.log | head -20
SECONDS=0
timeout 110 python3 tools/test_torch_agreement.py --bin $B --out $W/ta --devices cuda > $OUT/torch.log 2>&1
echo "torch rc=$? (${SECONDS}s)"; cp $W/ta/torch_agreement.json $OUT/torch_agreement_cuda.json 2>/dev/null
grep -v '^+' $OUT/torch.log | tail -8
DATA="--features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1"
bn() { local n=$1 s=$2 w=$3; shift 3
  timeout 60 mpirun -np 1 $B bench --device cuda --hidden 50 $DATA --optimizer adam --lr 1e-3 --steps $s --warmup $w \
    --force --out $W/$n.json "$@" > $W/$n.txt 2>&1; echo "== $n rc=$? $*" >> $OUT/bench.log; cat $W/$n.txt >> $OUT/bench.log; }
SECONDS=0
bn k1 5000 500
bn k1_cudnn 5000 500 --lstm cudnn
bn k1_fused 5000 500 --lstm fused
bn k32 4000 300 --batch-per-rank 32
bn k128 3000 200 --batch-per-rank 128
bn k1_bidi_mean 3000 300 --bidirectional --pool mean
bn k1_L2_drop 3000 300 --layers 2 --dropout 0.2
echo "bench (${SECONDS}s)"; grep -E "^== |^  cuda" $OUT/bench.log
SECONDS=0
$B convert --force inputs/japanese-vowels/JapaneseVowels_TRAIN.ts $W/jv-train.h5 >/dev/null
$B convert --force --class-names-from $W/jv-train.h5 inputs/japanese-vowels/JapaneseVowels_TEST.ts $W/jv-test.h5 >/dev/null
for s in 1 2 3; do timeout 60 mpirun -np 1 $B train --config inputs/japanese-vowels.ini --device cuda --batch-per-rank 8 --data $W/jv-train.h5 \
  --val $W/jv-test.h5 --out $W/jv$s --seed $s --quiet > $W/jv$s.txt 2>&1; echo "jv cuda seed $s rc=$? $(tail -1 $W/jv$s.txt)"; done | tee $OUT/jv_cuda.log
echo "jv (${SECONDS}s)"
cp $W/*.json $OUT/ 2>/dev/null; ls $OUT | head
