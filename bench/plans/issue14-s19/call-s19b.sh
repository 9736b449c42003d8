#!/usr/bin/env bash
# Issue 14, session 19's follow-up call, issued at once after call-s19.sh while the machine is still warm (it stays
# 30 s), carrying the same .devcarry-s19 (its binaries are unpacked already on that machine; unpacked again here if
# not). B: the build call-s19.sh ranked first.
#   MODE=table B=v9bde bash bench/plans/issue14-s19/call-s19b.sh   (the A/B gained >= 1.3 us, the table or the rest
#                                                                    of the suite did not fit call-s19's 540 s)
#   MODE=ncu B=v9bde bash bench/plans/issue14-s19/call-s19b.sh     (no build gained enough: where the warps of the
#                                                                    recurrence wait, w0 against B, for the next plan)
start=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
C=${C:-.devcarry-s19}
B=${B:?set B to the build}
for d in w0 "$B"; do
  for f in "$C/$d"/*.xz; do [ -x "${f%.xz}" ] || { xz -dkf -T0 "$f" && chmod +x "${f%.xz}"; }; done
done
mkdir -p build-gpu/lib && cp "$C/libnvtx_count.so" build-gpu/lib/ 2>/dev/null
if [ "${MODE:-ncu}" = table ]; then
  SECONDS=0; mkdir -p "$OUT/table"
  BIN=$C/$B TORCH=1 OUT=$OUT/table bench/run_fused.sh > /dev/null 2>&1
  echo "run_fused $B rc=$? ${SECONDS}s"; cat "$OUT/table/summary.txt"; rm -f "$OUT/table/results.tgz"
  SECONDS=0; timeout 240 "$C/$B/gpu_tests" --gtest_filter='-Fused*' > "$OUT/gpu_rest_$B.log" 2>&1
  echo "gpu_tests rest $B rc=$? ${SECONDS}s"; grep -aE "FAILED|PASSED" "$OUT/gpu_rest_$B.log" | head -6
  SECONDS=0; mkdir -p "$OUT/ab2"
  BUILDS="$C/w0 $C/$B" CASES="50:1 50:128 128:1" ROUNDS=2 OUT=$OUT/ab2 bench/ab_fused.sh > /dev/null 2>&1
  echo "ab2 rc=$? ${SECONDS}s"; cat "$OUT/ab2/ab.txt"; rm -f "$OUT/ab2/bench.log"
else
  # ncu's stall samples of the one-block recurrence at H=50 K=1 (one launch after 20), as session 14's call 8.
  "$C/w0/ragtrain" gen --force --out /tmp/d.h5 --features 36 --classes 10 --min-length 60 --max-length 130 \
    --sequences 2000 --seed 1 > /dev/null
  A="--device cuda --lstm fused --pool last --optimizer adam --lr 1e-3 --schedule balanced --data /tmp/d.h5 --hidden 50"
  for d in w0 "$B"; do
    SECONDS=0
    timeout 200 mpirun -np 1 ncu --clock-control none --cache-control none --kernel-name regex:fused_lstm_kernel \
      --launch-skip 20 --launch-count 1 --set full --import-source no --warp-sampling-interval 0 -f -o "/tmp/rec_$d" \
      "$C/$d/ragtrain" bench $A --warmup 5 --batch-per-rank 1 --steps 40 --out "/tmp/ncu_$d.json" > "/tmp/rec_$d.log" 2>&1
    echo "ncu $d rc=$? ${SECONDS}s"
    ncu --import "/tmp/rec_$d.ncu-rep" --page details > "$OUT/ncu_rec_${d}_details.txt" 2>&1
    grep -aE "Duration|Elapsed Cycles|Issue Slots Busy|Registers Per|Executed Instructions  " \
      "$OUT/ncu_rec_${d}_details.txt" | head -6
    ncu --import "/tmp/rec_$d.ncu-rep" --page source --csv --print-source sass > "/tmp/rec_${d}_source.csv" 2>/dev/null
    python3 bench/ncu_stalls.py "/tmp/rec_${d}_source.csv" top 80 > "$OUT/ncu_rec_${d}_stalls.txt" 2>&1
    head -14 "$OUT/ncu_rec_${d}_stalls.txt"
    gzip -c "/tmp/rec_${d}_source.csv" > "$OUT/ncu_rec_${d}_source.csv.gz"
  done
fi
echo "done at $(( $(date +%s) - start )) s"
