#!/usr/bin/env bash
# Session 8, call 1. Builds: w13 = sampled phase events + the cluster optimizer with programmatic dependent launch +
# the projection staging its features before its wait; w14 = w13 + the streaming weight-gradient GEMM (one-block kernel); w15 = w14 + streaming in the cluster kernel (per-warp progress); w16 = w15 + the head's
# gradients written after the backward + one sums kernel (PDL) at K > 1; old = main before this session.
# Smoke, GPU suite (w16), the issue-14 bench for w16, w15, old, then whether ncu reads counters.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s8
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; uname -r
ldd $C/w16/ragtrain $C/w16/gpu_tests $C/old/ragtrain | grep 'not found'
mkdir -p build-gpu/lib && cp $C/w13/libnvtx_count.so build-gpu/lib/
$C/w16/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
for b in w16; do for hk in "50 1" "128 1" "50 128"; do set -- $hk
  timeout 40 mpirun -np 1 $C/$b/ragtrain bench --device cuda --lstm fused --pool last --hidden $1 --batch-per-rank $2 \
    --data /tmp/d.h5 --optimizer adam --steps 200 --warmup 20 --schedule balanced 2>&1 | grep -aE "^ +cuda|rror" | head -3
  echo "smoke $b H=$1 K=$2 rc=${PIPESTATUS[0]}"
done; done
SECONDS=0; timeout 100 mpirun -np 1 $C/w16/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused.log 2>&1; echo "gpu_tests Fused* rc=$? ${SECONDS}s"
grep -aE "PASSED|FAILED|tests ran" $OUT/gpu_fused.log | sed 's/\x1b\[[0-9;]*m//g' | head -12
grep -aE "cycles|budget" $OUT/gpu_fused.log | head -12
SECONDS=0; timeout 150 mpirun -np 1 $C/w16/gpu_tests --gtest_filter='-Fused*' > $OUT/gpu_rest.log 2>&1; echo "gpu_tests rest rc=$? ${SECONDS}s"
grep -aE "PASSED|FAILED|tests ran" $OUT/gpu_rest.log | sed 's/\x1b\[[0-9;]*m//g' | head -12
for b in w16 w15 old; do
  SECONDS=0
  BIN=$C/$b TORCH=0 OUT=/tmp/out_$b WORK=/tmp/w_$b timeout 170 bash bench/run_fused.sh > /dev/null 2>&1
  echo "bench $b rc=$? ${SECONDS}s"; cat /tmp/out_$b/summary.txt
  cp /tmp/out_$b/bench.log $OUT/bench_$b.log
done
which ncu; ncu --version | tail -1
SECONDS=0
timeout 100 mpirun -np 1 ncu --clock-control none --kernel-name regex:fused_lstm_kernel --launch-skip 40 --launch-count 1 \
  --set full -f -o /tmp/rec $C/w16/ragtrain bench --device cuda --lstm fused --pool last --hidden 50 \
  --data /tmp/d.h5 --optimizer adam --lr 1e-3 --steps 60 --warmup 5 > $OUT/ncu_run.log 2>&1
echo "ncu rc=$? ${SECONDS}s"; grep -a "==PROF==\|==ERROR==\|==WARNING==" $OUT/ncu_run.log | head -5
if [ -f /tmp/rec.ncu-rep ]; then
  ncu --import /tmp/rec.ncu-rep --page details > $OUT/ncu_details.txt 2>&1
  grep -aE "Duration|Elapsed Cycles|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers" $OUT/ncu_details.txt | head -20
  ncu --import /tmp/rec.ncu-rep --page raw --csv 2>/dev/null > /tmp/raw.csv
  python3 - <<'PY'
import csv
rows=list(csv.reader(open('/tmp/raw.csv'))); h=rows[0]; v=rows[-1]
out=[]
for k,x in zip(h,v):
  if 'pcsamp_warps_issue_stalled' in k and not k.endswith('not_issued'):
    try: out.append((float(x.replace(',','')),k))
    except ValueError: pass
for val,k in sorted(out,reverse=True)[:20]: print(f"{val:12.0f} {k}")
PY
fi
