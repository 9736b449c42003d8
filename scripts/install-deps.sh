#!/usr/bin/env bash
# Installs what ragtrain needs to build and test on Debian/Ubuntu (as root); elsewhere prints what to install.
# CUDA, cuDNN and NCCL are optional and never installed here: the Makefile detects them under CUDA_HOME.
set -euo pipefail

PKGS=(build-essential make pkg-config
      openmpi-bin libopenmpi-dev
      libhdf5-openmpi-dev hdf5-tools
      libboost-program-options-dev
      libminizip-dev zlib1g-dev
      libgtest-dev nlohmann-json3-dev
      slurm-wlm munge gnuplot-nox   # the jobs/ tests run a real single-node Slurm; `ragtrain plot` draws with gnuplot
      clang)                        # the fuzz targets (tests/fuzz): clang++ with -fsanitize=fuzzer
# libFuzzer's runtime (libclang_rt.fuzzer-ARCH.a) is a package of its own on Debian 12 and later; older
# releases ship it inside libclang-common-N-dev, which clang already pulls in.
if command -v apt-cache >/dev/null 2>&1 && apt-cache show libclang-rt-dev >/dev/null 2>&1; then
  PKGS+=(libclang-rt-dev)
fi
# The suite "torch" (tools/test_torch_agreement.py under /usr/bin/python3): Debian 12 packages PyTorch (CPU). Where
# the release has no python3-torch the suite is skipped, so it is asked for only where the archive has it.
if command -v apt-cache >/dev/null 2>&1 && apt-cache show python3-torch >/dev/null 2>&1; then
  PKGS+=(python3-torch python3-h5py python3-numpy)
fi

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
else
  echo "ragtrain: not a Debian/Ubuntu system; install the equivalents of:" >&2
  printf '  %s\n' "${PKGS[@]}" >&2
  echo "  (Open MPI, parallel HDF5 built against it, Boost.Program_options, minizip and zlib, GoogleTest, nlohmann-json;" >&2
  echo "   Slurm with munge for the jobs/ tests, gnuplot for ragtrain plot, clang with libFuzzer for tests/fuzz," >&2
  echo "   PyTorch, h5py and NumPy for the PyTorch agreement suite)" >&2
  exit 1
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "ragtrain: all build dependencies are installed"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "ragtrain: missing packages; as root run:" >&2
  echo "  apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "ragtrain: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
