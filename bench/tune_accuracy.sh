#!/usr/bin/env bash
# Issue 35, item 4: for each data set of inputs/, `ragtrain tune` on its training split (no test data), then the
# tuned recipe (best.ini) trained again on the whole training split for several seeds and scored on the test split,
# by ragtrain (the recipe as tune trained it: its schedule, 1 rank per trial) and by PyTorch with the same options
# (tools/torch_model.py through bench/accuracy.py). The rows go to OUT/accuracy.json (bench/accuracy.py's format,
# tag "tuned-DATE"); the shipped recipes' rows are in bench/results/cpu-2026-12-03/ to compare with.
# usage, from the repository root, after make:
#   [SETS="plaid gesture-pebble-z1 ..."] [DEVICE=cuda] [NP=4] [SEEDS=1,2,3] [OUT=runs/tune-accuracy] bench/tune_accuracy.sh
# NP ranks run the search (DEVICE=cuda: NP trial groups share one GPU, --trials-per-gpu NP).
set -euo pipefail
BIN=${BIN:-build/bin/ragtrain}
DEVICE=${DEVICE:-cuda}
NP=${NP:-4}
SEEDS=${SEEDS:-1,2,3}
OUT=${OUT:-runs/tune-accuracy}
SETS=${SETS:-japanese-vowels shake-gesture-wiimote-z pickup-gesture-wiimote-z gesture-pebble-z1 gesture-midair-d1 all-gesture-wiimote-x plaid}
TAG=${TAG:-tuned-$(date -u +%F)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mkdir -p "$OUT"
for set in $SETS; do
  stem=$(ls inputs/"$set"/*_TRAIN.ts | head -1)
  stem=$(basename "${stem%_TRAIN.ts}")
  [ -e "$OUT/$set-train.h5" ] || "$BIN" convert "inputs/$set/${stem}_TRAIN.ts" "$OUT/$set-train.h5" --quiet
  start=$(date +%s)
  mpirun -np "$NP" "$BIN" tune --data "$OUT/$set-train.h5" --out "$OUT/$set" --device "$DEVICE" \
    --trials-per-gpu "$NP" --quiet > "$OUT/$set.tune.log" 2>&1 || { echo "$set: tune failed"; tail "$OUT/$set.tune.log"; exit 1; }
  echo "$set: tune took $(( $(date +%s) - start )) s (a resumed search: the rest of it); best.ini:"
  grep -v '^#' "$OUT/$set/best.ini" | sed 's/^/    /'
  # best.ini's options as --set KEY=VALUE (its seed aside: the seeds are SEEDS), on ragtrain's defaults.
  sets=()
  while IFS= read -r line; do
    key=$(echo "${line%%=*}" | xargs) value=$(echo "${line#*=}" | xargs)
    [ -n "$key" ] && [ "$key" != seed ] && sets+=(--set "$key=$value")
  done < <(grep -v '^#' "$OUT/$set/best.ini")
  # ragtrain-balanced: the recipe's own schedule (best.ini names none: train's default, balanced).
  /usr/bin/python3 bench/accuracy.py --sets "$set" --no-recipe --tag "$TAG" --np 1 --device "$DEVICE" \
    --variants ragtrain-balanced,torch --seeds "$SEEDS" "${sets[@]}" --out "$OUT" --work "$OUT/work"
done
