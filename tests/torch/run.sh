#!/usr/bin/env bash
# The PyTorch checks as a script suite of scripts/run-tests.sh, on the CPU backend: tools/test_torch_agreement.py
# (loss trajectories of SGD and Adam, and predict, against nn.LSTM + nn.Linear), tools/test_torch_model.py (the
# PyTorch model's own paths), tests/torch/test_interop.py (ragtrain -> PyTorch -> ragtrain for every --normalize
# and --pool: PyTorch on raw features predicts what ragtrain does) and tools/torch_interop.py's command line. One
# "[  PASSED  ] check" / "[  FAILED  ] check" line per check, then "N passed, N failed, N skipped". Skipped, and
# counted as skipped, where /usr/bin/python3 lacks torch, h5py or numpy (scripts/install-deps.sh installs
# Debian's python3-torch, python3-h5py and python3-numpy). /usr/bin/python3 on purpose: the first python3 on PATH
# may be another interpreter (a virtual environment, a conda base) without these packages.
# usage: tests/torch/run.sh BUILD_DIR     (RAGTRAIN_TORCH_PYTHON=PATH: another interpreter, e.g. to see the skip)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
PY=${RAGTRAIN_TORCH_PYTHON:-/usr/bin/python3}
# the loss trajectory and predict for SGD and Adam, two models (8); the model's own checks (13); the round trip for
# 3 modes x 3 poolings (24); the interop CLI (10)
CHECKS=55

if [ ! -x "$PY" ]; then
  echo "[  SKIPPED ] torch agreement: no $PY (apt-get install python3-torch python3-h5py python3-numpy)"
  echo "0 passed, 0 failed, $CHECKS skipped"
  exit 0
fi
if ! missing=$("$PY" -c 'import importlib.util as u, sys
m = [n for n in ("torch", "h5py", "numpy") if u.find_spec(n) is None]
print(" ".join(m)); sys.exit(1 if m else 0)' 2>&1); then
  echo "[  SKIPPED ] torch agreement: $PY lacks ${missing:-python} (apt-get install python3-torch python3-h5py python3-numpy)"
  echo "0 passed, 0 failed, $CHECKS skipped"
  exit 0
fi

OUT=$(mktemp -d "${TMPDIR:-/tmp}/ragtrain-torch.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
"$PY" "$ROOT/tools/test_torch_agreement.py" --bin "$BUILD/bin/ragtrain" --out "$OUT" --devices cpu >"$OUT/log" 2>&1
rc=$?
# One line per check from the tool's JSON; a run that ended before writing it counts as one failure. On a
# failure the tool's log comes first, so that the counts stay the last line (scripts/run-tests.sh reads it).
report=$("$PY" - "$OUT/torch_agreement.json" "$rc" <<'PY'
import json, sys
try:
    checks = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit(3)
passed = sum(1 for c in checks if c["passed"])
for c in checks:
    detail = ", ".join(f"{k}={v}" for k, v in c.items() if k not in ("check", "passed"))
    print(f"[  {'PASSED' if c['passed'] else 'FAILED'}  ] {c['check']} ({detail})")
failed = len(checks) - passed + (1 if int(sys.argv[2]) != 0 and passed == len(checks) else 0)
print(f"{passed} passed, {failed} failed, 0 skipped")
sys.exit(1 if failed else 0)
PY
)
status=$?
[ "$status" -ne 0 ] && tail -30 "$OUT/log" | sed 's/^/  log: /'
if [ "$status" -eq 3 ]; then
  echo "[  FAILED  ] torch agreement: tools/test_torch_agreement.py ended with $rc before writing its results"
  passed=0 failed=1
else
  echo "$report" | sed '$d'
  read -r passed _ failed _ <<<"$(echo "$report" | tail -1 | tr -d ,)"
fi

# The PyTorch model's own paths (tools/test_torch_model.py prints "ok   NAME" or "FAIL NAME" per check).
while IFS= read -r line; do
  case "$line" in
    "ok   "*) echo "[  PASSED  ] torch model: ${line#ok   }"; passed=$((passed + 1)) ;;
    "FAIL "*) echo "[  FAILED  ] torch model: ${line#FAIL }"; failed=$((failed + 1)) ;;
  esac
done < <("$PY" "$ROOT/tools/test_torch_model.py" 2>&1)

# ragtrain -> PyTorch -> ragtrain for every --normalize mode and --pool; its last line has its counts.
"$PY" "$ROOT/tests/torch/test_interop.py" --bin "$BUILD/bin/ragtrain" --out "$OUT/interop" >"$OUT/interop.log" 2>&1
sed '$d' "$OUT/interop.log"
if read -r p _ f _ <<<"$(tail -1 "$OUT/interop.log" | tr -d ,)" && [[ "$p" =~ ^[0-9]+$ && "$f" =~ ^[0-9]+$ ]]; then
  passed=$((passed + p)); failed=$((failed + f))
else
  echo "[  FAILED  ] interop round trip: tests/torch/test_interop.py ended before its counts"; failed=$((failed + 1))
fi

# tools/torch_interop.py as a user meets it: a run folder as input, errors with exit 2 and a hint, no output that
# destroys data (the input, a checkpoint; another file only with --force), DDP's "module." keys.
I="$ROOT/tools/torch_interop.py"
check() {   # check NAME EXPECTED_RC EXPECTED_TEXT CMD...: the exit code and a piece of the output
  local name=$1 want=$2 text=$3; shift 3
  local got out
  out=$("$@" 2>&1); got=$?
  if [ "$got" -eq "$want" ] && [[ "$out" == *"$text"* ]]; then
    echo "[  PASSED  ] interop: $name"; passed=$((passed + 1))
  else
    echo "[  FAILED  ] interop: $name (exit $got, expected $want and '$text'): $out"; failed=$((failed + 1))
  fi
}
run_dir=$(dirname "$(find "$OUT/work" -name checkpoint.h5 | sort | head -1)")
check "import of a run folder names pool and normalisation" 0 ", --normalize none" "$PY" "$I" import "$run_dir" "$OUT/m.pt"
check "import onto an existing file needs --force" 2 "add --force" "$PY" "$I" import "$run_dir" "$OUT/m.pt"
check "import --force replaces it" 0 "wrote" "$PY" "$I" import "$run_dir" "$OUT/m.pt" --force
check "a missing input" 2 "no such file" "$PY" "$I" import "$OUT/nope.h5" "$OUT/n.pt"
check "export onto a checkpoint, even with --force" 2 "never replaced" \
  "$PY" "$I" export "$OUT/m.pt" "$run_dir/checkpoint.h5" --force
check "export onto its input" 2 "is the input" "$PY" "$I" export "$OUT/m.pt" "$OUT/m.pt" --force
"$PY" -c 'import sys, torch; sd = torch.load(sys.argv[1]); torch.save({"module." + k: v for k, v in sd.items()}, sys.argv[2])' \
  "$OUT/m.pt" "$OUT/ddp.pt"
check "export drops DDP's module. prefix" 0 "prefix" "$PY" "$I" export "$OUT/ddp.pt" "$OUT/ddp.h5"
check "the exported tensors are the run's, bit for bit" 0 "same" "$PY" -c '
import sys, h5py, numpy as np
run, out = (h5py.File(p, "r")["params"] for p in sys.argv[1:3])
print("same" if sorted(run) == sorted(out) and all(np.array_equal(run[k][...], out[k][...]) for k in run) else "differ")
' "$run_dir/checkpoint.h5" "$OUT/ddp.h5"
# export never defaults to a pooling other than the state_dict's or ragtrain's: a carried one wins and must not be
# contradicted; a plain nn.LSTM + nn.Linear state_dict gets ragtrain's default, mean.
carried="$OUT/interop/none_last/model.pt"   # test_interop.py's import of a --pool last run
check "export with a --pool the state_dict contradicts" 2 "leave the pooling out" \
  "$PY" "$I" export "$carried" "$OUT/contra.h5" --pool mean
"$PY" -c 'import sys, torch; sd = torch.load(sys.argv[1])
torch.save({k: v for k, v in sd.items() if k.startswith(("lstm.", "fc."))}, sys.argv[2])' "$carried" "$OUT/plain.pt"
check "export of a plain state_dict pools as ragtrain's default" 0 "pool mean (ragtrain's default" \
  "$PY" "$I" export "$OUT/plain.pt" "$OUT/plain.h5"
echo "$passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
