#!/usr/bin/env bash
# Lead's H200 call B, session 6: the PLAID row of doc/accuracy.md (too long for the shared CPU machine): ragtrain
# on one GPU rank with the recipe's global batch (2 x 16; the schedule's batches do not depend on the split) and
# PyTorch (tools/torch_model.py) on the GPU, seeds 1-6.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
D=.devcarry; B=$PWD/$D/ragtrain
mkdir -p $OUT/acc; cp bench/results/accuracy-2026-12-03/accuracy.json $OUT/acc/accuracy.json
SECONDS=0
timeout ${AT:-420} python3 bench/accuracy.py --device cuda --bin $B --sets plaid --seeds ${SEEDS:-1,2,3,4,5,6} \
  --variants ragtrain-random,ragtrain-balanced,torch --jobs ${JOBS:-4} --out $OUT/acc --work /tmp/aw > $OUT/acc/log.txt 2>&1
echo "accuracy rc=$? (${SECONDS}s)"; grep -a "plaid" $OUT/acc/log.txt | tail -20
