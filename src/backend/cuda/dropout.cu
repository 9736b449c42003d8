// The dropout mask kernel between LSTM layers: the mask of model/dropout_mask.hpp, drawn per element on the device.
#include <cuda_runtime.h>

#include <algorithm>

#include "dropout.hpp"
#include "ragtrain/core/error_cuda.hpp"
#include "ragtrain/model/dropout_mask.hpp"

namespace ragtrain {
namespace {

constexpr int kThreads = 256;

// One thread per element of the time-major (T, B, W) buffer: row t*B + b, unit k.
__global__ void __launch_bounds__(kThreads) dropout_apply_kernel(const float* in, float* out, int64_t T, int64_t B,
                                                                 int64_t W, int64_t layer, DropoutArgs d) {
  const int64_t n = T * B * W;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t step = *d.step;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t k = i % W, r = i / W, b = r % B, t = r / B;
    const DropoutKey key{d.seed, step, d.seq[b]};
    out[i] = dropout_keep(key, layer, t, k, d.threshold) ? in[i] * d.scale : 0.0f;
  }
}

}  // namespace

void launch_dropout_apply(const float* in, float* out, int64_t T, int64_t B, int64_t W, int64_t layer,
                          const DropoutArgs& d, cudaStream_t s) {
  RT_CHECK(d.step != nullptr && d.seq != nullptr, "dropout without the step and sequence indices on the device");
  const int64_t n = T * B * W;
  if (n <= 0) return;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 4096);
  dropout_apply_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(in, out, T, B, W, layer, d);
  CUDA_CHECK_LAUNCH();
}

}  // namespace ragtrain
