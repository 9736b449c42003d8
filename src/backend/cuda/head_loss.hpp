// Host-callable launchers of the head kernels (src/backend/cuda/head_loss.cu): pooling, the Linear head with its
// loss and gradients, and inference. Kept free of device code so .cpp files can call them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "dropout.hpp"   // DropoutArgs: the head's own dropout

namespace ragtrain {

// Pooling over each sequence's valid steps, the Linear head, the per-sequence losses and the gradients, for a
// batch of B sequences in one launch. One thread block (fixed summation order, so results are deterministic);
// sequences are taken in chunks that fit in shared memory.
struct HeadArgs {
  const float* y = nullptr;          // (T, B, D*H) last layer's outputs, time-major: step t of sequence b at row t*B + b
  float* dy = nullptr;               // (T, B, D*H) zero but where the pooling read, where d loss / d h is WRITTEN
  const int32_t* lengths = nullptr;  // (B) true lengths: sequence b's steps are rows t*B + b, t < lengths[b]
  int32_t batch = 0;                 // B
  const float* weight = nullptr;     // (C, D*H) fc.weight
  const float* bias = nullptr;       // (C) fc.bias
  int32_t hidden = 0, outputs = 0;   // H, C
  int32_t directions = 1;            // D
  int32_t pool = 0;                  // Pool: 0 last (forward h at len-1, reverse h at 0), 1 mean, 2 max
  DropoutArgs dropout;               // on the pooled vector (layer kHeadDropoutLayer)
  bool classification = true;
  const int32_t* labels = nullptr;   // (B) class ids, classification
  const float* targets = nullptr;    // (B, C) targets, regression
  float* d_weight = nullptr;         // (C, H) += d loss / d fc.weight, summed over the batch
  float* d_bias = nullptr;           // (C) += d loss / d fc.bias
  float* extras = nullptr;           // (3) += loss sum, B, correct (the fused buffer's tail)
};
void launch_head_loss_grad(const HeadArgs& a, cudaStream_t s);

// Inference on one sequence: out (C) = weight pool(y) + bias, y (T, 1, D*H) its top-layer outputs.
void launch_head_forward(const float* y, int32_t length, int32_t hidden, int32_t directions, int32_t pool,
                         const float* weight, const float* bias, int32_t outputs, float* out, cudaStream_t s);

}  // namespace ragtrain
