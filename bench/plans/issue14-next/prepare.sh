#!/usr/bin/env bash
# Builds, here, every binary the next device calls for issue 14 need (README.md beside this file), from main's HEAD
# and the patches beside this script, into $CARRY (default .devcarry-next, which .git/info/exclude must ignore): one
# folder per build with its stripped `ragtrain` (for the builds named in $RAGTRAIN: the A/B) and `gpu_tests` (those
# in $TESTS: FusedBudget, the GPU suite), xz-compressed ("all" names every build), plus libnvtx_count.so for the
# GPU suite's NVTX test. The defaults are call 1's (~39 MB: with the ~21 MB tree inside the 64 MiB that travel).
# For call 2 (call2.sh's header): CARRY=.devcarry-call2 BUILDS="w0: ..." RAGTRAIN=all TESTS="..." prepare.sh
# usage, from the repository root after `make BUILD=build-gpu PORTABLE=1 build-gpu/bin/ragtrain build-gpu/bin/gpu_tests`
# (main's objects are copied, so that only the patched files compile again):   bench/plans/issue14-next/prepare.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(git rev-parse --show-toplevel)
CARRY=${CARRY:-$root/.devcarry-next}
BUILDS=${BUILDS:-"w0: d1:d1-diag-cycles v8a:v8a-head-beside-weights v8b:v8b-head-apart v8c:v8c-head-apart-two-branches v8d:v8d-weights-two-branches v8e:v8e-head-unroll1 v8f:v8f-head-unroll4 v8g:v8g-reads-slices-outer v8h:v8h-head-unroll1-reads-slices-outer v8i:v8i-head-unroll4-reads-slices-outer v8j:v8j-head-loads-first v8k:v8k-head-loads-first-reads-slices-outer v2b:v2b-speculative-wide v3:v3-projection-compact v6:v6-gemm-done-flags v23:v2b-speculative-wide,v3-projection-compact v236:v2b-speculative-wide,v3-projection-compact,v6-gemm-done-flags v37:v3-projection-compact,v7-early-recurrence v2367:v2367-combined"}
RAGTRAIN=${RAGTRAIN:-"w0 v2b v3 v6 v23 v236 v37 v2367"}
TESTS=${TESTS:-all}
named() { [ "$2" = all ] || [[ " $2 " == *" $1 "* ]]; }   # build $1 in list $2
[ -x "$root/build-gpu/bin/ragtrain" ] || { echo "prepare.sh: build main first (see usage)" >&2; exit 2; }
mkdir -p "$CARRY"
make -C "$root" BUILD=build-gpu PORTABLE=1 CXX="${CXX:-g++}" build-gpu/lib/libnvtx_count.so > /dev/null
cp "$root/build-gpu/lib/libnvtx_count.so" "$CARRY/"
for spec in $BUILDS; do
  name=${spec%%:*} patches=${spec#*:}
  tmp=$(mktemp -d)
  wt=$tmp/$name
  git -C "$root" worktree add -q --detach "$wt" HEAD
  trap 'git -C "$root" worktree remove --force "$wt"; rm -rf "$tmp"' EXIT   # also when a patch or the build fails
  for p in ${patches//,/ }; do git -C "$wt" apply "$here/$p.patch"; done
  cp -a "$root/build-gpu" "$wt/"
  # The copied objects newer than the fresh checkout, then the patched files newer than them: make rebuilds only
  # what the patches touch (and what includes it).
  find "$wt/build-gpu" -type f -exec touch {} +
  git -C "$wt" diff --name-only | xargs -r -I{} touch "$wt/{}"
  make -C "$wt" BUILD=build-gpu PORTABLE=1 CXX="${CXX:-g++}" -j2 build-gpu/bin/ragtrain build-gpu/bin/gpu_tests \
    > "$CARRY/build-$name.log" 2>&1 || { echo "prepare.sh: $name failed to build ($CARRY/build-$name.log)" >&2; exit 1; }
  mkdir -p "$CARRY/$name"
  bins=""
  if named "$name" "$RAGTRAIN"; then bins=ragtrain; fi
  if named "$name" "$TESTS"; then bins="$bins gpu_tests"; fi
  [ -n "$bins" ] || { echo "prepare.sh: $name is in neither \$RAGTRAIN nor \$TESTS" >&2; exit 2; }
  for b in $bins; do
    strip -o "$CARRY/$name/$b" "$wt/build-gpu/bin/$b"
    xz -f -T2 -6 "$CARRY/$name/$b"
  done
  git -C "$root" worktree remove --force "$wt"
  rm -rf "$tmp"
  trap - EXIT
  echo "prepare.sh: $name ($patches) -> $CARRY/$name"
done
du -sh "$CARRY"
