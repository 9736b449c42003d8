#!/usr/bin/env bash
# The jobs/ scripts as users run them: jobs/run-mpirun.sh with a SIGTERM half-way, then jobs/train.sbatch,
# jobs/scaling.sbatch and jobs/tune.sbatch submitted with sbatch to a real single-node Slurm that this script starts (munged,
# slurmctld, slurmd; tests/slurm/cluster.sh) and stops again on every exit path. Preemption by
# `scontrol requeue` and the time-limit warning (SIGUSR1 to the batch shell, as --signal=B:USR1@120 sends it)
# must each end with the same final loss, bit for bit, as the uninterrupted run.
# usage: tests/slurm/test_jobs.sh BUILD_DIR      last line: "N passed, N failed, N skipped" (scripts/run-tests.sh)
#        RAGTRAIN_SLURM_TESTS="test_sbatch_lock_held ..." runs only the named test functions (while developing).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
BIN=$BUILD/bin/ragtrain
# shellcheck source=cluster.sh
source "$ROOT/tests/slurm/cluster.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Every wait below is a bound, not a pause: it ends as soon as its condition holds. The bounds grow with
# RAGTRAIN_TEST_TIME_SCALE (scripts/run-tests.sh sets it for sanitizer builds, whose ranks start and exit slower).
SCALE=${RAGTRAIN_TEST_TIME_SCALE:-1}
SCALE=${SCALE%%.*}
[ "${SCALE:-0}" -ge 1 ] 2>/dev/null || SCALE=1

passed=0 failed=0 skipped=0
selected() { [ -z "${RAGTRAIN_SLURM_TESTS:-}" ] || [[ " $RAGTRAIN_SLURM_TESTS " == *" $1 "* ]]; }
pass() { echo "[  PASSED  ] $1"; passed=$((passed + 1)); }
fail() { echo "[  FAILED  ] $1: $2"; failed=$((failed + 1)); }
skip() { echo "[  SKIPPED ] $1: $2"; skipped=$((skipped + 1)); }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ragtrain-jobs.XXXXXX")
cleanup() {
  cluster_stop "$TMP/cluster" 2>/dev/null
  if [ -n "${RAGTRAIN_KEEP_TEST_DIR:-}" ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM   # through the EXIT trap: daemons are stopped on every path
cd "$TMP" || exit 1

# A JSON number of summary.json (written with two-space indentation: one key per line).
json_value() { sed -n "s/^ *\"$2\": \([^,]*\),\{0,1\}$/\1/p" "$1" | head -1; }
# The final result of a run, as text compared for equality: losses and the CRC-32 of the final parameters.
result_of() { [ -f "$1/summary.json" ] && echo "train_loss=$(json_value "$1/summary.json" train_loss)" \
  "val_loss=$(json_value "$1/summary.json" val_loss) params_crc32=$(json_value "$1/summary.json" params_crc32)"; }

# One small data set and one training configuration for every test: ~60 steps per epoch, a few seconds.
"$BIN" gen --out train.h5 --sequences 240 --features 6 --min-length 5 --max-length 40 --classes 3 --seed 1 >/dev/null &&
  "$BIN" gen --out val.h5 --sequences 60 --features 6 --min-length 5 --max-length 40 --classes 3 --seed 2 >/dev/null ||
  { echo "cannot generate data"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
TRAIN_ARGS="--hidden 32 --epochs 50 --lr 0.01 --clip 1 --batch-per-rank 2 --log-every 20 --quiet"

# Waits until file $1 exists (at most $2 seconds).
wait_for_file() {
  local _
  for _ in $(seq $(($2 * 50 * SCALE))); do [ -e "$1" ] && return 0; sleep 0.02; done
  return 1
}

# ---- jobs/run-mpirun.sh (no Slurm needed) -----------------------------------------------------------------
reference() {   # the uninterrupted run every interrupted one must reproduce
  DATA=train.h5 VAL=val.h5 OUT=ref DEVICE=cpu NP=2 RAGTRAIN=$BIN MPIRUN_ARGS=--oversubscribe \
    "$ROOT/jobs/run-mpirun.sh" $TRAIN_ARGS >ref.log 2>&1
}
start=$SECONDS
if reference && [ -n "$(result_of ref)" ]; then
  REF=$(result_of ref)
  echo "reference ($((SECONDS - start)) s): $REF"
else
  echo "the reference run failed:"; tail -20 ref.log
  echo "0 passed, 1 failed, 0 skipped"; exit 1
fi

test_mpirun_sigterm() {
  local name="run-mpirun.sh: SIGTERM checkpoints (exit 75), running it again resumes to the same result"
  export DATA=train.h5 VAL=val.h5 OUT=mp DEVICE=cpu NP=2 RAGTRAIN=$BIN MPIRUN_ARGS=--oversubscribe CHECKPOINT_EVERY=500
  "$ROOT/jobs/run-mpirun.sh" $TRAIN_ARGS >mp1.log 2>&1 &
  local pid=$! rc
  # metrics.jsonl appears once the inputs are read, after the ranks installed their signal handlers: signalled
  # then, the run has hardly begun, however fast the machine is.
  wait_for_file mp/metrics.jsonl 30
  kill -TERM "$pid"
  wait "$pid"; rc=$?
  "$ROOT/jobs/run-mpirun.sh" $TRAIN_ARGS >mp2.log 2>&1
  local rc2=$? got
  got=$(result_of mp)
  unset DATA VAL OUT DEVICE NP RAGTRAIN MPIRUN_ARGS CHECKPOINT_EVERY
  if [ "$rc" -ne 75 ]; then fail "$name" "first run exited with $rc, expected 75"; tail -5 mp1.log
  elif ! grep -q '"event":"stop"' mp/metrics.jsonl; then fail "$name" "no stop record in metrics.jsonl"
  elif [ "$rc2" -ne 0 ]; then fail "$name" "the resumed run exited with $rc2"; tail -5 mp2.log
  elif [ "$got" != "$REF" ]; then fail "$name" "resumed: $got, uninterrupted: $REF"
  else pass "$name"; fi
}
selected test_mpirun_sigterm && test_mpirun_sigterm

test_mpirun_default_device() {
  local name="run-mpirun.sh: without DEVICE it trains where it runs (cpu without a GPU, cuda with one)" rc want=cpu
  local np=NP=2   # on GPUs NP is left to the script: one rank per GPU (two ranks cannot share one GPU)
  if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -gt 0 ] && "$BIN" --version | grep -q '^backends:.*cuda'; then
    want=cuda np=NP=
  fi
  (unset DEVICE; env DATA=train.h5 OUT=dev "$np" RAGTRAIN="$BIN" MPIRUN_ARGS=--oversubscribe \
    "$ROOT/jobs/run-mpirun.sh" --hidden 8 --epochs 1 --quiet >dev.log 2>&1); rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name" "exited with $rc"; tail -5 dev.log
  elif ! grep -q "DEVICE=auto: $want" dev.log; then fail "$name" "expected DEVICE=auto: $want in the log"; tail -5 dev.log
  else pass "$name"; fi
}
selected test_mpirun_default_device && test_mpirun_default_device

# ---- Slurm -----------------------------------------------------------------------------------------------
SLURM_ALL="test_sbatch_train test_sbatch_preempted test_sbatch_time_limit_warning test_sbatch_late_exit
           test_sbatch_lock_held test_sbatch_scaling test_sbatch_tune_preempted"
SLURM_RUN=""
for t in $SLURM_ALL; do selected "$t" && SLURM_RUN="$SLURM_RUN $t"; done
SLURM_TESTS=$(echo $SLURM_RUN | wc -w)
[ "$SLURM_TESTS" -gt 0 ] || { echo "$passed passed, $failed failed, $skipped skipped"; [ "$failed" -eq 0 ]; exit; }
why=$(cluster_unavailable)
if [ -n "$why" ]; then
  for _ in $(seq $SLURM_TESTS); do skip "slurm" "$why"; done
  echo "$passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ]; exit
fi
start=$SECONDS
if ! cluster_start "$TMP/cluster" $((20 * SCALE)); then
  for _ in $(seq $SLURM_TESTS); do fail "slurm" "the test cluster did not start (logs above)"; done
  echo "$passed passed, $failed failed, $skipped skipped"; exit 1
fi
echo "slurm cluster up in $((SECONDS - start)) s (SLURM_CONF=$SLURM_CONF)"

# Waits below are bounded in wall time (SECONDS), not in calls: a Slurm command that finds no controller retries
# for ~9 s before it gives up, so a count of calls would be no bound.
job_field() { timeout 10 scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
# Waits (at most $2 s) until job $1 has left the queue or is in state $3; prints the state.
wait_job() {
  local st deadline=$((SECONDS + $2 * SCALE))
  while [ "$SECONDS" -lt "$deadline" ]; do
    st=$(job_field "$1" JobState)
    case "$st" in COMPLETED|FAILED|CANCELLED|TIMEOUT|OUT_OF_MEMORY|NODE_FAIL|"") echo "$st"; return;; esac
    [ -n "${3:-}" ] && [ "$st" = "$3" ] && { echo "$st"; return; }
    sleep 0.2
  done
  echo "TIMEOUT_WAITING($st)"
}
# A requeued job waits ~2 minutes (Slurm's BeginTime after a requeue); the test lets it start as soon as the
# previous instance's step daemons are gone (a new step of the same id cannot bind its PMIx socket before).
release_requeued() {
  local deadline=$((SECONDS + 30 * SCALE))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if [ "$(job_field "$1" JobState)" = PENDING ] && [ "$(job_field "$1" Restarts)" -ge 1 ] 2>/dev/null &&
       ! pgrep -f "slurmstepd: \[$1\." >/dev/null; then
      # slurmd refuses a job's new credential issued in the same second as the old one's revocation ("Job
      # credential revoked", seen when the previous instance took until its KillWait to end): start a bit later.
      sleep 2
      scontrol update JobId="$1" StartTime=now && return 0
    fi
    sleep 0.2
  done
  return 1
}
submit_train() {   # $1 = run folder; more sbatch options after it; JOB_BIN replaces the binary
  local out=$1; shift
  DATA=train.h5 VAL=val.h5 OUT=$out DEVICE=cpu RAGTRAIN=${JOB_BIN:-$BIN} CHECKPOINT_EVERY=500 EXTRA_ARGS="$TRAIN_ARGS" \
    sbatch --parsable --ntasks-per-node=2 --cpus-per-task=1 --time=10 -o "$TMP/$out-%j.out" "$@" \
    "$ROOT/jobs/train.sbatch"
}

# The time-limit warning to job $1 (run folder $2) once it trains, as --signal=B:USR1@120 sends it; then the
# requeue the script asks for and the job's end. Prints the final state (or NOT_STARTED / NOT_REQUEUED).
warn_and_finish() {
  local jid=$1 out=$2
  wait_for_file "$out/metrics.jsonl" 60 || { scancel "$jid"; echo NOT_STARTED; return; }
  scancel --batch --signal=USR1 "$jid"
  release_requeued "$jid" || { scancel "$jid"; echo NOT_REQUEUED; return; }
  wait_job "$jid" 90
}

test_sbatch_train() {
  local name="train.sbatch: 2 tasks, srun --mpi=pmix, --gpus-per-task=1, same result as mpirun"
  local jid st
  jid=$(submit_train sb) || { fail "$name" "sbatch refused the script"; return; }
  st=$(wait_job "$jid" 60)
  local got; got=$(result_of sb)
  if [ "$st" != COMPLETED ]; then fail "$name" "job $jid ended $st"; cat "$TMP"/sb-*.out
  elif [ "$got" != "$REF" ]; then fail "$name" "sbatch: $got, mpirun: $REF"
  elif ! grep -q '"SLURM_JOB_ID": "'"$jid"'"' sb/summary.json; then fail "$name" "summary.json lacks the Slurm provenance"
  elif ! grep -q '"cuda_visible_devices": "[01]"' sb/summary.json; then fail "$name" "ranks did not get one (fake) GPU each"
  else pass "$name"; fi
}

test_sbatch_preempted() {
  local name="train.sbatch: scontrol requeue (preemption) -> SIGTERM checkpoint -> requeued job resumes, same final loss"
  local jid st
  jid=$(submit_train pre) || { fail "$name" "sbatch refused the script"; return; }
  wait_for_file pre/metrics.jsonl 60 || { fail "$name" "the run did not start"; scancel "$jid"; return; }
  scontrol requeue "$jid"
  release_requeued "$jid" || { fail "$name" "job $jid did not come back pending"; cat "$TMP"/pre-*.out; scancel "$jid"; return; }
  st=$(wait_job "$jid" 90)
  local got; got=$(result_of pre)
  if [ "$st" != COMPLETED ]; then fail "$name" "job $jid ended $st"; cat "$TMP"/pre-*.out
  elif [ "$(job_field "$jid" Restarts)" != 1 ]; then fail "$name" "Restarts=$(job_field "$jid" Restarts), expected 1"
  elif ! grep -q '"event":"stop".*"signal":"SIGTERM"' pre/metrics.jsonl; then
    fail "$name" "no SIGTERM stop in metrics.jsonl (was it interrupted mid-run?)"; cat "$TMP"/pre-*.out
  elif ! grep -q '"event":"resume"' pre/metrics.jsonl; then fail "$name" "no resume record in metrics.jsonl"
  elif [ "$got" != "$REF" ]; then fail "$name" "preempted: $got, uninterrupted: $REF"
  else pass "$name"; fi
}

test_sbatch_time_limit_warning() {
  local name="train.sbatch: SIGUSR1 to the batch shell (--signal=B:USR1) -> exit 75 -> script requeues itself -> same final loss"
  local jid st
  jid=$(submit_train usr) || { fail "$name" "sbatch refused the script"; return; }
  st=$(warn_and_finish "$jid" usr)
  local got; got=$(result_of usr)
  if [ "$st" != COMPLETED ]; then fail "$name" "job $jid ended $st"; cat "$TMP"/usr-*.out
  elif ! grep -q '"event":"stop".*"signal":"SIGUSR1"' usr/metrics.jsonl; then
    fail "$name" "no SIGUSR1 stop in metrics.jsonl"; cat "$TMP"/usr-*.out
  elif ! grep -q "requeueing job $jid" "$TMP"/usr-*.out; then fail "$name" "the script did not requeue itself"
  elif [ "$got" != "$REF" ]; then fail "$name" "interrupted: $got, uninterrupted: $REF"
  else pass "$name"; fi
}

test_sbatch_late_exit() {
  local name="train.sbatch: rank 0 still exiting when rank 1 exits 75 -> srun kills it (--kill-on-bad-exit) -> still requeued, same final loss"
  local jid st wrapper=$TMP/ragtrain-late-exit
  # The race seen under ASan, made certain: after a checkpointed stop, rank 0 does not exit by itself at all, so
  # rank 1's exit 75 always comes first and only --kill-on-bad-exit can end rank 0 (a fixed delay, 30 s before,
  # lost the race when rank 1 was slower than that to exit on a loaded machine). The wrapper shell ignores the stop
  # signals that Slurm sends to every process of the step (ragtrain installs its own handlers); its wait is bounded
  # (600 s) only so that a broken srun cannot hold the suite forever (the test then fails on the job's state).
  printf '#!/bin/sh\ntrap "" USR1 TERM\n"%s" "$@"; rc=$?\n[ "$rc" = 75 ] && [ "$SLURM_PROCID" = 0 ] && sleep 600\nexit $rc\n' \
    "$BIN" >"$wrapper"
  chmod +x "$wrapper"
  jid=$(JOB_BIN=$wrapper submit_train late) || { fail "$name" "sbatch refused the script"; return; }
  st=$(warn_and_finish "$jid" late)
  local got; got=$(result_of late)
  if [ "$st" != COMPLETED ]; then fail "$name" "job $jid ended $st"; cat "$TMP"/late-*.out
  elif ! grep -q "killed by --kill-on-bad-exit" "$TMP"/late-*.out; then
    fail "$name" "srun reported 75 itself: the race was not reproduced"; cat "$TMP"/late-*.out
  elif [ "$got" != "$REF" ]; then fail "$name" "interrupted: $got, uninterrupted: $REF"
  else pass "$name"; fi
}

test_sbatch_lock_held() {
  local name="train.sbatch: another process holds the run lock -> waits LOCK_WAIT, requeues itself; the holder gone, the requeued job takes the stale lock over, same result"
  local jid st holder out=lk
  # The holder: a live process of this node named in a lock record, as a previous instance still exiting would be
  # (ragtrain's own format: host, pid, start time in clock ticks). Killed once the job has requeued itself.
  mkdir -p "$out"
  sleep 600 & holder=$!
  local ticks; ticks=$(sed 's/.*) //' "/proc/$holder/stat" | cut -d' ' -f20)
  printf '{"host":"%s","pid":%s,"start_ticks":%s,"boot_id":"%s","started":"%s","command":"the previous instance"}\n' \
    "$(hostname)" "$holder" "$ticks" "$(cat /proc/sys/kernel/random/boot_id)" "$(date -u +%FT%TZ)" >"$out/ragtrain.lock"
  jid=$(LOCK_WAIT=4 submit_train "$out") || { fail "$name" "sbatch refused the script"; kill "$holder"; return; }
  local _
  for _ in $(seq 300); do grep -q "requeueing job $jid" "$TMP"/$out-*.out 2>/dev/null && break; sleep 0.2; done
  kill "$holder"; wait "$holder" 2>/dev/null
  release_requeued "$jid" || { fail "$name" "job $jid did not come back pending"; cat "$TMP"/$out-*.out; scancel "$jid"; return; }
  st=$(wait_job "$jid" 90)
  local got; got=$(result_of "$out")
  if [ "$st" != COMPLETED ]; then fail "$name" "job $jid ended $st"; cat "$TMP"/$out-*.out
  elif ! grep -q "is held by another run (pid $holder on host $(hostname))" "$TMP"/$out-*.out; then
    fail "$name" "the first instance did not report the holder"; cat "$TMP"/$out-*.out
  elif ! grep -q "still held after 4 s.*requeueing job $jid" "$TMP"/$out-*.out; then
    fail "$name" "the first instance did not requeue itself"; cat "$TMP"/$out-*.out
  elif ! grep -q "took over the run lock" "$TMP"/$out-*.out; then
    fail "$name" "ragtrain did not take the stale lock over"; cat "$TMP"/$out-*.out
  elif [ -e "$out/ragtrain.lock" ]; then fail "$name" "the lock outlived the run"
  elif [ "$got" != "$REF" ]; then fail "$name" "after waiting: $got, uninterrupted: $REF"
  else pass "$name"; fi
}

test_sbatch_scaling() {
  local name="scaling.sbatch: bench on 1 and 2 ranks -> scaling.txt with efficiency, scaling.png, provenance"
  local jid st
  jid=$(RANKS="1 2" DEVICE=cpu RAGTRAIN=$BIN OUT=scaling HIDDEN=16 STEPS=100 WARMUP=10 \
        sbatch --parsable --ntasks-per-node=2 --cpus-per-task=1 --time=10 -o "$TMP/scaling-%j.out" \
        "$ROOT/jobs/scaling.sbatch") || { fail "$name" "sbatch refused the script"; return; }
  st=$(wait_job "$jid" 60)
  if [ "$st" != COMPLETED ]; then fail "$name" "job $jid ended $st"; cat "$TMP"/scaling-*.out
  elif [ "$(grep -c '^ *[12] ' scaling/scaling.txt 2>/dev/null)" != 2 ]; then
    fail "$name" "scaling.txt lacks its two rows"; cat scaling/scaling.txt "$TMP"/scaling-*.out
  elif ! grep -q '"git_revision"' scaling/bench-np002.json || ! grep -q '"hdf5"' scaling/bench-np002.json; then
    fail "$name" "bench JSON lacks provenance"
  elif ! command -v gnuplot >/dev/null; then pass "$name (no gnuplot: table only)"
  elif [ "$(head -c 4 scaling/scaling.png | od -An -c | tr -d ' ')" != "211PNG" ]; then fail "$name" "scaling.png is not a PNG"
  else pass "$name"; fi
}

# tune.sbatch: a search of a few seconds; trials.csv without its seconds column is what must not change.
TUNE_ARGS="--trials 9 --seed 4 --quiet"
printf 'hidden = 8 | 16\nlr = 0.005 .. 0.05 log\nepochs = 30 | 45\n' > tune-space.ini
trials_of() { cut -d, -f1-6,8- "$1/trials.csv" 2>/dev/null; }

test_sbatch_tune_preempted() {
  local name="tune.sbatch: scontrol requeue mid-search -> requeued job continues with the finished runs, same trials.csv and best.ini"
  local jid st
  if ! mpirun -np 2 "$BIN" tune --data train.h5 --out tune-ref --space tune-space.ini $TUNE_ARGS >tune-ref.log 2>&1; then
    fail "$name" "the reference tune failed"; tail -20 tune-ref.log; return
  fi
  jid=$(DATA=train.h5 OUT=tune-pre DEVICE=cpu RAGTRAIN=$BIN SPACE=tune-space.ini TRIALS=9 SEED=4 EXTRA_ARGS=--quiet \
        sbatch --parsable --ntasks-per-node=2 --cpus-per-task=1 --time=10 -o "$TMP/tune-pre-%j.out" \
        "$ROOT/jobs/tune.sbatch") || { fail "$name" "sbatch refused the script"; return; }
  local deadline=$((SECONDS + 60 * SCALE))
  while [ "$(ls tune-pre/runs/*.csv 2>/dev/null | wc -l)" -lt 3 ] && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.05; done
  [ -e tune-pre/summary.json ] && { fail "$name" "the search ended before the requeue"; return; }
  scontrol requeue "$jid"
  release_requeued "$jid" || { fail "$name" "job $jid did not come back pending"; cat "$TMP"/tune-pre-*.out; scancel "$jid"; return; }
  st=$(wait_job "$jid" 120)
  if [ "$st" != COMPLETED ]; then fail "$name" "job $jid ended $st"; cat "$TMP"/tune-pre-*.out
  elif [ "$(job_field "$jid" Restarts)" != 1 ]; then fail "$name" "Restarts=$(job_field "$jid" Restarts), expected 1"
  elif ! grep -q "continuing the search" "$TMP"/tune-pre-*.out; then fail "$name" "the requeued job did not continue the search"
  elif [ "$(trials_of tune-pre)" != "$(trials_of tune-ref)" ]; then
    fail "$name" "trials.csv differs from the uninterrupted search"; diff <(trials_of tune-pre) <(trials_of tune-ref)
  elif ! cmp -s tune-pre/best.ini tune-ref/best.ini; then fail "$name" "best.ini differs from the uninterrupted search"
  else pass "$name"; fi
}

for t in $SLURM_RUN; do
  start=$SECONDS
  $t
  echo "    ($((SECONDS - start)) s)"
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
