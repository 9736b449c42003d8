#!/usr/bin/env bash
# Session 9, call 1: where a step's time goes on main (w21): per-kernel durations (ncu, serialized) for the three
# target cases, and ncu's full set on the K=128 weight-gradient GEMM, the sums kernel and the H=128 projection.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=.devcarry-s9
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
which nsys ncu; ls /usr/local/cuda/bin | grep -i nsys
$C/w21/ragtrain gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1 > /dev/null
B="--device cuda --lstm fused --pool last --data /tmp/d.h5 --optimizer adam --lr 1e-3 --warmup 5"
dur() {  # name H K
  SECONDS=0
  timeout 120 mpirun -np 1 ncu --clock-control none --metrics gpu__time_duration.sum,sm__cycles_elapsed.max --launch-skip 300 --launch-count 24 --csv \
    $C/w21/ragtrain bench $B --hidden $2 --batch-per-rank $3 --steps 100 > /tmp/$1.csv 2>/tmp/$1.err
  echo "ncu $1 rc=$? ${SECONDS}s"
  python3 - /tmp/$1.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
hdr = rows[0]; ki = hdr.index("Kernel Name"); mi = hdr.index("Metric Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit"); ii = hdr.index("ID")
d = collections.OrderedDict()
for r in rows[1:]:
    d.setdefault((r[ii], r[ki][:60]), {})[r[mi]] = (r[vi], r[ui])
for (i, k), m in d.items():
    print(f"  {i:>4} {k:<60} " + "  ".join(f"{n.split('__')[1]}={v} {u}" for n, (v, u) in m.items()))
PY
}
dur d50 50 1 | tee $OUT/dur_50_1.txt
dur d128 128 1 | tee $OUT/dur_128_1.txt
dur d50k 50 128 | tee $OUT/dur_50_128.txt
full() {  # name kernel-regex H K
  SECONDS=0
  timeout 120 mpirun -np 1 ncu --clock-control none --kernel-name regex:$2 --launch-skip 20 --launch-count 1 \
    --set full --warp-sampling-interval 0 -f -o /tmp/$1 $C/w21/ragtrain bench $B --hidden $3 --batch-per-rank $4 --steps 40 > /tmp/$1.log 2>&1
  echo "ncu $1 rc=$? ${SECONDS}s"
  ncu --import /tmp/$1.ncu-rep --page details > $OUT/$1_details.txt 2>&1
  grep -aE "Duration|Elapsed Cycles|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occ|L2 Hit|Memory Throughput|DRAM Through" $OUT/$1_details.txt | head -14
  ncu --import /tmp/$1.ncu-rep --page source --csv --print-source sass > /tmp/$1_source.csv 2>/dev/null
  python3 bench/ncu_stalls.py /tmp/$1_source.csv top 25 > $OUT/$1_stalls.txt 2>&1; head -30 $OUT/$1_stalls.txt
}
full wg128 weight_grad 50 128
full sums128 sums_kernel 50 128
full proj128 projection 128 1
