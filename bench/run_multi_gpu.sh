#!/usr/bin/env bash
# Scaling over the GPUs of one machine against PyTorch DDP, in ONE device call on a machine with P GPUs
# (P = NGPU, else the count `nvidia-smi -L` gives):
#  1. weak scaling at batch one per GPU of the seed workload (H=50, F=36, 10 classes, lengths U[60,130], Adam):
#     `mpirun -np P ragtrain bench --schedule balanced|random` for P in 1 2 4 8 (those <= NGPU), and PyTorch DDP
#     (bench/ddp_reference.py: nn.LSTM + nn.Linear, batch one per GPU, NCCL) on the same file, same P;
#  2. correctness: P ranks x --batch-per-rank 1 against one rank x --batch-per-rank P, 100 steps of `ragtrain train`
#     on the same data and seed (bench/compare_runs.py: per-step loss to 1e-5 relative, final parameters to 1e-4),
#     with cuDNN's algorithm chosen as usual (auto) and forced to `standard`; at P=1 the same run twice (determinism);
#     and (one GPU is enough) 1 GPU x batch P against P CPU ranks x batch one, for P in CROSS_PS ("2 4 8");
#     where NGPU=1, also P ranks sharing the GPU (NCCL over sockets, NCCL_HOSTID per rank) against 1 x batch P,
#     and the watchdog on them, for P in SHARE_PS ("2 4"; empty: off);
#  3. the watchdog: a P-rank `ragtrain train`, one rank SIGKILLed (the launcher's case) and, in a second run, one rank
#     SIGSTOPped (the case only --comm-timeout catches): seconds until the job ended and the line naming the rank
#     (needs P >= 2: skipped with a message at P=1);
#  4. bench/summarize_scaling.py: the table (seq/s, efficiency vs P=1, wait fraction, DDP, ratio) against the targets.
# usage, from the repository root:   BIN=.devcarry/bin OUT=$OUT bench/run_multi_gpu.sh
# BIN holds a CUDA build of ragtrain (make BUILD=build-gpu PORTABLE=1). Output: $OUT/multi_gpu.log,
# $OUT/scaling_summary.{txt,json} and every run's JSON/log in $OUT/work.tgz. Nothing is built here.
# Knobs (environment): NGPU, PS ("1 2 4 8"), CROSS_PS, SHARE_PS, STEPS/WARMUP (ragtrain bench), DDP_STEPS/DDP_WARMUP, SEQ_PER_RANK
# (the file has SEQ_PER_RANK x max P sequences), CORR_STEPS, CORR_ALGOS ("auto standard"), COMM_TIMEOUT, BUDGET_S
# (a phase that would start after this many seconds is skipped, so the call ends in time with what it has),
# DEVICE (cpu runs the whole script on a machine without GPUs: ragtrain's CPU backend, DDP over gloo), MPIRUN_ARGS
# (e.g. --oversubscribe), PYTHON, DDP_LAUNCH (torchrun, or env: one process per rank with torchrun's variables).
set -uo pipefail
BIN=${BIN:-.devcarry/bin}
OUT=${OUT:-runs/multi}
WORK=${WORK:-/tmp/ragtrain-multi-work}               # JSON, logs, run folders; their JSON and logs come back
                                                     # as $OUT/work.tgz (the device tool returns 8 files at most)
DATA_DIR=${DATA_DIR:-/tmp/ragtrain-multi-data}       # the .h5 data files (220 MB at P=8): they stay behind
DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-3000}
WARMUP=${WARMUP:-500}          # balanced and random both see every length several times: the per-length graphs exist
DDP_STEPS=${DDP_STEPS:-300}
DDP_WARMUP=${DDP_WARMUP:-30}
SEQ_PER_RANK=${SEQ_PER_RANK:-2000}
CORR_STEPS=${CORR_STEPS:-100}
CORR_ALGOS=${CORR_ALGOS:-auto standard}
COMM_TIMEOUT=${COMM_TIMEOUT:-5}
BUDGET_S=${BUDGET_S:-480}
read -r -a MPIRUN_EXTRA <<< "${MPIRUN_ARGS:-}"
RT=$BIN/ragtrain
if [ -z "${NGPU:-}" ]; then
  NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
fi
PS_LIST=()
for p in ${PS:-1 2 4 8}; do [ "$p" -le "$NGPU" ] && PS_LIST+=("$p"); done
mkdir -p "$OUT" "$WORK" "$DATA_DIR"
rm -f "$WORK"/*.json "$WORK"/*.log   # results of an earlier call must not mix into this one
LOG=$OUT/multi_gpu.log
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
say() { echo "$@" | tee -a "$LOG"; }
in_budget() {   # phase name: true while there is time left for it
  if [ "$SECONDS" -ge "$BUDGET_S" ]; then say "## SKIPPED $1: ${SECONDS} s used of BUDGET_S=$BUDGET_S"; return 1; fi
}
{
  echo "# bench/run_multi_gpu.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname): NGPU=$NGPU, P in ${PS_LIST[*]:-none}, device $DEVICE"
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>&1
  nvidia-smi topo -m 2>&1
} 2>&1 | tee "$LOG"
if [ "${#PS_LIST[@]}" = 0 ]; then say "no GPU (NGPU=$NGPU): nothing to run"; exit 1; fi
PMAX=${PS_LIST[-1]}
if [ ! -x "$RT" ]; then say "no ragtrain binary at $RT (set BIN)"; exit 1; fi
HAVE_TORCH=1 HAVE_H5PY=1
if ! "$PYTHON" -c 'import torch, h5py, torch.distributed' >/dev/null 2>&1; then
  HAVE_TORCH=0
  say "## $PYTHON has no torch (or h5py): the DDP reference is skipped"
fi
if ! "$PYTHON" -c 'import h5py, numpy' >/dev/null 2>&1; then
  HAVE_H5PY=0
  say "## $PYTHON has no h5py/numpy: the run comparisons are skipped"
fi
MODEL=(--hidden 50 --pool last --optimizer adam --lr 1e-3 --seed 1)   # pool last: as the PyTorch references read h_n
SPEC=(--features 36 --classes 10 --min-length 60 --max-length 130)

# ---- data: one file for every P (SEQ_PER_RANK sequences per rank at the largest P)
DATA=$DATA_DIR/data.h5
"$RT" gen --force --out "$DATA" "${SPEC[@]}" --sequences $((SEQ_PER_RANK * PMAX)) --seed 1 2>&1 | tee -a "$LOG"
ranks_csv=$(IFS=,; echo "${PS_LIST[*]}")
"$RT" simulate --ranks "$ranks_csv" --data "$DATA" --batch-per-rank 1 --force --out "$WORK/simulate.json" 2>&1 | tee -a "$LOG"

# ---- 1. weak scaling: ragtrain balanced / random, then DDP, for every P
for P in "${PS_LIST[@]}"; do
  for S in balanced random; do
    in_budget "ragtrain bench P=$P $S" || continue
    say "## ragtrain bench P=$P schedule=$S"
    timeout 150 mpirun "${MPIRUN_EXTRA[@]}" -np "$P" "$RT" bench --device "$DEVICE" --data "$DATA" "${MODEL[@]}" \
      --batch-per-rank 1 --schedule "$S" --steps "$STEPS" --warmup "$WARMUP" --force --out "$WORK/ragtrain_${S}_p$P.json" \
      2>&1 | tee -a "$LOG" "$WORK/ragtrain_${S}_p$P.log"
  done
done
ddp_run() {   # P, then ddp_reference.py's arguments
  local np=$1
  shift
  if [ "${DDP_LAUNCH:-torchrun}" = torchrun ]; then
    timeout 180 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node "$np" bench/ddp_reference.py "$@"
  else   # DDP_LAUNCH=env: the variables torchrun would set, for a torch whose launcher fails (Debian's 1.13 on 3.11)
    local r pids=()
    for ((r = 0; r < np; r++)); do
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29400 + np)) WORLD_SIZE=$np RANK=$r LOCAL_RANK=$r OMP_NUM_THREADS=1 \
        timeout 180 "$PYTHON" bench/ddp_reference.py "$@" &
      pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r"; done
  fi
}
if [ "$HAVE_TORCH" = 1 ]; then
  for P in "${PS_LIST[@]}"; do
    in_budget "DDP P=$P" || continue
    say "## PyTorch DDP P=$P"
    DDP_ARGS=(--data "$DATA" --hidden 50 --lr 1e-3 --seed 1 --steps "$DDP_STEPS" --warmup "$DDP_WARMUP" --device "$DEVICE"
              --out "$WORK/ddp_p$P.json")
    rm -f "$WORK/ddp_p$P.json"
    ddp_run "$P" "${DDP_ARGS[@]}" 2>&1 | tee -a "$LOG" "$WORK/ddp_p$P.log"
    if [ ! -s "$WORK/ddp_p$P.json" ] && [ "${DDP_LAUNCH:-torchrun}" = torchrun ] && in_budget "DDP P=$P (again)"; then
      say "## PyTorch DDP P=$P: no result through torchrun; once more with one process per rank (DDP_LAUNCH=env)"
      DDP_LAUNCH="env" ddp_run "$P" "${DDP_ARGS[@]}" 2>&1 | tee -a "$LOG" "$WORK/ddp_p${P}_env.log"
    fi
  done
fi

# ---- 2. correctness: P x batch one == 1 x batch P (P=1: the same run twice)
RANK_WRAP=()    # a command each rank runs ragtrain through (the shared-GPU runs below set one)
train_run() {   # ranks batch_per_rank data out_dir [env...]
  local np=$1 k=$2 data=$3 dir=$4
  shift 4
  rm -rf "$dir"
  env "$@" timeout 120 mpirun "${MPIRUN_EXTRA[@]}" -np "$np" "${RANK_WRAP[@]}" "$RT" train --device "$DEVICE" --data "$data" --out "$dir" \
    "${MODEL[@]}" --batch-per-rank "$k" --epochs 1 --log-every 1 > "$dir.log" 2>&1
  local rc=$?
  tail -3 "$dir.log" | tee -a "$LOG"
  [ "$rc" = 0 ] || say "train -np $np --batch-per-rank $k exited $rc (log $dir.log)"
}
# The data of every comparison at P: CORR_STEPS x P sequences, so one epoch is exactly CORR_STEPS global steps of P
# sequences. Written once per call and P, into $CDATA.
declare -A CORR_MADE=()
corr_data() {
  CDATA=$DATA_DIR/corr_p$1.h5
  [ -n "${CORR_MADE[$1]:-}" ] && return
  "$RT" gen --force --out "$CDATA" "${SPEC[@]}" --sequences $((CORR_STEPS * $1)) --seed 2 --quiet 2>&1 | tee -a "$LOG"
  CORR_MADE[$1]=1
}
compare() {   # run_a run_b param_rtol label result_tag: bench/compare_runs.py, loss to 1e-5
  [ "$HAVE_H5PY" = 1 ] || return 0
  "$PYTHON" bench/compare_runs.py "$1" "$2" --steps "$CORR_STEPS" --loss-rtol 1e-5 --param-rtol "$3" --label "$4" \
    --out "$WORK/$5.json" 2>&1 | tee -a "$LOG"
}
for P in "${PS_LIST[@]}"; do
  corr_data "$P"
  for ALGO in $CORR_ALGOS; do
    in_budget "correctness P=$P algo=$ALGO" || continue
    tag=corr_p${P}_$ALGO
    if [ "$P" = 1 ]; then
      say "## correctness P=1 (algo $ALGO): one GPU, the same run twice (determinism; the rank split needs P >= 2)"
      train_run 1 1 "$CDATA" "$WORK/${tag}_a" RAGTRAIN_CUDNN_ALGO="$ALGO"
      train_run 1 1 "$CDATA" "$WORK/${tag}_b" RAGTRAIN_CUDNN_ALGO="$ALGO"
      label="P=1 x 1 twice, algo $ALGO"
    else
      say "## correctness P=$P (algo $ALGO): $P ranks x batch one vs 1 rank x batch $P, $CORR_STEPS steps"
      train_run "$P" 1 "$CDATA" "$WORK/${tag}_a" RAGTRAIN_CUDNN_ALGO="$ALGO"
      train_run 1 "$P" "$CDATA" "$WORK/${tag}_b" RAGTRAIN_CUDNN_ALGO="$ALGO"
      label="P=$P x 1 vs 1 x $P, algo $ALGO"
    fi
    compare "$WORK/${tag}_a" "$WORK/${tag}_b" 1e-4 "$label" "$tag"
  done
done

# ---- 2b. across backends: one GPU x batch P == P CPU ranks x batch one (the CPU backend is the reference; MPI's
# all-reduce on the host). Needs one GPU only, so it also runs where P GPUs are not lent: it pins down that the GPU
# backend's batch of P computes what P data-parallel ranks compute together.
if [ "$DEVICE" = cuda ]; then
  for P in ${CROSS_PS:-2 4 8}; do
    in_budget "across backends P=$P" || continue
    corr_data "$P"
    tag=cross_p$P
    say "## across backends P=$P: 1 GPU x batch $P vs $P CPU ranks x batch one, $CORR_STEPS steps"
    train_run 1 "$P" "$CDATA" "$WORK/${tag}_gpu"
    DEVICE=cpu train_run "$P" 1 "$CDATA" "$WORK/${tag}_cpu"
    # Parameters to 1e-3, not 1e-4: cuDNN and the CPU reference round differently in every step (not only in the
    # order of one sum), and Adam turns a near-zero gradient's rounding into a step of about lr. Measured on an
    # H200: worst element 1.8x the 1e-4 bound at P=8 while the losses agreed to 1.1e-6 (doc/performance.md).
    compare "$WORK/${tag}_gpu" "$WORK/${tag}_cpu" 1e-3 "1 GPU x $P vs $P CPU ranks x 1" "$tag"
  done
fi

# ---- 3. watchdog: one of P ranks killed (SIGKILL) or stopped (SIGSTOP) in the middle of training
kill_check() {   # signal [ranks [tag]]   (tag: a prefix of the result files; the shared-GPU runs pass one)
  local sig=$1 np=${2:-$PMAX} tag=${3:-}
  local D=$WORK/${tag}kill_$1 victim=$((np - 1))
  rm -rf "$D"
  mkdir -p "$D"
  say "## watchdog${tag:+ ($tag)}: $np ranks, SIG$sig to rank $victim, --comm-timeout $COMM_TIMEOUT"
  # Each rank writes its pid before it becomes ragtrain (exec keeps the pid), so the signal reaches that rank only.
  # shellcheck disable=SC2016
  mpirun "${MPIRUN_EXTRA[@]}" -np "$np" sh -c 'echo $$ > "'"$D"'/pid.$OMPI_COMM_WORLD_RANK"; exec "$0" "$@"' \
    "${RANK_WRAP[@]}" \
    "$RT" train --device "$DEVICE" --data "$DATA" --out "$D/run" "${MODEL[@]}" --batch-per-rank 1 --epochs 1000 \
    --log-every 50 --comm-timeout "$COMM_TIMEOUT" > "$D/log" 2>&1 &
  local mpid=$! training=false
  for _ in $(seq 1 600); do   # up to 60 s for set-up: the loop (and the watchdog) runs once a step record is there
    if grep -q '"event": *"step"' "$D/run/metrics.jsonl" 2>/dev/null; then training=true; break; fi
    kill -0 "$mpid" 2>/dev/null || break
    sleep 0.1
  done
  local vpid
  vpid=$(cat "$D/pid.$victim" 2>/dev/null)
  if [ "$training" != true ] || [ -z "$vpid" ] || ! kill -0 "$mpid" 2>/dev/null; then
    say "watchdog check SIG$sig: the job did not get to training within 60 s (log $D/log)"
    tail -5 "$D/log" | tee -a "$LOG"
    kill -TERM "$mpid" 2>/dev/null
    wait "$mpid"
    return
  fi
  local t0 t1 rc ended=true
  t0=$(date +%s%N)
  kill -"$sig" "$vpid"
  for _ in $(seq 1 600); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.1; done   # up to 60 s
  if kill -0 "$mpid" 2>/dev/null; then
    ended=false
    say "watchdog check SIG$sig: the job still runs 60 s after the signal: ending it"
    kill -TERM "$mpid"
    sleep 5
  fi
  t1=$(date +%s%N)
  wait "$mpid"
  rc=$?
  for f in "$D"/pid.*; do   # our own ranks only, by pid: a stopped rank left behind gets SIGCONT + SIGKILL
    local p
    p=$(cat "$f")
    if kill -0 "$p" 2>/dev/null; then kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; fi
  done
  local secs msg
  secs=$(( (t1 - t0) / 1000000 ))
  secs=$(printf '%d.%03d' $((secs / 1000)) $((secs % 1000)))
  msg=$(grep -E "rank $victim([^0-9]|$)" "$D/log" | grep -v '^\s*$' | head -3)
  say "watchdog check SIG$sig: job ended after ${secs} s (exit $rc); lines naming rank $victim:"
  say "${msg:-  (none)}"
  "$PYTHON" - "$D" "$sig" "$np" "$victim" "$secs" "$rc" "$ended" "$COMM_TIMEOUT" "$WORK/${tag}kill_$sig.json" <<'EOF'
import json, re, sys
d, sig, p, victim, secs, rc, ended, timeout, out = sys.argv[1:]
lines = [l.rstrip("\n") for l in open(d + "/log", errors="replace")]
named = [l for l in lines if re.search(rf"rank {victim}(\D|$)", l)]
json.dump({"signal": "SIG" + sig, "ranks": int(p), "victim": int(victim), "seconds_to_end": float(secs),
           "exit_code": int(rc), "ended_by_itself": ended == "true", "comm_timeout_s": float(timeout),
           "lines_naming_rank": named[:5], "log_tail": lines[-8:]}, open(out, "w"), indent=1)
EOF
}
if [ "$PMAX" -ge 2 ]; then
  for SIG in KILL STOP; do
    in_budget "watchdog SIG$SIG" && kill_check "$SIG"
  done
else
  say "## watchdog check skipped: it needs P >= 2 ranks (NGPU=$NGPU)"
fi

# ---- 3b. several ranks on ONE GPU (only where NGPU=1): NCCL's multi-rank path without a multi-GPU machine.
# NCCL refuses two ranks on one GPU of one host; given a different NCCL_HOSTID each, it takes them for different
# hosts and connects them through its socket transport (loopback); ragtrain's shared-GPU check follows NCCL's
# notion of a host. The ranks time-share the GPU, so nothing here is timed: it checks the P-rank NCCL code path,
# P ranks x batch one against 1 rank x batch P (the issue's bounds), and the watchdog with ncclCommAbort.
if [ "$DEVICE" = cuda ] && [ "$NGPU" = 1 ] && [ -n "${SHARE_PS-2 4}" ]; then
  export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_IB_DISABLE=1
  # shellcheck disable=SC2016
  RANK_WRAP=(sh -c 'export NCCL_HOSTID=ragtrain-rank-$OMPI_COMM_WORLD_RANK; exec "$0" "$@"')
  np=1
  for P in ${SHARE_PS:-2 4}; do
    in_budget "one GPU shared by P=$P ranks" || continue
    np=$P
    corr_data "$P"
    tag=shared_p$P
    say "## one GPU shared by $P ranks (NCCL over sockets): $P ranks x batch one vs 1 rank x batch $P, $CORR_STEPS steps"
    train_run "$P" 1 "$CDATA" "$WORK/${tag}_a"
    train_run 1 "$P" "$CDATA" "$WORK/${tag}_b"
    compare "$WORK/${tag}_a" "$WORK/${tag}_b" 1e-4 "P=$P x 1 vs 1 x $P, one GPU shared (NCCL sockets)" "$tag"
  done
  if [ "$np" -ge 2 ]; then
    for SIG in KILL STOP; do
      in_budget "watchdog SIG$SIG, one GPU shared" && kill_check "$SIG" "$np" shared_
    done
  fi
  RANK_WRAP=()
fi

# ---- 4. summary
"$PYTHON" bench/summarize_scaling.py "$WORK" "$OUT/scaling_summary.json" 2>&1 | tee "$OUT/scaling_summary.txt" | tee -a "$LOG"
tar -czf "$OUT/work.tgz" -C "$WORK" $(cd "$WORK" && ls -- *.json *.log 2>/dev/null)
say "# done in ${SECONDS} s"
