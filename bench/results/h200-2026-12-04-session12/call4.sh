#!/usr/bin/env bash
# Session 12, call 4: w6 = w4 (tensor-core split GEMM and projection, main 152bcd0) + the projection partitioned over
# the batch's concatenated timesteps (a block per <= 64 timesteps, W_ih staged once per block). Fused* on w6; A/B
# w0/w4/w6; ncu durations (no cache flush) of w6; an nsys timeline of w6 at K=128 (gaps between the kernels).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s12
mkdir -p build-gpu/lib && cp $C/libnvtx_count.so build-gpu/lib/
SECONDS=0; timeout 150 $C/w6/gpu_tests --gtest_filter='Fused*' > $OUT/gpu_fused_w6.log 2>&1; rc=$?
echo "gpu_tests Fused* w6 rc=$rc ${SECONDS}s"
grep -aE "FAILED|tests ran|PASSED|budget.*T=96 last|Failure" $OUT/gpu_fused_w6.log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-330 | head -30
SECONDS=0
BUILDS="$C/w0 $C/w4 $C/w6" CASES="50:128 50:1 128:1" ROUNDS=2 OUT=$OUT bench/ab_fused.sh > /dev/null 2>&1
echo "ab rc=$? ${SECONDS}s"; cat $OUT/ab.txt
$C/w0/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5"
for WK in w6:128 w6:1; do
  W=${WK%%:*} K=${WK##*:}
  timeout 100 mpirun -np 1 ncu --clock-control none --cache-control none \
    --kernel-name regex:"projection|fused_lstm|weight_grad|split_grad|sums|fused_opt" \
    --metrics gpu__time_duration.sum --launch-skip 100 --launch-count 10 --csv \
    $C/$W/ragtrain bench $B --hidden 50 --batch-per-rank $K --steps 40 --warmup 5 > /tmp/ncu.csv 2>/dev/null
  echo "ncu (no flush) $W H=50 K=$K rc=$? (ns)"
  python3 - /tmp/ncu.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if rows:
    h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
    print("   " + "  ".join(f"{r[k].split('(')[0].split(' ')[-1][:18]}={r[v]}" for r in rows[1:]))
PY
done 2>&1 | tee $OUT/ncu_noflush.txt
SECONDS=0
which nsys || ls /usr/local/cuda/bin | grep -i nsys
timeout 120 nsys profile -t cuda -o /tmp/tl -f true mpirun -np 1 $C/w6/ragtrain bench $B --hidden 50 --batch-per-rank 128 \
  --steps 400 --warmup 50 --out /tmp/tl.json > /tmp/tl.log 2>&1
echo "nsys rc=$? ${SECONDS}s"; tail -3 /tmp/tl.log
nsys stats --report cuda_gpu_trace --format csv -o /tmp/tr /tmp/tl.nsys-rep > /dev/null 2>&1
ls /tmp/tr* 2>/dev/null
python3 - /tmp/tr_cuda_gpu_trace.csv <<'PY' | tee $OUT/timeline.txt
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(len(rows), "rows; columns:", list(rows[0].keys())[:8] if rows else None)
st = [r for r in rows]
start = len(st) * 3 // 4   # late in the run
prev_end = None
for r in st[start:start + 40]:
    s = int(r["Start (ns)"]); d = int(r["Duration (ns)"]); name = r["Name"][:40]
    gap = (s - prev_end) if prev_end is not None else 0
    print(f"{s/1000:12.1f} +{d/1000:7.1f} us  gap {gap/1000:6.1f}  {name}")
    prev_end = s + d
PY
