#!/usr/bin/env bash
# Builds on clusters and installs: the Makefile's library detection as environment modules present MPI and
# parallel HDF5, and `make install`.
#   - detection: by default MPI comes from the wrapper compiler (mpicc --showme) and HDF5 from pkg-config or h5pcc;
#   - relocated: the same MPI and HDF5 reached only through a prefix of links (include/, lib/, lib/pkgconfig/*.pc,
#     as a module provides them), the system's own paths hidden (PKG_CONFIG_LIBDIR, no wrapper, no h5pcc), once
#     through PKG_CONFIG_PATH and once through MPI_HOME/HDF5_HOME. Each builds tests/build/reloc_probe (the
#     translation units of the data path's parallel reads: MPI-IO open, header validation, collective hyperslab
#     reads; the full binary would take minutes without ccache), checks that every MPI and HDF5 header it compiled
#     and every MPI and HDF5 library it loads is the prefix's, and runs it on 2 ranks;
#   - install: `make install PREFIX=...` and its installed binary, recipes, job script and docs, used from
#     elsewhere; `make uninstall` removes it again; DESTDIR stages the same tree;
#   - no path only x86 machines have in the Makefile, scripts/, jobs/ or tests/ (GH200 nodes are aarch64);
#   - no function in src/ longer than 150 lines (scripts/check-function-length.py).
# usage: tests/build/test_build.sh BUILD_DIR   last line: "N passed, N failed, N skipped" (scripts/run-tests.sh)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
BIN=$BUILD/bin/ragtrain
BUILD_ARG=${BUILD#"$ROOT"/}   # as `make test` named it (relative to the source tree), so that make finds it up to date
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# The sub-makes below are not part of the `make test` that may have started this script: its flags and job
# server are not theirs. ccache, where installed, makes a repeated relocated build cheap (the prefix's path is
# the same every time: it lies in BUILD).
unset MAKEFLAGS MFLAGS MAKELEVEL
CXX_FOR_TEST="g++"
command -v ccache >/dev/null 2>&1 && CXX_FOR_TEST="ccache g++"

passed=0 failed=0 skipped=0
pass() { echo "[  PASSED  ] $1"; passed=$((passed + 1)); }
fail() { echo "[  FAILED  ] $1: $2"; failed=$((failed + 1)); }
skip() { echo "[  SKIPPED ] $1: $2"; skipped=$((skipped + 1)); }

T=$BUILD/relocated-test   # stable, so that ccache sees the same paths every run
rm -rf "$T"
mkdir -p "$T/none"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ragtrain-build.XXXXXX")
cleanup() {
  if [ -n "${RAGTRAIN_KEEP_TEST_DIR:-}" ]; then echo "kept $T $TMP"; else rm -rf "$T" "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mk() { make -C "$ROOT" --no-print-directory "$@"; }
# A value of `make show-config` ("NAME = value" or "NAME : value"), for the settings given.
config_value() {
  local name=$1; shift
  mk show-config "$@" 2>/dev/null | sed -n "s/^$name *[:=] *//p"
}
# The first folder of a list of compiler flags (-I or -L) that holds the file $3.
dir_with() {
  local d
  for d in $(echo "$2" | tr ' ' '\n' | sed -n "s/^$1//p"); do
    [ -e "$d/$3" ] && { echo "$d"; return 0; }
  done
  return 1
}

"$BIN" gen --out "$TMP/data.h5" --sequences 33 --features 3 --min-length 4 --max-length 20 --classes 2 --quiet ||
  { echo "cannot generate data with $BIN"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

# ---- default detection: the wrapper compiler for MPI, pkg-config or h5pcc for HDF5 -------------------------
name="detection: MPI from mpicc --showme, parallel HDF5 from pkg-config/h5pcc, both found"
mpi_from=$(config_value MPI) hdf5_from=$(config_value "parallel HDF5")
if ! command -v mpicc >/dev/null 2>&1; then
  skip "$name" "no mpicc on PATH"
elif [[ "$mpi_from" == "✓ from mpicc --showme" ]] && [[ "$hdf5_from" == "✓ from "* ]] &&
     [[ "$hdf5_from" != *HDF5_HOME* ]]; then
  pass "$name"
else
  fail "$name" "MPI: '$mpi_from', HDF5: '$hdf5_from' (make show-config)"
fi

# ---- the prefixes a module would provide, made of links to the system's own files -------------------------
MPI_CFLAGS=$(config_value MPI_CFLAGS) MPI_LIBS=$(config_value MPI_LIBS)
HDF5_CFLAGS=$(config_value HDF5_CFLAGS) HDF5_LIBS=$(config_value HDF5_LIBS)
mpi_inc=$(dir_with -I "$MPI_CFLAGS" mpi.h) mpi_lib=$(dir_with -L "$MPI_LIBS" libmpi.so)
hdf5_inc=$(dir_with -I "$HDF5_CFLAGS" H5pubconf.h) hdf5_lib=$(dir_with -L "$HDF5_LIBS" libhdf5.so)
have_prefixes=0
if [ -n "$mpi_inc" ] && [ -n "$mpi_lib" ] && [ -n "$hdf5_inc" ] && [ -n "$hdf5_lib" ]; then
  # A library as a module has it: the link-time name and the soname the loader looks for, in PREFIX/lib.
  link_lib() {   # $1 real folder, $2 library name (libmpi), $3 prefix
    local real soname
    real=$(readlink -f "$1/$2.so")
    soname=$(objdump -p "$real" 2>/dev/null | sed -n 's/^ *SONAME *//p')
    ln -s "$real" "$3/lib/$2.so" && { [ -z "$soname" ] || ln -sf "$real" "$3/lib/$soname"; }
  }
  write_pc() {   # $1 prefix, $2 pc name, $3 library
    cat >"$1/lib/pkgconfig/$2.pc" <<EOF
prefix=$1
includedir=\${prefix}/include
libdir=\${prefix}/lib

Name: $2
Description: relocated for tests/build/test_build.sh
Version: 1.0
Cflags: -I\${includedir}
Libs: -L\${libdir} -l$3
EOF
  }
  mkdir -p "$T/mpi/lib/pkgconfig" "$T/hdf5/lib/pkgconfig"
  ln -s "$mpi_inc" "$T/mpi/include" && ln -s "$hdf5_inc" "$T/hdf5/include" &&
    link_lib "$mpi_lib" libmpi "$T/mpi" && link_lib "$hdf5_lib" libhdf5 "$T/hdf5" &&
    write_pc "$T/mpi" ompi-c mpi && write_pc "$T/hdf5" hdf5 hdf5 && have_prefixes=1
fi

# Hides the system's MPI and HDF5 from the Makefile: no wrapper, no h5pcc, no system .pc files, no *_HOME (the
# settings of each build come after these, and win). pkg-config reads its search path from the environment.
HIDDEN=(MPICC="$T/none/mpicc" H5PCC="$T/none/h5pcc" MPI_HOME= HDF5_HOME= HDF5_INC= WITH_CUDA=0 CXX="$CXX_FOR_TEST")
export PKG_CONFIG_LIBDIR=$T/none

# Builds and checks reloc_probe for one way of naming the prefix. $1 label, $2 and $3 where make show-config must
# say MPI and HDF5 came from, the rest: make settings.
relocated_build() {
  local label=$1 mpi_want=$2 hdf5_want=$3; shift 3
  local name="relocated ($label): found there, built, every MPI/HDF5 header and library the prefix's, runs on 2 ranks"
  local build=$T/build-${label%% *}
  if [ "$have_prefixes" != 1 ]; then
    skip "$name" "the system's mpi.h/libmpi.so/H5pubconf.h/libhdf5.so not found from make show-config"
    return
  fi
  local mpi hdf5 flags
  mpi=$(config_value MPI "${HIDDEN[@]}" "$@") hdf5=$(config_value "parallel HDF5" "${HIDDEN[@]}" "$@")
  flags="$(config_value MPI_CFLAGS "${HIDDEN[@]}" "$@") $(config_value HDF5_CFLAGS "${HIDDEN[@]}" "$@")"
  if [ "$mpi" != "✓ from $mpi_want" ] || [ "$hdf5" != "✓ from $hdf5_want" ]; then
    fail "$name" "make show-config: MPI '$mpi', HDF5 '$hdf5'; expected ✓ from '$mpi_want' and '$hdf5_want'"
    return
  fi
  if echo "$flags" | tr ' ' '\n' | grep -- '^-I' | grep -qv "^-I$T/"; then
    fail "$name" "include folders outside the prefix: $flags"
    return
  fi
  if ! mk -j"$(nproc 2>/dev/null || echo 2)" BUILD="$build" "${HIDDEN[@]}" "$@" "$build/bin/reloc_probe" >"$TMP/build-${label%% *}.log" 2>&1; then
    fail "$name" "build failed: $(tail -5 "$TMP/build-${label%% *}.log")"
    return
  fi
  # The headers the compiler read (the .d files) and the libraries the loader finds (ldd).
  local headers stray libs
  headers=$(cat "$build"/obj/src/data/*.d "$build"/obj/tests/build/*.d | tr ' \\' '\n\n' | grep -E '/(mpi|hdf5|H5FDmpio)\.h$' | sort -u)
  stray=$(echo "$headers" | grep -v "^$T/")
  libs=$(ldd "$build/bin/reloc_probe" | grep -E 'lib(mpi|hdf5[^ ]*)\.so')
  if [ -z "$headers" ] || [ -n "$stray" ]; then
    fail "$name" "headers outside the prefix: ${stray:-none found}"
  elif echo "$libs" | grep -qv "=> $T/"; then
    fail "$name" "libraries loaded from outside the prefix: $libs"
  elif ! out=$(mpirun --oversubscribe -np 2 "$build/bin/reloc_probe" "$TMP/data.h5" 2>&1) ||
       ! echo "$out" | grep -qE '^reloc_probe: 2 ranks read 33 sequences, ([0-9]+) timesteps of 3 features \(file: 33, \1\)$'; then
    fail "$name" "the probe: $out"
  else
    pass "$name"
  fi
}
export PKG_CONFIG_PATH=$T/mpi/lib/pkgconfig:$T/hdf5/lib/pkgconfig   # what `module load` adds
relocated_build "pkg-config" "pkg-config ompi-c" "pkg-config hdf5"
unset PKG_CONFIG_PATH
relocated_build "HOME overrides" "MPI_HOME" "HDF5_HOME" MPI_HOME="$T/mpi" HDF5_HOME="$T/hdf5" PKG_CONFIG=false

# The wrappers a module puts on PATH (Open MPI's mpicc --showme, HDF5's h5pcc -show), standing in for the
# prefix's own: they print what the real ones print for such a prefix. Only the detection is checked: the flags
# are those the pkg-config build above compiled, linked and ran with.
name="relocated (wrappers): mpicc --showme and h5pcc -show of the prefix are read, the flags the prefix's"
if [ "$have_prefixes" != 1 ]; then
  skip "$name" "no prefixes (see above)"
else
  mkdir -p "$T/bin"
  cat >"$T/bin/mpicc" <<WRAPPER
#!/bin/sh
case "\$1" in
  --showme:version) echo "mpicc: Open MPI (relocated for the test)" ;;
  --showme:compile) echo "-I$T/mpi/include" ;;
  --showme:link) echo "-L$T/mpi/lib -lmpi" ;;
  *) exit 1 ;;
esac
WRAPPER
  cat >"$T/bin/h5pcc" <<WRAPPER
#!/bin/sh
[ "\$1" = -show ] && echo "mpicc -I$T/hdf5/include -L$T/hdf5/lib $T/hdf5/lib/libhdf5_hl.a $T/hdf5/lib/libhdf5.a -lsz -lz -ldl -lm"
WRAPPER
  chmod +x "$T/bin/mpicc" "$T/bin/h5pcc"
  wrappers=("${HIDDEN[@]}" MPICC="$T/bin/mpicc" H5PCC="$T/bin/h5pcc" PKG_CONFIG=false)
  mpi=$(config_value MPI "${wrappers[@]}") hdf5=$(config_value "parallel HDF5" "${wrappers[@]}")
  got="$(config_value MPI_CFLAGS "${wrappers[@]}") | $(config_value MPI_LIBS "${wrappers[@]}")"
  got="$got | $(config_value HDF5_CFLAGS "${wrappers[@]}") | $(config_value HDF5_LIBS "${wrappers[@]}")"
  want="-I$T/mpi/include | -L$T/mpi/lib -lmpi | -I$T/hdf5/include | -L$T/hdf5/lib -L$T/hdf5/lib -lhdf5"
  if [ "$mpi" != "✓ from $T/bin/mpicc --showme" ] || [ "$hdf5" != "✓ from $T/bin/h5pcc -show" ]; then
    fail "$name" "make show-config: MPI '$mpi', HDF5 '$hdf5'"
  elif [ "$(echo "$got" | tr -s ' ')" != "$want" ]; then
    fail "$name" "flags '$got', expected '$want'"
  else
    pass "$name"
  fi
fi
unset PKG_CONFIG_LIBDIR

# ---- make install --------------------------------------------------------------------------------------------
P=$TMP/prefix
name="make install PREFIX: binary, jobs, inputs, tools and docs in bin/ and share/; the installed binary runs a recipe"
if ! mk BUILD="$BUILD_ARG" install PREFIX="$P" >"$TMP/install.log" 2>&1; then
  fail "$name" "make install failed: $(tail -5 "$TMP/install.log")"
else
  missing=""
  for f in bin/ragtrain share/ragtrain/jobs/train.sbatch share/ragtrain/jobs/run-mpirun.sh \
           share/ragtrain/jobs/scaling.sbatch share/ragtrain/inputs/japanese-vowels.ini \
           share/ragtrain/inputs/japanese-vowels/JapaneseVowels_TRAIN.ts share/ragtrain/tools/torch_interop.py \
           share/doc/ragtrain/README.md share/doc/ragtrain/LICENSE share/doc/ragtrain/doc/cli.md; do
    [ -e "$P/$f" ] || missing="$missing $f"
  done
  # From another folder, nothing of the source tree on the way: the installed recipe and data set, trained.
  mkdir -p "$TMP/elsewhere"
  if [ -n "$missing" ]; then
    fail "$name" "missing:$missing"
  elif ! (cd "$TMP/elsewhere" && "$P/bin/ragtrain" --version >/dev/null &&
          "$P/bin/ragtrain" convert "$P/share/ragtrain/inputs/japanese-vowels/JapaneseVowels_TRAIN.ts" jv.h5 --quiet &&
          mpirun --oversubscribe -np 2 "$P/bin/ragtrain" train --config "$P/share/ragtrain/inputs/japanese-vowels.ini" \
            --data jv.h5 --out run --epochs 1 --quiet) >"$TMP/installed.log" 2>&1 ||
       [ ! -f "$TMP/elsewhere/run/summary.json" ]; then
    fail "$name" "the installed binary: $(tail -5 "$TMP/installed.log")"
  else
    pass "$name"
  fi
fi

name="installed jobs/run-mpirun.sh uses the installed binary (no RAGTRAIN, run from another folder)"
if [ ! -x "$P/share/ragtrain/jobs/run-mpirun.sh" ]; then
  fail "$name" "not installed"
elif ! (cd "$TMP/elsewhere" && env -u RAGTRAIN DATA="$TMP/data.h5" OUT=job DEVICE=cpu NP=2 MPIRUN_ARGS=--oversubscribe \
          "$P/share/ragtrain/jobs/run-mpirun.sh" --epochs 1 --hidden 4 --quiet) >"$TMP/job.log" 2>&1 ||
     [ ! -f "$TMP/elsewhere/job/summary.json" ]; then
  fail "$name" "$(tail -5 "$TMP/job.log")"
else
  pass "$name"
fi

name="make uninstall PREFIX: what install wrote is gone, nothing else"
touch "$P/bin/other-tool"
if ! mk BUILD="$BUILD_ARG" uninstall PREFIX="$P" >"$TMP/uninstall.log" 2>&1; then
  fail "$name" "$(tail -5 "$TMP/uninstall.log")"
elif [ -e "$P/bin/ragtrain" ] || [ -e "$P/share/ragtrain" ] || [ -e "$P/share/doc/ragtrain" ] ||
     [ ! -e "$P/bin/other-tool" ]; then
  fail "$name" "left: $(cd "$P" && find . | tr '\n' ' ')"
else
  pass "$name"
fi

name="make install DESTDIR: the tree staged under DESTDIR, paths in the job scripts PREFIX's"
stage=$TMP/stage
if ! mk BUILD="$BUILD_ARG" install DESTDIR="$stage" PREFIX=/opt/ragtrain-test-prefix >"$TMP/destdir.log" 2>&1; then
  fail "$name" "$(tail -5 "$TMP/destdir.log")"
elif [ ! -x "$stage/opt/ragtrain-test-prefix/bin/ragtrain" ] || [ -e /opt/ragtrain-test-prefix ]; then
  fail "$name" "staged tree: $(find "$stage" -maxdepth 4 | head -5 | tr '\n' ' ')"
elif ! grep -q '^RAGTRAIN=${RAGTRAIN:-/opt/ragtrain-test-prefix/bin/ragtrain}' \
         "$stage/opt/ragtrain-test-prefix/share/ragtrain/jobs/train.sbatch"; then
  fail "$name" "jobs/train.sbatch: $(grep '^RAGTRAIN=' "$stage/opt/ragtrain-test-prefix/share/ragtrain/jobs/train.sbatch")"
else
  pass "$name"
fi

# ---- no path only x86 machines have -----------------------------------------------------------------------------
name="no x86-only path (the x86 multiarch or architecture name) in the Makefile, scripts/, jobs/, tests/"
arch="x86""_64"   # spelled apart, so that this line is not a hit of its own
hits=$(cd "$ROOT" && grep -rnI "$arch" Makefile scripts jobs tests 2>/dev/null)
if [ -n "$hits" ]; then fail "$name" "$hits"; else pass "$name"; fi

# ---- no function in src/ longer than 150 lines (STYLE.md: a longer one is a phase without a name) ---------------
# First the check itself: a function of 151 lines (a constructor with brace initialisers in its head) is named, one of
# 150 is not, so that a pass below means something.
mkdir -p "$TMP/fnlen"
body() { for i in $(seq "$1"); do echo "  x_ += $i;"; done; }
{ echo "namespace n {"; echo "struct S {"; echo "  S(int a)"; echo "      : x_{a},"; echo "        y_{{a}} {"
  body 147; echo "  }"; echo "  int x_, y_[1];"; echo "};"
  echo "int f(int x) {"; body 148; echo "}"; echo "}  // namespace n"; } > "$TMP/fnlen/long.cpp"
name="scripts/check-function-length.py names a 151-line function and passes a 150-line one"
out=$(python3 "$ROOT/scripts/check-function-length.py" --max 150 "$TMP/fnlen" 2>&1)
if [ $? -eq 1 ] && echo "$out" | grep -q "long.cpp:3: S is 151 lines" && ! echo "$out" | grep -q " f is "; then
  pass "$name"
else
  fail "$name" "$out"
fi
name="no function in src/ longer than 150 lines (scripts/check-function-length.py)"
if out=$(python3 "$ROOT/scripts/check-function-length.py" --max 150 "$ROOT/src" 2>&1); then
  pass "$name"
else
  fail "$name" "$out"
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
