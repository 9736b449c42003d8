// The fill kernels: a fixed pseudo-random pattern (timing probes must not run on zeros) and a constant.
#include <cuda_runtime.h>

#include "fill.hpp"
#include "ragtrain/core/error_cuda.hpp"
#include "ragtrain/model/dropout_mask.hpp"   // mix64

namespace ragtrain {
namespace {

__global__ void fill_uniform_kernel(float* p, int64_t n, uint64_t seed, float lo, float hi) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float u = static_cast<float>(mix64(seed ^ mix64(static_cast<uint64_t>(i))) >> 40) * (1.0f / 16777216.0f);
    p[i] = lo + (hi - lo) * u;
  }
}

__global__ void fill_int_kernel(int32_t* p, int64_t n, int32_t v) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) p[i] = v;
}

int grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 1024 ? 1024 : blocks));
}

}  // namespace

void launch_fill_int(int32_t* p, int64_t n, int32_t v, cudaStream_t s) {
  if (n <= 0) return;
  fill_int_kernel<<<grid_for(n, 256), 256, 0, s>>>(p, n, v);
  CUDA_CHECK_LAUNCH();
}

void launch_fill_uniform(float* p, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t s) {
  if (n <= 0) return;
  fill_uniform_kernel<<<grid_for(n, 256), 256, 0, s>>>(p, n, seed, lo, hi);
  CUDA_CHECK_LAUNCH();
}

}  // namespace ragtrain
