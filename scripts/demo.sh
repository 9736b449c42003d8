#!/usr/bin/env bash
# `make demo`: synthetic ragged data (the original question's shapes), trained on NP ranks, validation accuracy printed.
set -euo pipefail
BUILD=${1:-build}; NP=${2:-2}
BIN="$BUILD/bin/ragtrain"
DIR="$BUILD/demo"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$DIR"
# The demo regenerates its own (deterministic) data sets each time: --force lets a data set replace a data set.
"$BIN" gen --config inputs/demo.ini --force --out "$DIR/train.h5" --sequences 2000 --seed 1
"$BIN" gen --config inputs/demo.ini --force --out "$DIR/val.h5" --sequences 500 --seed 2
"$BIN" inspect "$DIR/train.h5"
rm -rf "$DIR/run"   # a fresh run each time: train refuses a folder that holds another run's checkpoints
mpirun --oversubscribe -np "$NP" "$BIN" train --config inputs/demo.ini \
  --data "$DIR/train.h5" --val "$DIR/val.h5" --out "$DIR/run"
echo "demo: outputs in $DIR/run (metrics.jsonl, summary.json, checkpoint.h5)"
