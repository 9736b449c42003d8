#!/usr/bin/env bash
# The docs that print output, run as written (a suite of scripts/run-tests.sh). First doc/tutorial.md: every "$"
# command run in order and what it prints compared with the page, numbers within a stated tolerance
# (tests/doc/tutorial.py, one line per command; needs only python3). Then the worked example of doc/from-pytorch.md, run as written (a suite of scripts/run-tests.sh): the fenced blocks
# between "<!-- worked example: begin" and "<!-- worked example: end -->", in order. A ```python block is written
# to the file its first line names ("# file: net.py ..."); a ```sh block is run by bash -e in a scratch folder
# that has the source tree's tools/ and the build's ragtrain first on PATH, with `python3` the interpreter that has
# torch. One "[  PASSED  ]" / "[  FAILED  ]" line per sh block (the python blocks assert what they check), then
# "N passed, N failed, N skipped" for both pages together. The worked example is skipped, and counted as skipped,
# where /usr/bin/python3 lacks torch, h5py or numpy, as the suite torch is.
# usage: tests/doc/run.sh BUILD_DIR     (RAGTRAIN_TORCH_PYTHON=PATH: another interpreter)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
PY=${RAGTRAIN_TORCH_PYTHON:-/usr/bin/python3}
DOC=$ROOT/doc/from-pytorch.md
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ragtrain-doc.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/blocks" "$TMP/work" "$TMP/bin"

# doc/tutorial.md; its counts are added to the worked example's in every last line below (finish).
python3 "$ROOT/tests/doc/tutorial.py" "$BUILD" >"$TMP/tutorial.log" 2>&1
sed '$d' "$TMP/tutorial.log"
read -r tut_p tut_f tut_s < <(tail -1 "$TMP/tutorial.log" |
  sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p')
if [ -z "${tut_p:-}" ]; then
  echo "[  FAILED  ] doc/tutorial.md: tests/doc/tutorial.py ended without its counts"; tail -5 "$TMP/tutorial.log"
  tut_p=0 tut_f=1 tut_s=0
fi
# Prints the last line (both pages' counts) and exits: 0 when nothing failed.
finish() {
  local f=$(($2 + tut_f))
  echo "$(($1 + tut_p)) passed, $f failed, $(($3 + tut_s)) skipped"
  exit $((f > 0))
}

# Splits the worked example into blocks/NN.sh and blocks/NN.py (in document order); prints how many of each.
awk -v dir="$TMP/blocks" '
  /<!-- worked example: begin/ { inside = 1; next }
  /<!-- worked example: end -->/ { inside = 0; next }
  !inside { next }
  /^```(sh|python)$/ && !fence { fence = 1; n++; kind = ($0 ~ /python/) ? "py" : "sh"; file = sprintf("%s/%02d.%s", dir, n, kind); next }
  /^```$/ && fence { fence = 0; close(file); next }
  fence { print > file }
' "$DOC"
n_sh=$(find "$TMP/blocks" -name '*.sh' | wc -l)
n_py=$(find "$TMP/blocks" -name '*.py' | wc -l)
# The example as the page has it today: both directions (export and import) and the checks in Python. Fewer
# blocks means the page lost part of it; the suite fails rather than passing with less.
if [ "$n_sh" -lt 5 ] || [ "$n_py" -lt 4 ] || ! grep -q "torch_interop.py export" "$TMP"/blocks/*.sh ||
   ! grep -q "torch_interop.py import" "$TMP"/blocks/*.sh; then
  echo "[  FAILED  ] doc/from-pytorch.md: the worked example has $n_sh sh and $n_py python blocks (expected >= 5 and >= 4, export and import)"
  finish 0 1 0
fi

if [ ! -x "$PY" ] || ! missing=$("$PY" -c 'import importlib.util as u, sys
m = [n for n in ("torch", "h5py", "numpy") if u.find_spec(n) is None]
print(" ".join(m)); sys.exit(1 if m else 0)' 2>&1); then
  echo "[  SKIPPED ] doc/from-pytorch.md worked example: $PY lacks ${missing:-python} (apt-get install python3-torch python3-h5py python3-numpy)"
  finish 0 0 "$n_sh"
fi

ln -s "$ROOT/tools" "$TMP/work/tools"
ln -s "$PY" "$TMP/bin/python3"
export PATH="$TMP/bin:$BUILD/bin:$PATH"
passed=0 failed=0 skipped=0
for block in "$TMP"/blocks/*; do
  case "$block" in
    *.py)
      name=$(head -1 "$block" | sed -n 's/^# file: \([A-Za-z0-9_.-]*\).*/\1/p')
      if [ -z "$name" ]; then
        echo "[  FAILED  ] python block $(basename "$block"): its first line must be '# file: NAME.py'"
        failed=$((failed + 1))
      else
        cp "$block" "$TMP/work/$name"
      fi
      ;;
    *.sh)
      label="sh block $(basename "$block" .sh): $(head -1 "$block" | cut -c1-90)"
      if (cd "$TMP/work" && bash -e -o pipefail "$block") >"$TMP/log" 2>&1; then
        echo "[  PASSED  ] $label"
        sed 's/^/    /' "$TMP/log" | grep -E '^    (PyTorch|accuracy|largest)'   # the numbers the page talks about
        passed=$((passed + 1))
      else
        echo "[  FAILED  ] $label"
        tail -20 "$TMP/log" | sed 's/^/    /'
        failed=$((failed + 1))
        # Later blocks build on this one's files: count them as failed without running them.
        rest=$(ls "$TMP"/blocks/*.sh | awk -v b="$block" 'found { n++ } $0 == b { found = 1 } END { print n + 0 }')
        [ "$rest" -gt 0 ] && echo "[  FAILED  ] the $rest sh block(s) after it, not run"
        failed=$((failed + rest))
        break
      fi
      ;;
  esac
done
finish "$passed" "$failed" "$skipped"
