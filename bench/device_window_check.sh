#!/usr/bin/env bash
# The CUDA device window on a GPU machine: a shard held resident, in device windows (it does not fit
# --max-device-memory) and in host windows (it does not fit --max-memory) trains bitwise the same model, at K = 1 and
# 4, and resumed from a step checkpoint in the middle of a windowed epoch; a resident shard that starts on windows
# read from the file and becomes resident trains it too (early and late switch, and with device windows after the
# switch); with two GPUs, on 2 ranks too. Prints one
# line per comparison and "device window check: N passed, M failed"; exit 0 only when all passed.
# usage, from the repository root:   BIN=build-gpu/bin bench/device_window_check.sh      (about 2 minutes on one H100)
#   SEQUENCES (8000), KS ("1 4"), LSTMS ("cudnn fused"), DEVICE (cuda), DEVICE_BUDGET (1M), HOST_BUDGET (3M). The
#   script itself on CPUs, small: RAGTRAIN_CPU_DEVICE_MEMORY=1G DEVICE=cpu SEQUENCES=400 LSTMS=cudnn
#   DEVICE_BUDGET=64K HOST_BUDGET=200K BIN=build/bin bench/device_window_check.sh
set -uo pipefail
BIN=${BIN:-build/bin}
WORK=${WORK:-/tmp/ragtrain-device-window}
PY=${PY:-python3}
SEQUENCES=${SEQUENCES:-8000}
KS=${KS:-1 4}
LSTMS=${LSTMS:-cudnn fused}
DEVICE=${DEVICE:-cuda}
DEVICE_BUDGET=${DEVICE_BUDGET:-1M}   # (b): under the shard, over two steps
HOST_BUDGET=${HOST_BUDGET:-3M}       # (c): under the shard, over the model and two steps
rm -rf "$WORK" && mkdir -p "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
data=$WORK/train.h5
# ~10 MB: 8,000 sequences of 20..60 steps, F = 8 (contiguous, as gen writes it: host windows read it with pread).
"$BIN/ragtrain" gen --out "$data" --sequences "$SEQUENCES" --features 8 --min-length 20 --max-length 60 --classes 5 \
  --seed 4 --quiet || exit 1
pass=0 fail=0
check() {   # NAME, then a command that succeeds when the check holds
  local name=$1; shift
  if "$@"; then echo "ok      $name"; pass=$((pass + 1)); else echo "FAILED  $name"; fail=$((fail + 1)); fi
}
# A checkpoint's model: parameters, optimizer state, normalisation — every value (h5dump, or h5py where it is absent).
model() {
  if command -v h5dump > /dev/null; then
    h5dump -g /params -g /optimizer -g /normalization "$1" 2>&1 | grep -v '^HDF5'
  else
    "$PY" -c "import h5py,sys,hashlib
f=h5py.File(sys.argv[1],'r'); h=hashlib.sha256()
def add(name, obj):
    if isinstance(obj, h5py.Dataset): h.update(name.encode()); h.update(obj[()].tobytes())
for g in ('params','optimizer','normalization'):
    if g in f: f[g].visititems(add)
print(h.hexdigest())" "$1"
  fi
}
same_model() { [ -f "$1" ] && [ -f "$2" ] && [ "$(model "$1")" == "$(model "$2")" ]; }
placement() {   # RUN PLACEMENT: summary.json says where the shard was held, and device windows have steps
  "$PY" -c "import json,sys; s=json.load(open(sys.argv[1]+'/summary.json')); p=sys.argv[2];
sys.exit(0 if s['shard_placement']==p and (p=='resident')==(s['device_window_steps']==0) else 1)" "$1" "$2"
}
started_streamed() {   # RUN: it started on windows and became resident (or kept device windows) at a later step
  "$PY" -c "import json,sys; s=json.load(open(sys.argv[1]+'/summary.json'))
sys.exit(0 if s['started_streamed'] and s['resident_from_step'] > 0 else 1)" "$1"
}
launch() { local np=$1; shift; if [ "$np" -gt 1 ]; then mpirun -np "$np" "$@"; else "$@"; fi; }

for np in 1 $([ "$gpus" -ge 2 ] || [ "$DEVICE" = cpu ] && echo 2); do
 for lstm in $LSTMS; do   # both read the window: cuDNN's gather (graphs) and the fused kernel
  for k in $KS; do
    opts="--data $data --device $DEVICE --epochs 2 --hidden 16 --batch-per-rank $k --quiet --lstm $lstm"
    steps=$(( (SEQUENCES + np * k - 1) / (np * k) ))    # per epoch
    every=$(( steps / 3 ))                          # step checkpoints; the 5th is in the middle of epoch 2
    r=$WORK/np${np}_${lstm}_k$k
    launch "$np" "$BIN/ragtrain" train $opts --out "$r-resident" > "$r-resident.log" 2>&1
    # (b): resident on the host; 1M of device memory holds windows of a few hundred steps (tens per epoch).
    launch "$np" "$BIN/ragtrain" train $opts --out "$r-device" --max-device-memory $DEVICE_BUDGET --checkpoint-every $every \
      --keep 10 > "$r-device.log" 2>&1
    # (c): over --max-memory: host windows read from the file, each copied to the device.
    launch "$np" "$BIN/ragtrain" train $opts --out "$r-host" --max-memory $HOST_BUDGET > "$r-host.log" 2>&1
    check "np=$np $lstm K=$k resident placement" placement "$r-resident" resident
    check "np=$np $lstm K=$k device-window placement" placement "$r-device" device_window
    check "np=$np $lstm K=$k host-window placement" placement "$r-host" host_window
    check "np=$np $lstm K=$k device window == resident" same_model "$r-resident/checkpoint.h5" "$r-device/checkpoint.h5"
    check "np=$np $lstm K=$k host window == resident" same_model "$r-resident/checkpoint.h5" "$r-host/checkpoint.h5"
    # Resumed in the middle of epoch 2 (not on a window boundary of the first run) into another folder, windowed.
    mid=$(printf '%s/checkpoint-step%09d.h5' "$r-device" $(( 5 * every )))
    launch "$np" "$BIN/ragtrain" train $opts --out "$r-resumed" --max-device-memory $DEVICE_BUDGET --resume "$mid" \
      > "$r-resumed.log" 2>&1
    check "np=$np $lstm K=$k device window resumed mid-epoch == resident" same_model "$r-resident/checkpoint.h5" \
      "$r-resumed/checkpoint.h5"
    # A resident shard that starts streamed (doc/hpc.md "Where the first step stands"): windows of 5 steps from the
    # file while the shard loads, then the switch (early: at the first boundary the load has finished by; late: the
    # load held back 200 ms, so windows go on for a while; device: the device budget keeps device windows after it).
    RAGTRAIN_TEST_WINDOW_STEPS=5 launch "$np" "$BIN/ragtrain" train $opts --out "$r-early" > "$r-early.log" 2>&1
    RAGTRAIN_TEST_WINDOW_STEPS=5 RAGTRAIN_TEST_LOAD_DELAY_MS=200 launch "$np" "$BIN/ragtrain" train $opts \
      --out "$r-late" > "$r-late.log" 2>&1
    RAGTRAIN_TEST_WINDOW_STEPS=5 launch "$np" "$BIN/ragtrain" train $opts --out "$r-early-device" \
      --max-device-memory $DEVICE_BUDGET > "$r-early-device.log" 2>&1
    for v in early late early-device; do
      check "np=$np $lstm K=$k started streamed ($v)" started_streamed "$r-$v"
      check "np=$np $lstm K=$k started streamed ($v) == resident" same_model "$r-resident/checkpoint.h5" \
        "$r-$v/checkpoint.h5"
    done
  done
 done
done
echo "device window check: $pass passed, $fail failed (logs in $WORK)"
[ "$fail" -eq 0 ]
