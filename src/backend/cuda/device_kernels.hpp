// Host-callable launchers of the backend's own kernels: the input gather, the Linear head with its loss and
// gradients, the global gradient norm and the fused optimizer. Kept free of device code so .cpp files can call them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ragtrain {

// Fills p[0..n) with a fixed pseudo-random pattern in [lo, hi) (timing probes must not run on zeros).
void launch_fill_uniform(float* p, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t s);

// Copies one sequence into fixed-address slots, so that a CUDA graph captured for its length can replay it:
// x_dst (T*F) <- x_src; label_dst <- *label_src (classification) or target_dst (K) <- target_src (regression).
void launch_gather_sequence(float* x_dst, const float* x_src, int64_t n_x, int32_t* label_dst,
                            const int32_t* label_src, float* target_dst, const float* target_src, int64_t n_target,
                            cudaStream_t s);

// The gather inside a captured CUDA graph: finds its kernel node, and points it at another sequence before the next
// launch (cudaGraphExecKernelNodeSetParams affects later launches only, so launches already queued keep theirs).
cudaGraphNode_t find_gather_node(cudaGraph_t graph);   // null when the graph has none
void update_gather_node(cudaGraphExec_t exec, cudaGraphNode_t node, float* x_dst, const float* x_src, int64_t n_x,
                        int32_t* label_dst, const int32_t* label_src, float* target_dst, const float* target_src,
                        int64_t n_target);

// The Linear head on the last layer's final hidden state, the per-sequence loss and the gradients, for one
// sequence. One thread block: fixed summation order, so results are deterministic.
struct HeadArgs {
  const float* h = nullptr;          // (H) last layer's hidden state at the last timestep
  const float* weight = nullptr;     // (C, H) fc.weight
  const float* bias = nullptr;       // (C) fc.bias
  int32_t hidden = 0, outputs = 0;   // H, C
  bool classification = true;
  const int32_t* label = nullptr;    // (1) class id, classification
  const float* target = nullptr;     // (C) targets, regression
  float* d_weight = nullptr;         // (C, H) += d loss / d fc.weight
  float* d_bias = nullptr;           // (C) += d loss / d fc.bias
  float* d_h = nullptr;              // (H) = d loss / d h (written, not added: it seeds cuDNN's backward as dhy)
  float* extras = nullptr;           // (3) += loss, 1, correct (the fused buffer's tail)
};
void launch_head_loss_grad(const HeadArgs& a, cudaStream_t s);

// Inference: out (C) = weight h + bias.
void launch_head_forward(const float* h, const float* weight, const float* bias, int32_t hidden, int32_t outputs,
                         float* out, cudaStream_t s);

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
