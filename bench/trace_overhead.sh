#!/usr/bin/env bash
# The cost of `--trace` (doc/performance.md, "Timeline"): bench's timed steps with and without it, alternating so
# that a change of machine load hits both, REPEATS times each, for two workloads: the question's model
# (F=36, H=50, lengths 60-130) and a tiny one (F=4, H=8, lengths 5-20), where a step is shortest and the
# recording's share largest. Prints every run's sequences/s and the medians.
# usage: bench/trace_overhead.sh [BUILD] [NP] [REPEATS] [DEVICE]     (DEVICE: cpu, the default, or cuda)
set -euo pipefail
BUILD=${1:-build}
NP=${2:-2}
REPEATS=${3:-5}
DEVICE=${4:-cpu}
BIN="$BUILD/bin/ragtrain"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
seq_s() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sequences_per_second"])' "$1"; }
for workload in "question:--features 36 --hidden 50 --min-length 60 --max-length 130 --steps 300 --warmup 20" \
                "tiny:--features 4 --hidden 8 --min-length 5 --max-length 20 --steps 3000 --warmup 100"; do
  name=${workload%%:*}; args=${workload#*:}
  : > "$tmp/off"; : > "$tmp/on"
  for i in $(seq "$REPEATS"); do
    for mode in off on; do
      extra=""; [ "$mode" = on ] && extra="--trace $tmp/t$i.json"
      # shellcheck disable=SC2086
      mpirun --oversubscribe -np "$NP" "$BIN" bench $args --device "$DEVICE" --sequences 1000 --quiet --force --out "$tmp/r.json" $extra >/dev/null
      s=$(seq_s "$tmp/r.json"); echo "$s" >> "$tmp/$mode"
      echo "$name repeat $i trace $mode: $s seq/s"
    done
  done
  off=$(median < "$tmp/off"); on=$(median < "$tmp/on")
  echo "$name: median $off seq/s without --trace, $on with (ratio $(python3 -c "print(round($on / $off, 4))"))"
done
