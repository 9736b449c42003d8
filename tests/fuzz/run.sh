#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz for a bounded time and ends with "N passed, N failed, N skipped"
# (the format of scripts/run-tests.sh script suites). A target fails on any crash, sanitizer report, timeout
# or out-of-memory in our code; the input is saved as FUZZ_DIR/crashes/<target>/<kind>-* (once fixed, add it
# to tests/fuzz/corpus/; tests/fuzz/README.md says how). Crashes inside libhdf5 itself are set aside and counted.
# usage: tests/fuzz/run.sh FUZZ_DIR [SECONDS [TARGET]]    FUZZ_DIR = $(BUILD)/fuzz of the Makefile (bin/fuzz_*)
set -u
DIR=${1:?usage: tests/fuzz/run.sh FUZZ_DIR [SECONDS]}
SECONDS_EACH=${2:-${FUZZ_SECONDS:-60}}
ONLY=${3:-}   # one target only, e.g. fuzz_h5
HERE=$(cd "$(dirname "$0")" && pwd)
# Leaks are findings too; Open MPI's and HDF5's own one-time allocations are suppressed by name.
# allocator_may_return_null: a malloc() too big to serve returns NULL as glibc's does (libhdf5 asks for what a
# damaged header declares, gets NULL and fails cleanly); operator new of our own code still aborts on it.
# max_allocation_size_mb: the same for any malloc() over 256 MB (4x the harness's --max-memory): libhdf5 1.10
# allocates and clears a variable-length string's declared length before it finds the string damaged (21 GB for
# one 64 KB input, tests/fuzz/README.md item 5), which the harness cannot always see coming; with the cap libhdf5
# fails cleanly instead of ending the run out of memory, while our code's operator new still aborts, reported.
# Options given by the caller (scripts/run-tests.sh sets some) come last and win.
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:max_allocation_size_mb=256${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$HERE/../sanitizers/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

# Where a crash happened: "libhdf5" if the innermost frame outside the sanitizer, libFuzzer and C/C++ runtimes
# is in libhdf5, else "ours" (ragtrain's code, the harness, or a sanitizer report on them). ASan's interceptors of
# the C string and memory functions (strdup, memcpy, ...) and glibc's frames symbolized by glibc's relative source
# paths (string/../sysdeps/..., nptl/./nptl/..., no "libc.so" on the line) are part of the runtime: the caller
# decides.
crash_site() {
  awk '/ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:/ { on = 1 }
       on && /^ *#[0-9]+ / {
         if ($0 ~ /__sanitizer|__asan|__lsan|__ubsan|__interceptor|fuzzer::|libc\.so|libstdc\+\+|libgcc_s|__cxa_|__gnu_cxx|std::terminate|in (malloc|calloc|realloc|free|operator new|str[a-z]*|mem(cpy|move|set|cmp|chr))[ (]|in __(mem|str)[a-z0-9_]* | [a-z_]+\/\.\.?\/|in _start|__libc_start/) next
         print ($0 ~ /libhdf5/ ? "libhdf5" : "ours"); exit }' "$1"
}

passed=0; failed=0; skipped=0
# target name, corpus folder under tests/fuzz/corpus
for spec in "fuzz_ts ts" "fuzz_h5 h5" "fuzz_npz npz"; do
  set -- $spec
  target=$1; corpus=$HERE/corpus/$2
  bin=$DIR/bin/$target
  [ -n "$ONLY" ] && [ "$ONLY" != "$target" ] && continue
  if [ ! -x "$bin" ]; then
    echo "[  SKIPPED ] $target: $bin not built (needs clang++ with libFuzzer: apt-get install clang libclang-rt-14-dev)"
    skipped=$((skipped + 1)); continue
  fi
  # New inputs go to a scratch corpus (first folder); the seeds in the repository are only read.
  work=$DIR/work/$target; crashes=$DIR/crashes/$target; known=$DIR/crashes/$target-libhdf5
  mkdir -p "$work" "$crashes" "$known"
  log=$DIR/$target.log
  start=$SECONDS; execs=0; library=0; result=pass
  # libhdf5 1.10 crashes and hangs on some damaged files by itself (tests/fuzz/README.md): such a crash is set
  # aside in $known and the fuzzer starts again for the time left, so that it goes on looking for ours.
  while left=$((SECONDS_EACH - (SECONDS - start))); [ "$left" -gt 2 ]; do
    "$bin" -max_total_time="$left" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
           -artifact_prefix="$crashes/" "$work" "$corpus" >"$log" 2>&1
    rc=$?
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    execs=$((execs + ${n:-0}))
    [ "$rc" -eq 0 ] && break
    # Only this run's input is set aside: a finding of an earlier run stays where it is.
    artifact=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
    if [ "$(crash_site "$log")" = libhdf5 ] && [ -f "$artifact" ]; then
      library=$((library + 1))
      mv "$artifact" "$known/" && cp "$log" "$known/$(basename "$artifact").log"
      continue
    fi
    result=fail; break
  done
  spent=$((SECONDS - start))
  summary="$execs execs, $((execs / (spent > 0 ? spent : 1)))/s, $(ls "$work" | wc -l) corpus units, $spent s"
  [ "$library" -gt 0 ] && summary="$summary; $library libhdf5 crash(es) set aside in $known"
  if [ "$result" = pass ]; then
    echo "[  PASSED  ] $target ($summary)"
    passed=$((passed + 1))
  else
    echo "[  FAILED  ] $target (exit $rc; $summary); log: $log"
    grep -E 'ERROR:|SUMMARY:|runtime error|fuzz_(ts|h5|npz):|terminate called|what\(\)|Test unit written' "$log" | head -20
    ls "$crashes" | sed 's/^/  saved: /'
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
