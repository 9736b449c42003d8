# The set-up bench/run_h200.sh and bench/run_fused.sh share; sourced by them once they have set BIN, OUT and WORK.
# It makes the folders, exports the environment of their one-rank GPU runs, defines the data set's options (DATA:
# F=36, 10 classes, lengths uniform 60..130, 2000 sequences, seed 1), opens the log ($LOG = $OUT/bench.log) with the
# script's name, the time, the host and the GPU's state, and writes that data set to $WORK/data.h5 with `ragtrain gen`.
# usage (in a bench script):   . "$(dirname "$0")/bench_common.sh"
mkdir -p "$OUT" "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
DATA=(--features 36 --classes 10 --min-length 60 --max-length 130 --sequences 2000 --seed 1)
LOG=$OUT/bench.log
{
  echo "# $0 $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | tee "$LOG"
"$BIN/ragtrain" gen --force --out "$WORK/data.h5" "${DATA[@]}" 2>&1 | tee -a "$LOG"
