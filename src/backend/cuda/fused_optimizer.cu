// The optimizer step on the GPU in one cooperative kernel: global norm of the averaged gradient (a device reduction
// across a grid barrier), clipping, and the SGD/Adam/AdamW update as one elementwise pass that also zeroes the fused
// gradient buffer for the next step and hands the step's totals to the host through mapped memory.
// The arithmetic uses round-to-nearest intrinsics (no contraction into FMA) so that, for equal gradients, each
// element follows the CPU optimizer's float operations exactly.
#include <cuda_runtime.h>

#include <algorithm>

#include "fused_optimizer.hpp"
#include "ragtrain/core/error_cuda.hpp"

namespace ragtrain {
namespace {

constexpr int kThreads = 256;

// Sum over the block in a fixed order (valid in thread 0). Callable more than once per kernel.
__device__ double block_sum(double v) {
  __shared__ double warp_part[kThreads / 32];
  __syncthreads();   // a previous call's reads of warp_part are done
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  double s = 0.0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / 32; ++w) s += warp_part[w];
  return s;   // valid in thread 0
}

// Every block waits until all `gridDim.x` blocks of this launch arrived. The counter only grows: launch k waits for
// (k + 1) * gridDim.x arrivals. Safe because the launch is cooperative (all blocks co-resident).
__device__ void grid_barrier(unsigned long long* counter, unsigned long long target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();   // this block's partial sum is visible device-wide before it arrives
    atomicAdd(counter, 1ull);
    while (*reinterpret_cast<volatile unsigned long long*>(counter) < target) __nanosleep(32);
    __threadfence();
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads) fused_optimizer(OptimizerArgs a) {
  // Phase 1: partials[block] = sum over the block's elements of (g / count)^2, in double like the CPU's global_norm.
  const float count = a.extras[1];
  const float loss = a.extras[0];   // every block reads it before the barrier (block 0 zeroes it after)
  float correct = 0.0f;
  if (blockIdx.x == 0 && threadIdx.x == 0) correct = a.extras[2];
  const bool any = count > 0.0f;
  const float inv = any ? __fdiv_rn(1.0f, count) : 0.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  double s = 0.0;
  if (any)
    for (int64_t i = first; i < a.n; i += stride) {
      const double x = static_cast<double>(__fmul_rn(a.grads[i], inv));
      s = __dadd_rn(s, __dmul_rn(x, x));
    }
  s = block_sum(s);
  if (threadIdx.x == 0) a.partials[blockIdx.x] = s;
  grid_barrier(a.barrier, (a.launch + 1ull) * gridDim.x);

  // Phase 2: the norm (the same summation order in every block), the clip scale, the totals for the host.
  __shared__ double s_norm;
  double t = 0.0;
  for (int b = static_cast<int>(threadIdx.x); b < static_cast<int>(gridDim.x); b += kThreads)
    t += __ldcg(a.partials + b);   // from L2: another block wrote it during this launch
  t = block_sum(t);
  if (threadIdx.x == 0) s_norm = sqrt(t);
  __syncthreads();
  const double norm = s_norm;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    a.readback[0] = loss;
    a.readback[1] = count;
    a.readback[2] = correct;
    a.readback[3] = norm;
    __threadfence_system();   // the totals reach host memory before the tag that announces them
    a.readback[4] = a.tag;
    for (int k = 0; k < 3; ++k) a.extras[k] = 0.0f;   // every block read count before the barrier
  }
  if (!any) return;   // a step without sequences: the host reports it; gradients are all zero already
  // A NaN/Inf anywhere in the summed gradient makes the norm non-finite. Every block sees the same norm and loss
  // (and so does the host, from readback), so every block and every rank skips the update together: the
  // parameters and moments stay as they were, only the buffer is zeroed for the next step.
  if (!isfinite(norm) || !isfinite(loss)) {
    for (int64_t i = first; i < a.n; i += stride) a.grads[i] = 0.0f;
    return;
  }
  // torch.nn.utils.clip_grad_norm_: scale by clip / (norm + 1e-6) when the norm exceeds clip.
  const bool clipping = a.clip > 0.0 && norm > a.clip;
  const float scale = clipping ? static_cast<float>(a.clip / (norm + 1e-6)) : 1.0f;
  const float lr = a.lr, wd = a.weight_decay;
  for (int64_t i = first; i < a.n; i += stride) {
    float g = __fmul_rn(a.grads[i], inv);
    if (clipping) g = __fmul_rn(g, scale);
    a.grads[i] = 0.0f;   // the fused buffer starts the next step at zero
    float p = a.params[i];
    if (a.kind == 0) {   // SGD with momentum, torch.optim.SGD
      g = __fadd_rn(g, __fmul_rn(wd, p));
      const float m = a.first_step ? g : __fadd_rn(__fmul_rn(a.momentum, a.m[i]), g);
      a.m[i] = m;
      p = __fsub_rn(p, __fmul_rn(lr, a.momentum > 0.0f ? m : g));
    } else {             // Adam (L2 in the gradient) or AdamW (decoupled decay)
      if (a.kind == 2)
        p = __fmul_rn(p, __fsub_rn(1.0f, __fmul_rn(lr, wd)));
      else
        g = __fadd_rn(g, __fmul_rn(wd, p));
      const float m = __fadd_rn(__fmul_rn(a.beta1, a.m[i]), __fmul_rn(__fsub_rn(1.0f, a.beta1), g));
      const float v = __fadd_rn(__fmul_rn(a.beta2, a.v[i]), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, a.beta2), g), g));
      a.m[i] = m;
      a.v[i] = v;
      const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), a.bc2_sqrt), a.eps);
      p = __fsub_rn(p, __fdiv_rn(__fmul_rn(a.step_size, m), denom));
    }
    a.params[i] = p;
  }
}

}  // namespace

int optimizer_blocks(int64_t n, int device) {
  int sms = 0, per_sm = 0, coop = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device));
  RT_CHECK(coop, "device " << device << " cannot launch cooperative kernels");
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_optimizer, kThreads, 0));
  const int64_t per_block = static_cast<int64_t>(kThreads) * 4;   // a few elements per thread: short, wide
  int64_t b = (n + per_block - 1) / per_block;
  // Co-resident (a cooperative launch requires it), and at most two per multiprocessor: more blocks only lengthen
  // the barrier.
  const int64_t cap = static_cast<int64_t>(sms) * std::min(2, per_sm < 1 ? 1 : per_sm);
  if (b > cap) b = cap;
  return static_cast<int>(b < 1 ? 1 : b);
}

void launch_optimizer_step(const OptimizerArgs& a, cudaStream_t s) {
  RT_CHECK(a.blocks > 0 && a.partials && a.readback && a.barrier, "optimizer arguments not set");
  OptimizerArgs copy = a;
  void* args[] = {&copy};
  CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(fused_optimizer), dim3(a.blocks),
                                         dim3(kThreads), args, 0, s));
}

}  // namespace ragtrain
