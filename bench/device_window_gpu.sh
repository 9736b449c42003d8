#!/usr/bin/env bash
# The device window's whole GPU verification in one call (about 3-4 minutes on one H100): the GPU unit tests of the
# device window, bench/device_window_check.sh (resident vs device vs host windows through `train`, bitwise, resume
# mid-epoch) and bench/data_path.sh (the three placements at K = 1 and 128: load rate, time to the first step, io
# wait, epoch time, peak RSS). Writes check.log, data_path.log and data_path.json to $OUT; exit 0 when all passed.
# usage, from the repository root:   BIN=build-gpu/bin OUT=runs/device_window bench/device_window_gpu.sh
set -uo pipefail
BIN=${BIN:-build-gpu/bin}
OUT=${OUT:-runs/device_window}
mkdir -p "$OUT"
rc=0
nvidia-smi -L | tee "$OUT/check.log"
timeout 180 "$BIN/gpu_tests" --gtest_filter='DeviceWindow.*' 2>&1 | tail -6 | tee -a "$OUT/check.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
BIN=$BIN timeout 240 bench/device_window_check.sh 2>&1 | tee -a "$OUT/check.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
BIN=$BIN DEVICE=cuda SEQUENCES=${SEQUENCES:-120000} OUT=$OUT timeout 300 bench/data_path.sh 2>&1 | tee "$OUT/data_path.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
echo "device window on the GPU: $([ $rc -eq 0 ] && echo all passed || echo FAILED)"
exit $rc
