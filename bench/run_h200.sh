#!/usr/bin/env bash
# The cuDNN path in detail, in ONE device call: `ragtrain bench --device cuda` at H=50 for K = 1, 32 and 128
# sequences per step (F=36, 10 classes, lengths uniform 60..130, 2000 sequences, balanced schedule, Adam), batch one
# also without CUDA graphs, the PyTorch reference on the same data (batch one eager, and pack_padded_sequence at
# K = 32, 128), the cuDNN forward+backward floor for the same batches (cudnn_floor --batch K), and ragtrain at H=256
# for the same K; then prints them side by side with the targets and the per-phase timings.
# usage, from the repository root on the GPU machine:   BIN=build-gpu/bin bench/run_h200.sh
# (build here first: make BUILD=build-gpu PORTABLE=1 bench-gpu, and carry the binaries). Output goes to $OUT
# (bench.log, summary.txt, summary.json); intermediate files to $WORK.
set -uo pipefail
BIN=${BIN:-${BUILD:-build}/bin}
OUT=${OUT:-runs/bench}
WORK=${WORK:-/tmp/ragtrain-bench}
KS=${KS:-1 32 128}
H_EXTRA=${H_EXTRA:-256}     # ragtrain only (no PyTorch, no floor) at these hidden sizes
TORCH_STEPS=${TORCH_STEPS:-600}
FLOOR_ALGO_K1=${FLOOR_ALGO_K1:-persist_static_small_h}   # K=1: 2000 graphs per algorithm; the others are far slower
                                                          # at H=50 (doc/performance.md), so only this one by default
# Folders, environment, DATA, $LOG and $WORK/data.h5; a copy of this script carried elsewhere (e.g. to the GPU
# machine) without bench_common.sh beside it takes the repository's, run from the repository root.
common=$(dirname "$0")/bench_common.sh
[ -f "$common" ] || common=bench/bench_common.sh
. "$common"

# Timed steps per K: enough for ~1 s of steps; the warm-up also captures the per-shape graphs (two epochs' worth).
steps_for() { case $1 in 1) echo 5000 ;; 32) echo 4000 ;; *) echo 3000 ;; esac; }
warmup_for() { case $1 in 1) echo 500 ;; 32) echo 300 ;; *) echo 200 ;; esac; }
torch_steps_for() { case $1 in 1) echo "$TORCH_STEPS" ;; 32) echo 300 ;; *) echo 150 ;; esac; }

ragtrain_bench() {   # H K tag [env...]
  local H=$1 K=$2 tag=$3
  shift 3
  # One local rank: it inherits this environment (RAGTRAIN_CUDA_GRAPHS and friends) from mpirun.
  env "$@" timeout 120 mpirun -np 1 "$BIN/ragtrain" bench --device cuda --pool last --hidden "$H" "${DATA[@]}" --optimizer adam \
    --lr 1e-3 --batch-per-rank "$K" --schedule balanced --steps "$(steps_for "$K")" --warmup "$(warmup_for "$K")" \
    --force --out "$WORK/$tag.json" 2>&1 | tee -a "$LOG" "$WORK/$tag.log"
}
for K in $KS; do
  echo "## H=50 K=$K" | tee -a "$LOG"
  ragtrain_bench 50 "$K" "ragtrain_h50_k$K"
  if [ "$K" = 1 ]; then   # the same without CUDA graphs: what the graphs buy
    ragtrain_bench 50 1 ragtrain_nographs_h50_k1 RAGTRAIN_CUDA_GRAPHS=0
  fi
  timeout 150 python3 bench/torch_reference.py --data "$WORK/data.h5" --hidden 50 --batch "$K" \
    --steps "$(torch_steps_for "$K")" --warmup 30 --out "$WORK/torch_h50_k$K.json" 2>&1 | tee -a "$LOG"
  layouts=both algo=all
  [ "$K" = 1 ] && layouts=padded algo=$FLOOR_ALGO_K1
  timeout 150 "$BIN/cudnn_floor" --hidden 50 --features 36 --min-length 60 --max-length 130 --seed 1 \
    --sequences 2000 --passes 1 --batch "$K" --layouts "$layouts" --algo "$algo" --out "$WORK/floor_h50_k$K.json" 2>&1 | tee -a "$LOG"
done
for H in $H_EXTRA; do
  for K in $KS; do
    echo "## H=$H K=$K" | tee -a "$LOG"
    ragtrain_bench "$H" "$K" "ragtrain_h${H}_k$K"
  done
done
python3 bench/summarize.py "$WORK" "$OUT/summary.json" 2>&1 | tee "$OUT/summary.txt" | tee -a "$LOG"
