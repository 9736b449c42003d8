#!/usr/bin/env bash
# Trials per minute of `ragtrain tune` with 1, 2, 4 (...) trial groups at once on ONE device: on a GPU, that many
# ranks share it (--trials-per-gpu = the rank count); on the CPU (DEVICE=cpu), one rank per core. The same search
# each time (same data, space, seed, trials: the trials and their results do not depend on the group count), so
# only the rungs' wall time changes; the table prints runs/min from each search's summary.json
# (runs trained / search_seconds, the final model aside) and the speed-up over one group.
# usage, from the repository root, after make:
#   [DEVICE=cuda] [TRIAL_GROUPS="1 2 4"] [TRIALS=18] [OUT=runs/tune-concurrency] bench/tune_concurrency.sh
# The data: JapaneseVowels from inputs/ (270 sequences, 12 channels, lengths 7-26), converted into OUT.
set -euo pipefail
BIN=${BIN:-build/bin/ragtrain}
DEVICE=${DEVICE:-cuda}
GROUPS_LIST=${TRIAL_GROUPS:-1 2 4}
TRIALS=${TRIALS:-18}
OUT=${OUT:-runs/tune-concurrency}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mkdir -p "$OUT"
[ -e "$OUT/jv.h5" ] || "$BIN" convert inputs/japanese-vowels/JapaneseVowels_TRAIN.ts "$OUT/jv.h5" --quiet
# Small models, as a search on one GPU mostly trains: the case where one trial leaves the GPU idle most of the time.
cat > "$OUT/space.ini" <<'INI'
hidden = 32 | 64 | 128
layers = 1 | 2
pool = last | mean
lr = 0.002 .. 0.03 log
batch-per-rank = 8
epochs = 18 | 27
INI
printf '# %-7s %-8s %8s %10s %10s %8s\n' device groups runs search_s runs/min speedup
base=""
for g in $GROUPS_LIST; do
  dir=$OUT/g$g
  rm -rf "$dir"
  mpirun -np "$g" "$BIN" tune --data "$OUT/jv.h5" --out "$dir" --space "$OUT/space.ini" --trials "$TRIALS" \
    --device "$DEVICE" --trials-per-gpu "$g" --seed 1 --quiet > "$OUT/g$g.log" 2>&1 || { echo "groups $g failed:"; tail "$OUT/g$g.log"; exit 1; }
  read -r runs secs rpm < <(python3 -c "
import json; s = json.load(open('$dir/summary.json'))
print(s['runs_trained_now'], round(s['search_seconds'], 1), round(s['runs_per_minute'], 1))")
  [ -n "$base" ] || base=$rpm
  printf '  %-7s %-8s %8s %10s %10s %8s\n' "$DEVICE" "$g" "$runs" "$secs" "$rpm" "$(python3 -c "print(round($rpm / $base, 2))")"
done
# Same search, same trials: the rows of trials.csv (times aside) must not depend on the group count.
for g in $GROUPS_LIST; do cut -d, -f1-6,8- "$OUT/g$g/trials.csv" > "$OUT/g$g.trials"; done
first=$(echo $GROUPS_LIST | cut -d' ' -f1)
for g in $GROUPS_LIST; do cmp -s "$OUT/g$first.trials" "$OUT/g$g.trials" || echo "WARNING: trials.csv of $g groups differs from $first's"; done
