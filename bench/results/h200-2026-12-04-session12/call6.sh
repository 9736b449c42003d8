#!/usr/bin/env bash
# Session 12, call 6: w9 = w7 (main 152bcd0) + the split GEMM's staging a warp per timestep row (addresses once per
# row). The whole GPU suite on w9; A/B w0/w7/w9; ncu durations and the full set of w9's split GEMM; if w9 beats w7 at
# K=128, the issue's table on w9 (TORCH=1 bench/run_fused.sh).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s12
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 150 $C/w9/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w9.log 2>&1; rc=$?
echo "gpu_tests Fused* w9 rc=$rc ${SECONDS}s"
grep -aE "FAILED|tests ran|PASSED|Failure|budget.*K=128 T=96 last" $OUT/gpu_fused_w9.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-330 | head -12
[ $rc = 0 ] || exit 1
SECONDS=0; mkdir -p $OUT/ab
BUILDS="$C/w0 $C/w7 $C/w9" CASES="50:128 50:1" ROUNDS=3 OUT=$OUT/ab bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab/ab.txt; rm -f $OUT/ab/bench.log
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5"
timeout 100 mpirun -np 1 ncu --clock-control none --cache-control none \
  --kernel-name regex:"projection|fused_lstm|weight_grad|split_grad|sums|fused_opt" \
  --metrics gpu__time_duration.sum --launch-skip 100 --launch-count 10 --csv \
  $C/w9/ragtrain bench $B --hidden 50 --batch-per-rank 128 --steps 40 --warmup 5 > /tmp/ncu.csv 2>/dev/null
echo "ncu (no flush) w9 H=50 K=128 rc=$? (ns)"
python3 - /tmp/ncu.csv <<'PY' | tee $OUT/ncu_noflush.txt
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if rows:
    h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
    print("   " + "  ".join(f"{r[k].split('(')[0].split(' ')[-1][:18]}={r[v]}" for r in rows[1:]))
PY
timeout 150 mpirun -np 1 ncu --clock-control none --kernel-name regex:split_grad --launch-skip 20 --launch-count 1 \
  --set full --import-source no --warp-sampling-interval 0 -f -o /tmp/sg $C/w9/ragtrain bench $B --warmup 5 --hidden 50 \
  --batch-per-rank 128 --steps 40 > /tmp/sg.log 2>&1
ncu --import /tmp/sg.ncu-rep --page details > $OUT/ncu_split128_w9_details.txt 2>&1
grep -aE "Duration|Elapsed Cycles|Issue Slots Busy|Warp Cycles Per Issued|Executed Ipc A|Executed Instructions  " $OUT/ncu_split128_w9_details.txt | head -8
ncu --import /tmp/sg.ncu-rep --page source --csv --print-source sass > /tmp/sg_source.csv 2>/dev/null
python3 bench/ncu_stalls.py /tmp/sg_source.csv top 40 > $OUT/ncu_split128_w9_stalls.txt 2>&1; head -16 $OUT/ncu_split128_w9_stalls.txt
better=$(python3 -c "import json; d=json.load(open('$OUT/ab/ab.json'))['h50_k128']; print(int(d['w9']['median'] < d['w7']['median']))")
echo "w9 faster than w7 at K=128: $better"
SECONDS=0
if [ "$better" = 1 ]; then
  timeout 200 $C/w9/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest_w9.log 2>&1
  echo "gpu_tests rest w9 rc=$? ${SECONDS}s"; grep -aE "FAILED|PASSED" $OUT/gpu_rest_w9.log | head -5
  SECONDS=0; mkdir -p $OUT/table
  BIN=$C/w9 TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
  echo "run_fused rc=$? ${SECONDS}s"; cat $OUT/table/summary.txt; rm -f $OUT/table/results.tgz $OUT/table/summary.json
fi
