// Host-callable launchers of the backend's own kernels: fills, the Linear head with its loss and gradients, the
// global gradient norm and the fused optimizer. Kept free of device code so .cpp files can call them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ragtrain {

// Fills p[0..n) with a fixed pseudo-random pattern in [lo, hi) (timing probes must not run on zeros).
void launch_fill_uniform(float* p, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t s);

// Fills p[0..n) with v.
void launch_fill_int(int32_t* p, int64_t n, int32_t v, cudaStream_t s);

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

// The optimizer step over the flat device buffers. Every scalar that depends on the step number is computed on
// the host exactly as the CPU optimizer computes it; the sequence count (the divisor) is read on the device.
struct OptimizerArgs {
  int64_t n = 0;                 // parameters (weight space incl. padding + head)
  float* params = nullptr;       // (n)
  float* grads = nullptr;        // (n) gradient sums; zeroed by the update for the next step
  float* extras = nullptr;       // (3) loss_sum, count, correct right after grads; zeroed by the update
  float* m = nullptr;            // (n) SGD momentum buffer or Adam first moment
  float* v = nullptr;            // (n) Adam second moment (null for SGD)
  double* partials = nullptr;    // (blocks) per-block sums of squares of the averaged gradient
  double* readback = nullptr;    // (5) host-mapped: loss_sum, count, correct, grad_norm, then `tag` once they are
                                 // written (the host may stop waiting at that point, before the update finishes)
  double tag = 0;                // this step's number, written last into readback[4]
  unsigned long long* barrier = nullptr;   // (1) grid-barrier counter, zero at start, only ever incremented
  unsigned long long launch = 0; // launches of the kernel so far (the barrier's generation)
  int blocks = 0;                // grid size (partials has this many entries); all blocks co-resident
  int kind = 0;                  // 0 sgd, 1 adam, 2 adamw
  float lr = 0, momentum = 0, weight_decay = 0, beta1 = 0, beta2 = 0, eps = 0;
  float step_size = 0;           // adam: lr / (1 - beta1^t)
  float bc2_sqrt = 1;            // adam: sqrt(1 - beta2^t)
  bool first_step = false;       // sgd: the momentum buffer starts as the gradient
  double clip = 0;               // max global norm, 0 = off
};
// Grid size for n parameters: enough blocks for the work, never more than can be co-resident on the device.
int optimizer_blocks(int64_t n, int device);
// One cooperative launch: per-block sums of squares of grads/count, a grid barrier, then the update (every block
// reduces the partials in the same order, so the norm, the clip scale and the parameters are identical on every
// rank and every run).
void launch_optimizer_step(const OptimizerArgs& a, cudaStream_t s);

}  // namespace ragtrain
