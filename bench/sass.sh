#!/usr/bin/env bash
# The SASS of a CUDA source for sm_90, here, without a GPU: this machine's CUDA 13 has no disassembler (no cuobjdump,
# no nvdisasm), so the nvdisasm of Debian 12's nvidia-cuda-toolkit (CUDA 11.8, non-free; unpacked into a cache, never
# installed) reads the cubin after its ELF header is rewritten to the older format (CUDA 13 marks it OS/ABI 0x41,
# ABI version 8, e_flags 0x6005a04 for sm_90; 11.8 writes 0x33, 7 and 0x5a055a). The sm_90 instruction encodings are
# the same, so the listing is the code the H200 runs. Use it to see what a change does to the hot loops before a
# device call (bench/sass_regions.py compares two listings), not to time anything.
# usage, from the repository root:  bench/sass.sh SRC.cu OUT.sass [nvcc flags...]
#   e.g.  bench/sass.sh src/backend/cuda/fused_recurrence.cu /tmp/main.sass
# The cache is $SASS_TOOLS (default ~/.cache/ragtrain-sass, ~250 MB once); the first run needs Debian's mirror.
# SASS_HEX=1 adds each instruction's encoding (nvdisasm -hex: its second word holds the control bits, stall cycles
# and scoreboards).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
src=$1 out=$2
shift 2
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
TOOLS=${SASS_TOOLS:-$HOME/.cache/ragtrain-sass}
nvdisasm=$TOOLS/usr/bin/nvdisasm
if [ ! -x "$nvdisasm" ]; then
  mkdir -p "$TOOLS/lists/partial" "$TOOLS/deb"
  echo "deb http://deb.debian.org/debian bookworm main contrib non-free" > "$TOOLS/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$TOOLS/sources.list" -o Dir::Etc::SourceParts=/nonexistent
            -o "Dir::State::Lists=$TOOLS/lists")
  apt-get "${apt_opts[@]}" update -qq
  (cd "$TOOLS/deb" && apt-get "${apt_opts[@]}" download nvidia-cuda-toolkit)
  dpkg -x "$TOOLS"/deb/nvidia-cuda-toolkit_*.deb "$TOOLS"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$CUDA_HOME/bin/nvcc" -std=c++17 -O3 -arch=sm_90 -Iinclude -Isrc -I"$CUDA_HOME/include" -cubin -o "$tmp/k.cubin" \
  "$src" "$@"
python3 - "$tmp/k.cubin" "$tmp/old.cubin" <<'EOF'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
if b[:4] != b"\x7fELF" or b[4] != 2:
    sys.exit("sass.sh: not a 64-bit ELF cubin")
flags = struct.unpack_from("<I", b, 0x30)[0]
if b[7] == 0x41:                      # CUDA 13's header: rewrite for the 11.8 disassembler (sm_90 only)
    if (flags >> 8) & 0xFF != 0x5A:
        sys.exit(f"sass.sh: e_flags {flags:#x} is not sm_90's; only sm_90 cubins are rewritten")
    b[7], b[8] = 0x33, 7
    struct.pack_into("<I", b, 0x30, 0x5A055A)
open(sys.argv[2], "wb").write(b)
EOF
"$nvdisasm" -c ${SASS_HEX:+-hex} "$tmp/old.cubin" > "$out"
echo "sass.sh: $(grep -c '/\*[0-9a-f]\{4,\}\*/' "$out") instructions -> $out"
