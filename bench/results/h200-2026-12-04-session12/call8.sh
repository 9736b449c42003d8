#!/usr/bin/env bash
# Session 12, call 8: bench/mma_probe (built here with `make BUILD=build-gpu PORTABLE=1 build-gpu/bin/mma_probe`): what
# mma.sync m16n8k8 tf32 costs on one H200 SM, and one LSTM step's matvec for 8 sequences on the tensor cores against
# today's for one sequence on the CUDA cores.
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 60 .devcarry-s12/probe/mma_probe $OUT/mma_probe.json 2>&1 | tee $OUT/mma_probe.txt
echo "rc=${PIPESTATUS[0]}"
