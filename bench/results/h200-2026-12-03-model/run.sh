#!/usr/bin/env bash
# helper "model": GPU tests of the model options, the torch agreement (bidirectional + mean pool), layout costs.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
D=.devcarry-model; B=$D/ragtrain
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ldd $B | grep 'not found'
SECONDS=0
timeout 150 mpirun -np 1 $D/gpu_tests --gtest_filter='GpuModelOptions*:GpuAgreement*:GpuBatch*:GpuBackend*:GpuTraining*:GpuNonfinite*' > $OUT/gpu_tests.log 2>&1
echo "gpu_tests rc=$? (${SECONDS}s)"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure" $OUT/gpu_tests.log | head -30
SECONDS=0
timeout 100 python3 $D/tools/test_torch_agreement.py --bin $B --out /tmp/ta --devices cuda --models bidi_mean > $OUT/torch.log 2>&1
echo "torch rc=$? (${SECONDS}s)"
cp /tmp/ta/torch_agreement.json $OUT/torch_agreement_cuda.json 2>/dev/null
grep -v '^+' $OUT/torch.log | tail -6
bn() { # name env-assignment args...
  local n=$1 e=$2; shift 2
  env $e timeout 30 mpirun -np 1 $B bench --device cuda --hidden 50 --steps 200 "$@" > /tmp/b.txt 2>&1
  echo "== $n ($e $*) rc=$?" >> $OUT/bench.log; cat /tmp/b.txt >> $OUT/bench.log
}
SECONDS=0
bn k32_padded X=1 --batch-per-rank 32
bn k32_ragged RAGTRAIN_CUDA_BATCH_LAYOUT=ragged --batch-per-rank 32
bn k32_bidi X=1 --batch-per-rank 32 --bidirectional
bn k32_mean X=1 --batch-per-rank 32 --pool mean
bn k1_uni X=1
bn k1_bidi X=1 --bidirectional
bn k1_L2 X=1 --layers 2
bn k1_L2_dropout X=1 --layers 2 --dropout 0.2
echo "bench (${SECONDS}s)"
grep -E "^== |^  cuda" $OUT/bench.log
