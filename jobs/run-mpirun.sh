#!/usr/bin/env bash
# ragtrain training with mpirun, for machines without Slurm (a workstation, a cloud VM with several GPUs): the
# same settings as jobs/train.sbatch, a resume from the newest checkpoint when the run folder has one, and a
# checkpointed stop of every rank when this script gets SIGTERM, SIGINT (Ctrl-C) or SIGUSR1. Exits with
# ragtrain's code: 0 done, 75 checkpointed (run the script again to continue), 2 bad input. doc/hpc.md.
# usage: DATA=train.h5 VAL=val.h5 NP=4 jobs/run-mpirun.sh [more ragtrain train options]

# ---- settings ---------------------------------------------------------------------------------------------
RAGTRAIN=${RAGTRAIN:-build/bin/ragtrain}
DEVICE=${DEVICE:-auto}                     # cuda | cpu | auto: cuda where nvidia-smi lists GPUs and ragtrain has CUDA
NP=${NP:-}                                 # ranks; default: the GPUs nvidia-smi lists (cuda), or 2 (cpu)
MPIRUN=${MPIRUN:-mpirun}
MPIRUN_ARGS=${MPIRUN_ARGS:-}               # e.g. "--oversubscribe" for more ranks than cores, "--hostfile hosts"
DATA=${DATA:-}                             # training set, format v1 (required)
VAL=${VAL:-}
CONFIG=${CONFIG:-}
OUT=${OUT:-runs/ragtrain}
CHECKPOINT_MINUTES=${CHECKPOINT_MINUTES:-30}
CHECKPOINT_EVERY=${CHECKPOINT_EVERY:-0}
KEEP=${KEEP:-3}
# -----------------------------------------------------------------------------------------------------------

[ -n "$DATA" ] || { echo "run-mpirun.sh: set DATA=TRAIN.h5" >&2; exit 2; }
# The binary: RAGTRAIN, else build/bin/ragtrain here (a source folder after make), else `ragtrain` on PATH.
if [ ! -x "$RAGTRAIN" ] && [ "$RAGTRAIN" = build/bin/ragtrain ] && command -v ragtrain >/dev/null; then
  RAGTRAIN=$(command -v ragtrain)
fi
[ -x "$RAGTRAIN" ] || { printf '%s: no ragtrain binary at %s\n  hint: set RAGTRAIN=/path/to/ragtrain, or start it from the source folder after make\n' \
  "run-mpirun.sh" "$RAGTRAIN" >&2; exit 2; }
# DEVICE=auto is decided here rather than passed on: a CPU-only build refuses --device auto, and NP follows the
# decision. cuda needs both a GPU (nvidia-smi lists one) and a binary built with the CUDA backend.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$DEVICE" = auto ]; then
  if [ "${gpus:-0}" -gt 0 ] && "$RAGTRAIN" --version 2>/dev/null | grep -q '^backends:.*cuda'; then DEVICE=cuda; else DEVICE=cpu; fi
  echo "run-mpirun.sh: DEVICE=auto: $DEVICE ($([ "$DEVICE" = cuda ] && echo "$gpus GPU(s) listed by nvidia-smi" ||
    echo "no GPU listed by nvidia-smi, or ragtrain built without CUDA"))"
fi
if [ -z "$NP" ]; then
  if [ "$DEVICE" = cuda ]; then NP=$gpus; fi
  [ "${NP:-0}" -gt 0 ] 2>/dev/null || NP=2
fi

args=(train --data "$DATA" --out "$OUT" --device "$DEVICE" --keep "$KEEP"
      --checkpoint-minutes "$CHECKPOINT_MINUTES" --checkpoint-every "$CHECKPOINT_EVERY")
[ -n "$VAL" ] && args+=(--val "$VAL")
[ -n "$CONFIG" ] && args+=(--config "$CONFIG")
args+=("$@")
if [ -e "$OUT/checkpoint.h5" ]; then args+=(--resume "$OUT"); fi
echo "run-mpirun.sh: $NP rank$([ "$NP" = 1 ] || echo s), $([ -e "$OUT/checkpoint.h5" ] && echo "resuming from $OUT" || echo "fresh start")"

# mpirun in a session of its own, so that Ctrl-C reaches only this script, which turns it into one SIGUSR1:
# mpirun relays SIGUSR1 to every rank, the ranks agree to checkpoint and stop at the next step boundary, and mpirun
# exits 75 as they do. (Ctrl-C or SIGTERM to mpirun itself also reach the ranks, as SIGTERM, and they checkpoint and
# exit 75 too, but Open MPI's mpirun then exits 1: this script would report a failure.)
# shellcheck disable=SC2086   # MPIRUN_ARGS is a list of words on purpose
setsid "$MPIRUN" -np "$NP" $MPIRUN_ARGS "$RAGTRAIN" "${args[@]}" &
launcher=$!
interrupted=0
trap 'interrupted=1; kill -USR1 "$launcher" 2>/dev/null' USR1 TERM INT
while :; do
  interrupted=0
  wait "$launcher"
  rc=$?
  [ "$interrupted" = 1 ] || break
done
[ "$rc" -eq 75 ] && echo "run-mpirun.sh: checkpointed in $OUT; run the same command again to continue"
exit "$rc"
