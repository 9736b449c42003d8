#!/usr/bin/env bash
# Session 14, call 1 (was session 13 call13_not_run.sh): the trainer with steps launched ahead, end to end on the H200 (main 71bdc8b): `ragtrain train`
# with --lstm fused, --lstm cudnn and --device cpu on the same data (4 epochs, validation after each), at K=4 (the
# streaming GEMM) and K=24 (device slot tables, split GEMM, an uneven last step): the per-epoch losses must agree.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
R=.devcarry-s14/w0/ragtrain; W=/tmp/c13; rm -rf $W; mkdir -p $W
$R gen --out $W/t.h5 --features 12 --classes 5 --min-length 10 --max-length 60 --sequences 300 --seed 3 > /dev/null
$R gen --out $W/v.h5 --features 12 --classes 5 --min-length 10 --max-length 60 --sequences 100 --seed 4 > /dev/null
for K in 4 24; do
  for dev in "cuda --lstm fused" "cuda --lstm cudnn" "cpu"; do
    tag=$(echo $dev | tr -d ' -' | sed 's/cudalstm//')_k$K
    timeout 100 mpirun -np 1 $R train --device $dev --data $W/t.h5 --val $W/v.h5 --epochs 4 --batch-per-rank $K \
      --pool last --optimizer adam --lr 3e-3 --hidden 50 --out $W/run_$tag --seed 1 > $W/log_$tag.txt 2>&1
    echo "$tag rc=$? $(grep -a 'validation accuracy' $W/log_$tag.txt)"
  done
done
python3 - $W <<'PY' | tee $OUT/train_agreement.txt
import json, sys, glob, os
w = sys.argv[1]
for K in (4, 24):
    runs = {}
    for tag in ("fused", "cudnn", "cpu"):
        eps = [json.loads(l) for l in open(f"{w}/run_{tag}_k{K}/metrics.jsonl") if '"event":"epoch"' in l]
        runs[tag] = [(e["train_loss"], e["val_loss"]) for e in eps]
    print(f"K={K}")
    for tag, v in runs.items(): print(f"  {tag:6s} " + "  ".join(f"{a:.7f}/{b:.7f}" for a, b in v))
    for tag in ("fused", "cudnn"):
        d = max(max(abs(a[i] - b[i]) / abs(b[i]) for i in (0, 1)) for a, b in zip(runs[tag], runs["cpu"]))
        print(f"  {tag} vs cpu: max relative difference of the epoch train/val losses {d:.2e}")
PY
cp $W/log_fused_k24.txt $OUT/
# A/B: w0 = main (365ed95), w1 = main + the optimizer as the cooperative grid at K > 16 (exp/opt-coop)
C=.devcarry-s14
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w0 $C/w1" CASES="50:128 50:24" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
SECONDS=0; timeout 150 $C/w1/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w1.log 2>&1; rc=$?
echo "gpu_tests Fused* w1 rc=$rc ${SECONDS}s"
grep -aE "FAILED|PASSED|Failure" $OUT/gpu_fused_w1.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-260 | head -8
