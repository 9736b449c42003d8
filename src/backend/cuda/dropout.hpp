// Host-callable launcher of the dropout kernel (src/backend/cuda/dropout.cu). Kept free of device code so .cpp
// files can call it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ragtrain {

// Training-time dropout of one batch on the device, drawn as model/dropout_mask.hpp draws it on the CPU. The step
// and the slots' global sequence indices are read from device memory (the gather writes them), so a replayed CUDA
// graph draws the masks of its own step.
struct DropoutArgs {
  uint32_t threshold = 0;            // dropout_threshold(p); 0: off
  float scale = 1;                   // 1 / (1 - p)
  uint64_t seed = 0;
  const int64_t* step = nullptr;     // (1) the global step
  const int64_t* seq = nullptr;      // (B) each slot's global sequence index
};

// out[t, b, k] = in[t, b, k] * (kept ? scale : 0) for the (T, B, W) time-major buffers, the mask of `layer`.
// The same call applies the mask to an output (forward) and to its gradient (backward).
void launch_dropout_apply(const float* in, float* out, int64_t T, int64_t B, int64_t W, int64_t layer,
                          const DropoutArgs& d, cudaStream_t s);

}  // namespace ragtrain
