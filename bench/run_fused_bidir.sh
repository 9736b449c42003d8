#!/usr/bin/env bash
# The bidirectional fused kernel in ONE device call: the fused GPU tests (the bidirectional ones and the
# unidirectional ones that share its code: agreement with the CPU reference, training, bitwise reruns, fallback),
# the model-option tests (bidirectional x pool against the CPU reference, --lstm auto), then `ragtrain bench` of
# H=50 bidirectional with --lstm cudnn and --lstm fused at K=1 and K=32 (and unidirectional fused H=50 at both K, to
# see that the shared code did not slow it), on the same data as bench/run_fused.sh (F=36, 10 classes, lengths
# 60..130, 2000 sequences, Adam, balanced schedule), and PyTorch's eager loop on the bidirectional model
# (bench/torch_reference.py --bidirectional). With BASE_BIN (a build of the commit before), the unidirectional fused
# runs alternate between the two binaries, twice each. Prints a table of seq/s last.
# usage, from the repository root on the GPU machine:   BIN=build-dev2/bin OUT=$OUT bench/run_fused_bidir.sh
# (BIN: stripped copies of build-gpu/bin/{ragtrain,gpu_tests} from `make BUILD=build-gpu PORTABLE=1 bench-gpu`.)
# TESTS=0 skips the tests. Output: $OUT/bench.log, $OUT/tests.log, $OUT/summary.txt.
set -uo pipefail
BIN=${BIN:-build-dev2/bin}
OUT=${OUT:-runs/bench-fused-bidir}
WORK=${WORK:-/tmp/ragtrain-bench-bidir}
TESTS=${TESTS:-1}
BASE_BIN=${BASE_BIN:-}      # optional: the binaries before, for the unidirectional A/B
SCRIPTS=${SCRIPTS:-bench}   # where torch_reference.py is
common=$(dirname "$0")/bench_common.sh
[ -f "$common" ] || common=bench/bench_common.sh
. "$common"
ldd "$BIN/ragtrain" "$BIN/gpu_tests" | grep 'not found' && exit 1

if [ "$TESTS" = 1 ]; then
  filter='FusedBidir*:FusedDeterminism.*:FusedLayout.*:FusedFallback.*:FusedAuto.*:FusedAhead.*'
  filter+=':FusedAgreement.ClassificationRegistersH50:FusedAgreement.ClassificationRegistersH55'
  filter+=':FusedAgreement.ClassificationClusterH100:FusedAgreement.ClassificationH50SeventySequences'
  filter+=':FusedPoolAgreement.*RegistersH50:FusedTraining.Sgd100StepsK1:FusedTraining.Sgd100StepsK24'
  filter+=':GpuModelOptions.*'
  timeout 180 mpirun -np 1 "$BIN/gpu_tests" --gtest_filter="$filter" 2>&1 | tee "$OUT/tests.log" |
    grep -E '^\[ +(OK|FAILED|PASSED) |fused|Failure|error' | head -120
fi

run() {   # name K steps lstm extra...   (RAGTRAIN: the binary, $BIN/ragtrain by default)
  local name=$1 K=$2 steps=$3 lstm=$4
  shift 4
  timeout 120 mpirun -np 1 "${RAGTRAIN:-$BIN/ragtrain}" bench --device cuda --lstm "$lstm" --pool last --hidden 50 \
    "${DATA[@]}" \
    --optimizer adam --lr 1e-3 --batch-per-rank "$K" --schedule balanced --steps "$steps" --warmup 100 \
    --out "$WORK/$name.json" "$@" 2>&1 | tee -a "$LOG" | grep -oE '^  cuda .*|LSTM (fused|cuDNN).*|rror.*' | cut -c1-200
}
run bi_cudnn_k1 1 1000 cudnn --bidirectional
run bi_fused_k1 1 5000 fused --bidirectional
run bi_auto_k1 1 2000 auto --bidirectional
run bi_cudnn_k32 32 200 cudnn --bidirectional
run bi_fused_k32 32 3000 fused --bidirectional
run bi_auto_k32 32 1000 auto --bidirectional
run uni_fused_k1 1 5000 fused
run uni_fused_k32 32 3000 fused
names="bi_cudnn_k1 bi_fused_k1 bi_auto_k1 bi_cudnn_k32 bi_fused_k32 bi_auto_k32 uni_fused_k1 uni_fused_k32"
if [ -n "$BASE_BIN" ] && [ -x "$BASE_BIN/ragtrain" ]; then
  for rep in 1 2; do
    RAGTRAIN=$BASE_BIN/ragtrain run base_uni_fused_k1_$rep 1 5000 fused
    run uni_fused_k1_$rep 1 5000 fused
    RAGTRAIN=$BASE_BIN/ragtrain run base_uni_fused_k32_$rep 32 3000 fused
    run uni_fused_k32_$rep 32 3000 fused
    names+=" base_uni_fused_k1_$rep uni_fused_k1_$rep base_uni_fused_k32_$rep uni_fused_k32_$rep"
  done
fi
for K in 1 32; do
  steps=600
  [ "$K" != 1 ] && steps=150
  timeout 150 python3 "$SCRIPTS/torch_reference.py" --data "$WORK/data.h5" --hidden 50 --batch "$K" --bidirectional \
    --steps "$steps" --warmup 30 --out "$WORK/bi_torch_k$K.json" 2>&1 | tee -a "$LOG" | tail -1
done
names+=" bi_torch_k1 bi_torch_k32"

python3 - "$WORK" $names <<'EOF' 2>&1 | tee "$OUT/summary.txt"
import json, os, sys
work = sys.argv[1]
print("# H=50, F=36, 10 classes, lengths 60..130, Adam, one GPU: seq/s (us/step)")
for name in sys.argv[2:]:
    try:
        r = json.load(open(os.path.join(work, name + ".json")))
        print(f"{name:>14} {r['sequences_per_second']:12.0f} ({r['us_per_step']:7.1f})")
    except (OSError, ValueError, KeyError) as e:
        print(f"{name:>14} missing ({e})")
EOF
