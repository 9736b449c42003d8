#!/usr/bin/env bash
# Session 8, calls 7 and 8 (the machine still warm after call 6): the rest of w21's GPU suite. Output seen:
# call 7: GpuTraining*, GpuBackend*, GpuNonfinite*: "[  PASSED  ] 11 tests." (9 s); the 2-layer H=50 models there
# (38.5 K parameters) take the cooperative optimizer, the shape w21 changed.
# call 8: everything else but Fused* (NCCL, watchdog, binding, batch, model options, agreement): "[  PASSED  ] 26 tests."
# (50 s). With call 6's Fused* without the budget test (36 passed), w21 ran 73 of the 74 GPU tests, all passed; the
# budget test itself passed on w19 and w20 (calls 4, 5), which share every kernel with w21 but the optimizer's launch.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
mkdir -p build-gpu/lib && cp .devcarry-s8/w13/libnvtx_count.so build-gpu/lib/
timeout 60 mpirun -np 1 .devcarry-s8/w21/gpu_tests --gtest_filter='GpuTraining*:GpuBackend*:GpuNonfinite*:Nonfinite*'
timeout 80 mpirun -np 1 .devcarry-s8/w21/gpu_tests --gtest_filter='-Fused*:GpuTraining*:GpuBackend*:GpuNonfinite*'
