#!/usr/bin/env bash
# Runs every test suite and ends with one line "N passed, N failed, N skipped".
# usage: scripts/run-tests.sh BUILD_DIR [SUITE]   (SUITE: one of those below; all of them without it)
# Suites: unit (one process), mpi (the same binary under mpirun -np 1..4 --oversubscribe), e2e (the ragtrain binary
# driven as a user would, bad inputs on several ranks included; two shards at once), jobs (the jobs/ scripts:
# mpirun launcher, and sbatch on a single-node Slurm the suite starts and stops; skipped with the reason where Slurm
# is missing),
# fuzz (the libFuzzer targets of tests/fuzz, FUZZ_SECONDS each), torch (ragtrain against PyTorch: tests/torch/run.sh,
# the agreement of training and predictions, the interop round trip for every --normalize and --pool; skipped without
# torch), doc (doc/tutorial.md's commands, their printed output compared; doc/from-pytorch.md's worked example, run
# as written, skipped without torch), build (tests/build: the Makefile's MPI/HDF5 detection, a
# build against a relocated MPI and HDF5 as modules provide them, `make install`, no function in src/ over 150
# lines), gpu (built with CUDA; skipped without a GPU).
set -u
BUILD=${1:-build}
ONLY=${2:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export RAGTRAIN_BIN="$BUILD/bin/ragtrain" GTEST_COLOR=no
# For sanitizer builds (make test SANITIZE=address,undefined; harmless otherwise): undefined behaviour fails the
# test that hit it, and leaks fail it too, except Open MPI's and HDF5's own, suppressed by library name. Open MPI
# unloads its plugins at MPI_Finalize: only the slow unwinder finds the libmpi frames above their allocations.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:fast_unwind_on_malloc=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tests/sanitizers/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# The suites that start dozens of MPI jobs of the ragtrain binary (e2e, jobs) run it without leak detection
# under sanitizers: LSan needs the slow unwinder for Open MPI's allocations, which makes every start ~7x slower,
# and its scan at exit spreads the ranks' exits so far apart that mpirun (or srun --kill-on-bad-exit) kills
# the late ones before they report their exit code. ASan and UBSan stay on; unit and mpi check leaks.
NO_LEAKS=()
if ldd "$BUILD/bin/ragtrain" 2>/dev/null | grep -qE 'lib(asan|ubsan|tsan)'; then
  export RAGTRAIN_TEST_TIME_SCALE=${RAGTRAIN_TEST_TIME_SCALE:-3}   # time bounds of tests/e2e scale with it
  NO_LEAKS=(env "ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0:fast_unwind_on_malloc=1")
fi
MPIRUN="mpirun --oversubscribe"
# Every suite runs under a wall-time bound (SUITE_LIMIT seconds, 1200 by default, times the sanitizer scale): a
# suite that hangs is stopped (SIGTERM, so its EXIT traps stop daemons and remove temporary folders; SIGKILL 30 s
# later) and counts as failed, instead of running on until CI's own limit.
SCALE=${RAGTRAIN_TEST_TIME_SCALE:-1}
SCALE=${SCALE%%.*}
[ "${SCALE:-0}" -ge 1 ] 2>/dev/null || SCALE=1   # as the suites read it (tests/slurm/test_jobs.sh)
SUITE_LIMIT=$(( ${SUITE_LIMIT:-1200} * SCALE ))
bounded() { timeout -k 30 "$SUITE_LIMIT" "$@"; }
# Says so when the bound stopped a suite ($1 = its exit status, $2 = its label, $3 = its start in SECONDS).
over_limit() {
  [ "$1" -eq 124 ] || { [ "$1" -eq 137 ] && [ $((SECONDS - $3)) -ge "$SUITE_LIMIT" ]; } &&
    echo "!!! $2: stopped after SUITE_LIMIT=$SUITE_LIMIT s"
  return 0
}

passed=0; failed=0; skipped=0
failures=()

# Whether the suite labelled $1 runs ("mpi np=2" belongs to the suite "mpi").
wanted() { [ -z "$ONLY" ] || [ "$ONLY" = "${1%% *}" ]; }

# Reads the counts of one gtest run: $1 = its log, $2 = its exit status; sets p, f and s, prints its failures.
gtest_counts() {
  local log=$1 rc=$2
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\..*/\1/p' "$log" | tail -1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\?,.*/\1/p' "$log" | tail -1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\?,.*/\1/p' "$log" | tail -1)
  p=${p:-0}; s=${s:-0}; f=${f:-0}
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed or aborted before its summary
  grep -E '^\[  (FAILED|SKIPPED) +\] [A-Za-z]|Failure|error:|Skipped|SKIP' "$log" | head -40
  [ "$f" -gt 0 ] && tail -60 "$log"
  return 0
}

# Runs one gtest binary invocation, adds its counts. $1 = label, rest = command.
run_suite() {
  local label=$1; shift
  wanted "$label" || return 0
  local log; log=$(mktemp)
  echo "=== $label: $*"
  local start=$SECONDS
  bounded "$@" >"$log" 2>&1
  local rc=$?
  over_limit "$rc" "$label" "$start"
  local p s f
  gtest_counts "$log" "$rc"
  [ "$f" -gt 0 ] && failures+=("$label")
  echo "--- $label: $p passed, $f failed, $s skipped ($((SECONDS - start)) s)"
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  rm -f "$log"
}

# Runs a gtest binary as $2 processes at once, each a shard of its tests (GTEST_TOTAL_SHARDS, GTEST_SHARD_INDEX),
# each under the suite's time bound, and adds their counts as one suite. $1 = label, rest = command.
run_sharded_suite() {
  local label=$1 shards=$2; shift 2
  [ "$shards" -gt 1 ] 2>/dev/null || { run_suite "$label" "$@"; return; }
  wanted "$label" || return 0
  echo "=== $label: $* ($shards shards at once)"
  local start=$SECONDS k logs=() pids=()
  for ((k = 0; k < shards; k++)); do
    logs+=("$(mktemp)")
    bounded env GTEST_TOTAL_SHARDS="$shards" GTEST_SHARD_INDEX="$k" "$@" >"${logs[k]}" 2>&1 &
    pids+=($!)
  done
  local rc p s f tp=0 tf=0 ts=0
  for ((k = 0; k < shards; k++)); do
    wait "${pids[k]}"; rc=$?
    over_limit "$rc" "$label shard $((k + 1))/$shards" "$start"
    gtest_counts "${logs[k]}" "$rc"
    echo "--- $label shard $((k + 1))/$shards: $p passed, $f failed, $s skipped"
    tp=$((tp + p)); tf=$((tf + f)); ts=$((ts + s))
    rm -f "${logs[k]}"
  done
  [ "$tf" -gt 0 ] && failures+=("$label")
  echo "--- $label: $tp passed, $tf failed, $ts skipped ($((SECONDS - start)) s)"
  passed=$((passed + tp)); failed=$((failed + tf)); skipped=$((skipped + ts))
}

if [ "$ONLY" != gpu ]; then
  run_suite unit "$BUILD/bin/unit_tests"
  for np in 1 2 3 4; do
    run_suite "mpi np=$np" $MPIRUN -np "$np" "$BUILD/bin/mpi_tests"
  done
  # The e2e tests spend most of their time waiting (MPI start-up, a rank's exit, a run in the background), not
  # computing: 2 shards at once take ~4.5 min instead of ~6.7 on 2 cores (user+sys ~3.7 min either way). One under
  # sanitizers, whose processes are CPU-bound. E2E_SHARDS overrides.
  E2E_SHARDS=${E2E_SHARDS:-$([ "$SCALE" -gt 1 ] && echo 1 || echo 2)}
  run_sharded_suite e2e "$E2E_SHARDS" "${NO_LEAKS[@]}" "$BUILD/bin/e2e_tests"
fi
# A script suite prints "[  PASSED  ] name" / "[  FAILED  ] ..." / "[  SKIPPED ] ..." lines and ends with
# "N passed, N failed, N skipped"; its counts are added as they are (a crash before that line counts as 1 failed).
run_script_suite() {
  local label=$1; shift
  wanted "$label" || return 0
  local log; log=$(mktemp)
  echo "=== $label: $*"
  local start=$SECONDS
  bounded "$@" >"$log" 2>&1
  local rc=$?
  over_limit "$rc" "$label" "$start"
  local last p f s
  last=$(tail -1 "$log")
  p=$(echo "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1/p')
  f=$(echo "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\2/p')
  s=$(echo "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\3/p')
  if [ -z "$p" ]; then p=0; f=1; s=0; fi
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  grep -E '^\[  (FAILED|SKIPPED) +\]' "$log" | head -40
  [ "$f" -gt 0 ] && { tail -60 "$log"; failures+=("$label"); }
  echo "--- $label: $p passed, $f failed, $s skipped ($((SECONDS - start)) s)"
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  rm -f "$log"
}

if [ "$ONLY" != gpu ]; then
  run_script_suite jobs "${NO_LEAKS[@]}" "$(dirname "$0")/../tests/slurm/test_jobs.sh" "$BUILD"
  # libFuzzer targets (tests/fuzz; `make test` builds them where clang has libFuzzer): FUZZ_SECONDS each,
  # default 60; a target that is not built is skipped with the reason.
  # (its own sanitizer options: leaks are checked with the fast unwinder there, no MPI job is started)
  run_script_suite fuzz env -u ASAN_OPTIONS "$(dirname "$0")/../tests/fuzz/run.sh" "$BUILD/fuzz" "${FUZZ_SECONDS:-60}"
  # PyTorch agreement and interop (tests/torch/run.sh, CPU backend); skipped where /usr/bin/python3 lacks torch.
  run_script_suite torch "${NO_LEAKS[@]}" "$(dirname "$0")/../tests/torch/run.sh" "$BUILD"
  # doc/tutorial.md and doc/from-pytorch.md's worked example, run as written (tests/doc/run.sh); the worked example
  # is skipped like torch without torch.
  run_script_suite doc "${NO_LEAKS[@]}" "$(dirname "$0")/../tests/doc/run.sh" "$BUILD"
  # Cluster builds and `make install` (tests/build/test_build.sh; about a minute without ccache).
  run_script_suite build "${NO_LEAKS[@]}" "$(dirname "$0")/../tests/build/test_build.sh" "$BUILD"
fi
if [ -x "$BUILD/bin/gpu_tests" ]; then
  run_suite gpu "$BUILD/bin/gpu_tests"
elif [ "$ONLY" = gpu ]; then
  echo "gpu_tests not built (no CUDA toolkit found)"; failed=$((failed + 1))
fi

[ ${#failures[@]} -gt 0 ] && echo "failed suites: ${failures[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
