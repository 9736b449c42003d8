#!/usr/bin/env bash
# Builds call-s19.sh's twenty-one builds into .devcarry-s19 (~22 minutes here, ~44 MB; with the ~21.6 MB tree inside
# the 64 MiB that travel), from main's HEAD and the patches beside this script, through ../issue14-next/prepare.sh.
# usage, from the repository root after `make BUILD=build-gpu PORTABLE=1 build-gpu/bin/ragtrain build-gpu/bin/gpu_tests`:
#   CXX="ccache g++" bash bench/plans/issue14-s19/prepare-s19.sh
# Then check the call here (OUT=/tmp/o DEVICE=cpu LSTM= STEPS=3 bash bench/plans/issue14-s19/call-s19.sh) and delete
# what it unpacked: find .devcarry-s19 -type f ! -name '*.xz' ! -name '*.so' ! -name '*.log' -delete
set -euo pipefail
S=../issue14-s19
export CARRY=${CARRY:-$(git rev-parse --show-toplevel)/.devcarry-s19}
export BUILDS="w0: v9:$S/v9-halves-constant v9a:$S/v9a-own-act-store v9b:$S/v9b-own-kd v9bc:$S/v9bc-own-kd-exits
v9bd:$S/v9bd-own-kd-act4 v9bde:$S/v9bde-own-kd-act4-pool
v9bdeh:$S/v9bde-own-kd-act4-pool,v8h-head-unroll1-reads-slices-outer p3:$S/p3-w-ih-v4
v9bdep3:$S/v9bde-own-kd-act4-pool,$S/p3-w-ih-v4 v10:$S/v10-loops-apart v10L:$S/v10L-head-last-warp
v10u1:$S/v10u1-head-unroll1 v10Lu1:$S/v10Lu1-head-unroll1 v10F:$S/v10F-head-small
v10LF:$S/v10LF-head-small-last-warp v9bdeF:$S/v9bdeF-head-small v10LFp3:$S/v10LF-head-small-last-warp,$S/p3-w-ih-v4
v9bdeFp3:$S/v9bdeF-head-small,$S/p3-w-ih-v4 v10LFp34:$S/v10LF-head-small-last-warp,$S/p3-w-ih-v4,$S/p4-w-hh-offsets
v9bdeFp34:$S/v9bdeF-head-small,$S/p3-w-ih-v4,$S/p4-w-hh-offsets"
export RAGTRAIN="w0 v9 v9bde v9bdep3 v10 v10L v10F v10LF v10LFp3 v9bdeFp3"
export TESTS=all
exec bash "$(dirname "$0")/../issue14-next/prepare.sh"
