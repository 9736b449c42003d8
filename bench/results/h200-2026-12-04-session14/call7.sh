#!/usr/bin/env bash
# Session 14, call 7 (final): w8 = main 1e1... (the split matvecs, load_if, select-free exchanges, the backward's
# factors before its matvec). The whole GPU suite on w8; the issue's table (TORCH=1 bench/run_fused.sh); ragtrain train
# fused / cudnn / cpu agreement at K=4 and K=24; kernel timelines at H=50 K=1 and K=128.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s14
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/ 2>/dev/null
SECONDS=0; timeout 150 $C/w8/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w8.log 2>&1; rc=$?
echo "gpu_tests Fused* w8 rc=$rc ${SECONDS}s"; grep -aE "FAILED|PASSED|budget.*H=50 K=(1|128) T=96 last" $OUT/gpu_fused_w8.log | cut -c1-300 | head -8
[ $rc = 0 ] || exit 1
SECONDS=0; timeout 200 $C/w8/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_w8.log 2>&1; rc=$?
echo "gpu_tests rest w8 rc=$rc ${SECONDS}s"; grep -aE "FAILED|PASSED" $OUT/gpu_rest_w8.log | head -5
[ $rc = 0 ] || exit 1
SECONDS=0; mkdir -p $OUT/table
BIN=$C/w8 TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
echo "run_fused w8 rc=$? ${SECONDS}s"; cat $OUT/table/summary.txt; rm -f $OUT/table/results.tgz
R=$C/w8/ragtrain; W=/tmp/c7; rm -rf $W; mkdir -p $W
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
import json, sys
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
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
$R gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5 --hidden 50"
for K in 1 128; do
  KT_OUT=/tmp/kt_$K.csv KT_KEEP=40000 CUDA_INJECTION64_PATH=$PWD/$C/lib/libkernel_timeline.so timeout 100 \
    mpirun -np 1 -x KT_OUT -x KT_KEEP -x CUDA_INJECTION64_PATH -x LD_LIBRARY_PATH $R bench $B \
    --batch-per-rank $K --steps 2000 --warmup 300 --out /tmp/kt_$K.json 2>&1 | grep -aE "^  cuda" | head -2
  python3 bench/timeline_summary.py /tmp/kt_$K.csv --steps 400 --json $OUT/timeline_w8_k$K.json > $OUT/timeline_w8_k$K.txt
  head -12 $OUT/timeline_w8_k$K.txt
done
