#!/usr/bin/env bash
# The trainer-level check of the GPU paths: `ragtrain train` on one small data set (12 features, 5 classes, lengths
# 10..60, 300 training and 100 validation sequences), 4 epochs of Adam, once per path and K, then each path's epoch
# train and validation losses against the CPU's (the reference), as the largest relative difference, into
# $OUT/train_agreement.txt (refused if it exists). The backend tests check single steps; this checks the training
# loop around them (e.g. steps launched ahead, Backend::prepare_next) over whole epochs.
# usage, from the repository root:   BIN=build-gpu/bin OUT=$OUT [KS="4 24"] [PATHS="fused cudnn"] bench/train_agreement.sh
# PATHS: the GPU paths (--device cuda --lstm P); PATHS= (empty) runs the CPU alone. Exit 1 if a run fails.
set -uo pipefail
BIN=${BIN:?set BIN to the folder holding ragtrain}
OUT=${OUT:?set OUT to the output folder}
KS=${KS:-4 24}
PATHS=${PATHS-fused cudnn}
mkdir -p "$OUT"
[ -e "$OUT/train_agreement.txt" ] && { echo "train_agreement.sh: $OUT/train_agreement.txt exists" >&2; exit 2; }
W=$(mktemp -d /tmp/ragtrain-agreement.XXXXXX)
trap 'rm -rf "$W"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
R=$BIN/ragtrain
G=(--features 12 --classes 5 --min-length 10 --max-length 60)
"$R" gen --out "$W/t.h5" "${G[@]}" --sequences 300 --seed 3 > /dev/null || exit 1
"$R" gen --out "$W/v.h5" "${G[@]}" --sequences 100 --seed 4 > /dev/null || exit 1
rc=0
for K in $KS; do
  for p in $PATHS cpu; do
    dev=(--device cuda --lstm "$p")
    [ "$p" = cpu ] && dev=(--device cpu)
    timeout 300 mpirun -np 1 "$R" train "${dev[@]}" --data "$W/t.h5" --val "$W/v.h5" --epochs 4 --batch-per-rank "$K" \
      --pool last --optimizer adam --lr 3e-3 --hidden 50 --out "$W/run_${p}_k$K" --seed 1 > "$W/log_${p}_k$K.txt" 2>&1
    r=$?
    echo "$p K=$K rc=$r $(grep -a 'validation accuracy' "$W/log_${p}_k$K.txt")"
    [ $r = 0 ] || { rc=1; tail -5 "$W/log_${p}_k$K.txt"; }
  done
done
[ $rc = 0 ] || exit 1
python3 - "$W" "$KS" "$PATHS" <<'PY' | tee "$OUT/train_agreement.txt"
import json, sys
w, ks, paths = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
for K in ks:
    runs = {}
    for tag in paths + ["cpu"]:
        eps = [json.loads(l) for l in open(f"{w}/run_{tag}_k{K}/metrics.jsonl") if '"event":"epoch"' in l]
        runs[tag] = [(e["train_loss"], e["val_loss"]) for e in eps]
    print(f"K={K}")
    for tag, v in runs.items():
        print(f"  {tag:6s} " + "  ".join(f"{a:.7f}/{b:.7f}" for a, b in v))
    for tag in paths:
        d = max(max(abs(a[i] - b[i]) / abs(b[i]) for i in (0, 1)) for a, b in zip(runs[tag], runs["cpu"]))
        print(f"  {tag} vs cpu: max relative difference of the epoch train/val losses {d:.2e}")
PY
