#!/usr/bin/env bash
# Issue 35, item 4: for each data set of inputs/, `ragtrain tune` on its training split (no test data), then the
# tuned recipe (best.ini) trained again on the whole training split for several seeds and scored on the test split,
# by ragtrain (the recipe as tune trained it: its schedule, 1 rank per trial) and by PyTorch with the same options
# (tools/torch_model.py through bench/accuracy.py). One line per set as it finishes; the rows go to
# OUT/accuracy.json as each run ends (bench/accuracy.py's format, tag "tuned-DATE"), each tune's wall time to
# OUT/SET.tune-seconds; bench/tune_table.py OUT turns them into doc/accuracy.md's table (with the shipped recipes'
# rows of bench/results/cpu-2026-12-03/). Started again on the same OUT it continues: a finished tune and the runs
# already in accuracy.json are not repeated, so a run cut off by a time limit is finished by the same command.
# usage, from the repository root, after make:
#   [SETS="plaid gesture-pebble-z1 ..."] [DEVICE=cuda] [NP=8] [SEEDS=1,2,3] [TRIALS=27] [BUDGET_MINUTES=1]
#   [JOBS=6] [EXTRA="--epochs-..."] [OUT=runs/tune-accuracy] [PYTHON=python3] bench/tune_accuracy.sh
# NP ranks run the search, one trial group each (DEVICE=cuda: all NP share one GPU, --trials-per-gpu NP).
# BUDGET_MINUTES bounds each search (no run starts after it; 0: none): a search it cuts is no longer reproducible,
# and summary.json's rungs say how far it got. TUNE_ARGS adds tune options (a space for a quick check:
# TUNE_ARGS="--space tiny.ini"). PYTHON: the first of python3, /usr/bin/python3 with torch and h5py.
set -euo pipefail
BIN=${BIN:-build/bin/ragtrain}
DEVICE=${DEVICE:-cuda}
NP=${NP:-8}
SEEDS=${SEEDS:-1,2,3}
TRIALS=${TRIALS:-27}
BUDGET_MINUTES=${BUDGET_MINUTES:-1}
JOBS=${JOBS:-6}
TUNE_ARGS=${TUNE_ARGS:-}
OUT=${OUT:-runs/tune-accuracy}
SETS=${SETS:-japanese-vowels shake-gesture-wiimote-z pickup-gesture-wiimote-z gesture-pebble-z1 gesture-midair-d1 all-gesture-wiimote-x plaid}
TAG=${TAG:-tuned-$(date -u +%F)}
if [ -z "${PYTHON:-}" ]; then
  for p in python3 /usr/bin/python3; do
    if "$p" -c 'import torch, h5py, numpy' 2>/dev/null; then PYTHON=$p; break; fi
  done
fi
[ -n "${PYTHON:-}" ] || { echo "no python3 with torch, h5py and numpy (set PYTHON=...)"; exit 2; }
[ -x "$BIN" ] || { echo "$BIN: not built (make)"; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mkdir -p "$OUT"
echo "tune_accuracy: sets: $SETS; $NP trial groups on $DEVICE, $TRIALS trials, budget ${BUDGET_MINUTES} min a set, seeds $SEEDS, $PYTHON, tag $TAG"
for set in $SETS; do
  set_start=$(date +%s)
  stem=$(ls inputs/"$set"/*_TRAIN.ts | head -1)
  stem=$(basename "${stem%_TRAIN.ts}")
  [ -e "$OUT/$set-train.h5" ] || "$BIN" convert "inputs/$set/${stem}_TRAIN.ts" "$OUT/$set-train.h5" --quiet
  if [ ! -e "$OUT/$set/summary.json" ]; then
    start=$(date +%s.%N)
    # shellcheck disable=SC2086  # TUNE_ARGS: words
    mpirun -np "$NP" --bind-to none "$BIN" tune --data "$OUT/$set-train.h5" --out "$OUT/$set" --device "$DEVICE" \
      --trials-per-gpu "$NP" --trials "$TRIALS" --budget-minutes "$BUDGET_MINUTES" --seed 1 --quiet $TUNE_ARGS \
      > "$OUT/$set.tune.log" 2>&1 || { echo "$set: tune failed (exit $?), $OUT/$set.tune.log:"; tail -5 "$OUT/$set.tune.log"; continue; }
    # The tune's own wall time, the final model included (a resumed one: this part of it).
    "$PYTHON" -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$start" > "$OUT/$set.tune-seconds"
  fi
  # best.ini's options as --set KEY=VALUE (its seed aside: the seeds are SEEDS), on ragtrain's defaults.
  sets=()
  while IFS= read -r line; do
    key=$(echo "${line%%=*}" | xargs) value=$(echo "${line#*=}" | xargs)
    [ -n "$key" ] && [ "$key" != seed ] && sets+=(--set "$key=$value")
  done < <(grep -v '^#' "$OUT/$set/best.ini")
  # ragtrain-balanced: the recipe's own schedule (best.ini names none: train's default, balanced).
  "$PYTHON" bench/accuracy.py --sets "$set" --no-recipe --tag "$TAG" --np 1 --device "$DEVICE" --bin "$BIN" \
    --variants ragtrain-balanced,torch --seeds "$SEEDS" --jobs "$JOBS" "${sets[@]}" --out "$OUT" --work "$OUT/work" \
    > "$OUT/$set.accuracy.log" 2>&1 || { echo "$set: accuracy runs failed, $OUT/$set.accuracy.log:"; tail -5 "$OUT/$set.accuracy.log"; continue; }
  "$PYTHON" bench/tune_table.py "$OUT" --tag "$TAG" --sets "$set" --line
  echo "    ($set: $(( $(date +%s) - set_start )) s in this call)"
done
"$PYTHON" bench/tune_table.py "$OUT" --tag "$TAG"
