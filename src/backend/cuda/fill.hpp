// Host-callable launchers of the fill kernels (src/backend/cuda/fill.cu): timing probes and padding.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ragtrain {

// Fills p[0..n) with a fixed pseudo-random pattern in [lo, hi) (timing probes must not run on zeros).
void launch_fill_uniform(float* p, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t s);

// Fills p[0..n) with v.
void launch_fill_int(int32_t* p, int64_t n, int32_t v, cudaStream_t s);

}  // namespace ragtrain
