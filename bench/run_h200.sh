#!/usr/bin/env bash
# In ONE device call on the GPU machine: `ragtrain bench --device cuda` for H=50 and H=256 (F=36, 10 classes,
# lengths uniform 60..130, batch one, Adam), the PyTorch reference on the same data, and the cuDNN
# forward+backward floor for the same sequences; then prints them side by side with the targets.
# usage, from the repository root on the GPU machine:   BUILD=build-gpu bench/run_h200.sh
# (build here first: make BUILD=build-gpu PORTABLE=1 bench-gpu, and carry build-gpu/bin). Output goes to $OUT
# (bench.log, summary.txt, summary.json); intermediate files to $WORK.
set -uo pipefail
BUILD=${BUILD:-build}
OUT=${OUT:-runs/bench}
WORK=${WORK:-/tmp/ragtrain-bench}
STEPS=${STEPS:-5000}        # ragtrain timed steps (after WARMUP; the warm-up also captures the per-length graphs)
WARMUP=${WARMUP:-500}
TORCH_STEPS=${TORCH_STEPS:-600}
mkdir -p "$OUT" "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
DATA=(--features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1)
LOG=$OUT/bench.log
{
  echo "# bench/run_h200.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | tee "$LOG"

"$BUILD/bin/ragtrain" gen --out "$WORK/data.h5" "${DATA[@]}" 2>&1 | tee -a "$LOG"
for H in 50 256; do
  echo "## H=$H" | tee -a "$LOG"
  timeout 240 mpirun -np 1 "$BUILD/bin/ragtrain" bench --device cuda --hidden "$H" "${DATA[@]}" --optimizer adam \
    --lr 1e-3 --steps "$STEPS" --warmup "$WARMUP" --out "$WORK/ragtrain_h$H.json" 2>&1 | tee -a "$LOG" "$WORK/ragtrain_h$H.log"
  if [ "$H" = 50 ]; then   # the same without CUDA graphs: what the graphs buy
    RAGTRAIN_CUDA_GRAPHS=0 timeout 240 mpirun -np 1 -x RAGTRAIN_CUDA_GRAPHS "$BUILD/bin/ragtrain" bench --device cuda \
      --hidden "$H" "${DATA[@]}" --optimizer adam --lr 1e-3 --steps "$STEPS" --warmup "$WARMUP" \
      --out "$WORK/ragtrain_nographs_h$H.json" 2>&1 | tee -a "$LOG"
  fi
  timeout 240 python3 bench/torch_reference.py --data "$WORK/data.h5" --hidden "$H" --steps "$TORCH_STEPS" \
    --warmup 100 --out "$WORK/torch_h$H.json" 2>&1 | tee -a "$LOG"
  timeout 240 "$BUILD/bin/cudnn_floor" --hidden "$H" --features 36 --min-length 60 --max-length 130 --seed 1 \
    --sequences 2000 --passes 1 --out "$WORK/floor_h$H.json" 2>&1 | tee -a "$LOG"
done
python3 bench/summarize.py "$WORK" "$OUT/summary.json" 2>&1 | tee "$OUT/summary.txt" | tee -a "$LOG"
