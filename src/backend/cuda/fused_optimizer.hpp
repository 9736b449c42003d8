// Host-callable launcher of the fused optimizer step with the global gradient norm
// (src/backend/cuda/fused_optimizer.cu). Kept free of device code so .cpp files can call it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ragtrain {

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
// rank and every run). try_pdl: first try the cooperative launch as a programmatic dependent one too; returns
// whether that combination is usable (false once the runtime refused it: the caller keeps the answer and passes it
// back, so a GPU that refuses pays one refused launch, not one a step).
bool launch_optimizer_step(const OptimizerArgs& a, cudaStream_t s, bool try_pdl);

}  // namespace ragtrain
