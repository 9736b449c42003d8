#!/usr/bin/env bash
# Lead's second H200 call (session 5): the final tree after the header split — every GPU test and one K=1 bench.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
D=.devcarry-final; B=$D/ragtrain
ldd $B | grep 'not found'
SECONDS=0
timeout 200 mpirun -np 1 $D/gpu_tests > $OUT/gpu_tests_final.log 2>&1
echo "gpu_tests rc=$? (${SECONDS}s)"; grep -aE "tests ran|PASSED|FAILED" $OUT/gpu_tests_final.log | tail -5
timeout 60 mpirun -np 1 $B bench --device cuda --hidden 50 --features 36 --classes 10 --min-length 60 --max-length 130 \
  --sequences 2000 --seed 1 --optimizer adam --lr 1e-3 --steps 5000 --warmup 500 --force --out $OUT/k1_final.json 2>&1 | tee $OUT/k1_final.txt | grep -E "^  cuda|validity"
