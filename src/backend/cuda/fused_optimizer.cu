// The optimizer step on the GPU in one kernel: global norm of the averaged gradient, clipping, and the SGD/Adam/AdamW
// update as one elementwise pass that also zeroes the fused gradient buffer for the next step and hands the step's
// totals to the host through mapped memory. Two launch shapes of the same arithmetic:
//  - small models (n <= kClusterMaxN = 32 K, e.g. H <= 64 at F = 36): one thread-block cluster of 8 blocks; the
//    norm's partial sums meet in distributed shared memory behind the cluster's hardware barrier, and the kernel is
//    launched with programmatic dependent launch, so its start overlaps the end of the kernel before it. (The
//    cooperative grid spent 9.1 us a step on the H200 at H = 50, the cluster 7.3; with 4 batches of loads for
//    H = 128's 86 K parameters the cluster took 13 us, the grid 9.3.)
//  - larger ones: a cooperative grid over the whole GPU with an atomic grid barrier (also launched early where the
//    runtime allows a cooperative launch to be a programmatic dependent one).
// Both load a thread's elements with the step's count at the start (one memory latency, not one per phase).
// The arithmetic uses round-to-nearest intrinsics (no contraction into FMA) so that, for equal gradients, each
// element follows the CPU optimizer's float operations exactly.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "fused_optimizer.hpp"
#include "ragtrain/core/error_cuda.hpp"

namespace ragtrain {
namespace {

constexpr int kThreads = 256;

constexpr int kClusterBlocks = 8, kClusterThreads = 512;
constexpr int64_t kClusterMaxN = static_cast<int64_t>(kClusterBlocks) * kClusterThreads * 8;   // kPer each

// Sum over the block of NT threads in a fixed order (valid in thread 0). Callable more than once per kernel.
template <int NT = kThreads>
__device__ double block_sum(double v) {
  __shared__ double warp_part[NT / 32];
  __syncthreads();   // a previous call's reads of warp_part are done
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  double s = 0.0;
  if (threadIdx.x == 0)
    for (int w = 0; w < NT / 32; ++w) s += warp_part[w];
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

// The host's totals (block 0, thread 0): written to mapped memory before the tag that announces them; the extras
// are zeroed for the next step (every block read count before the barrier that precedes this).
__device__ void publish_totals(const OptimizerArgs& a, float loss, float count, float correct, double norm) {
  a.readback[0] = loss;
  a.readback[1] = count;
  a.readback[2] = correct;
  a.readback[3] = norm;
  __threadfence_system();   // the totals reach host memory before the tag that announces them
  a.readback[4] = a.tag;
  for (int k = 0; k < 3; ++k) a.extras[k] = 0.0f;
}

// (g / count)^2 in double, as the CPU's global_norm.
__device__ __forceinline__ double square_of_mean(float g, float inv) {
  const double x = static_cast<double>(__fmul_rn(g, inv));
  return __dmul_rn(x, x);
}

// What every element's update needs besides the element.
struct UpdateScalars {
  float inv = 0.0f, scale = 1.0f;
  bool clipping = false;
};
// The clip scale from the norm: torch.nn.utils.clip_grad_norm_ scales by clip / (norm + 1e-6) when the norm exceeds
// clip.
__device__ __forceinline__ UpdateScalars update_scalars(const OptimizerArgs& a, float inv, double norm) {
  UpdateScalars u;
  u.inv = inv;
  u.clipping = a.clip > 0.0 && norm > a.clip;
  u.scale = u.clipping ? static_cast<float>(a.clip / (norm + 1e-6)) : 1.0f;
  return u;
}

// One element: the gradient sum g_sum, the parameter p and the moments m, v as loaded; writes back p, m, v.
// Kind: the optimizer (OptimizerArgs::kind) when known at compile time, else -1 (a.kind): the cluster shape, one
// launch a step, carries only its optimizer's code.
template <int Kind>
__device__ __forceinline__ void update_element(const OptimizerArgs& a, const UpdateScalars& u, int64_t i, float g_sum,
                                               float p, float m_old, float v_old) {
  float g = __fmul_rn(g_sum, u.inv);
  if (u.clipping) g = __fmul_rn(g, u.scale);
  const float lr = a.lr, wd = a.weight_decay;
  const int kind = Kind >= 0 ? Kind : a.kind;
  if (kind == 0) {   // SGD with momentum, torch.optim.SGD
    g = __fadd_rn(g, __fmul_rn(wd, p));
    const float m = a.first_step ? g : __fadd_rn(__fmul_rn(a.momentum, m_old), g);
    a.m[i] = m;
    p = __fsub_rn(p, __fmul_rn(lr, a.momentum > 0.0f ? m : g));
  } else {             // Adam (L2 in the gradient) or AdamW (decoupled decay)
    if (kind == 2)
      p = __fmul_rn(p, __fsub_rn(1.0f, __fmul_rn(lr, wd)));
    else
      g = __fadd_rn(g, __fmul_rn(wd, p));
    const float m = __fadd_rn(__fmul_rn(a.beta1, m_old), __fmul_rn(__fsub_rn(1.0f, a.beta1), g));
    const float v = __fadd_rn(__fmul_rn(a.beta2, v_old), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, a.beta2), g), g));
    a.m[i] = m;
    a.v[i] = v;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), a.bc2_sqrt), a.eps);
    p = __fsub_rn(p, __fdiv_rn(__fmul_rn(a.step_size, m), denom));
  }
  a.params[i] = p;
}

// A thread's elements are first + k X (X: the threads of the launch). The first kPer of them are loaded at the
// kernel's start — parameter and moments before its wait, the gradient with the step's count after it — and stay in
// registers through the norm's barrier, so a step waits one memory latency for its loads, not one per phase (the
// count's load alone used to precede the gradients'); elements beyond (models larger than the grid x kPer) are
// loaded again.
constexpr int kPer = 8;
struct Elems {
  float g[kPer], p[kPer], m[kPer], v[kPer];
};
// The parameters and moments before the kernel's wait for the step's gradients: nothing but this kernel writes them,
// and the previous update has completed before this one starts (the recurrence between them waits for it, through
// the projection, before it lets its dependents start). Then the gradients, after the wait (load_grads).
__device__ __forceinline__ void load_state(const OptimizerArgs& a, int64_t first, int64_t X, Elems& e) {
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = first + k * X;
    const bool in = i < a.n;
    e.p[k] = in ? a.params[i] : 0.0f;
    e.m[k] = in ? a.m[i] : 0.0f;
    e.v[k] = in && a.v ? a.v[i] : 0.0f;
  }
}
__device__ __forceinline__ void load_grads(const OptimizerArgs& a, int64_t first, int64_t X, Elems& e) {
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = first + k * X;
    e.g[k] = i < a.n ? a.grads[i] : 0.0f;
  }
}
// s plus the squares (g / count)^2 of batch b's elements (those below a.n), in element order.
__device__ __forceinline__ double add_squares(double s, const OptimizerArgs& a, int64_t b, int64_t X, float inv,
                                              const Elems& e) {
#pragma unroll
  for (int k = 0; k < kPer; ++k)
    if (b + k * X < a.n) s = __dadd_rn(s, square_of_mean(e.g[k], inv));
  return s;
}
// This thread's sum of (g / count)^2 over its elements, in element order.
__device__ __forceinline__ double sum_squares(const OptimizerArgs& a, int64_t first, int64_t X, float inv,
                                              const Elems& e) {
  double s = add_squares(0.0, a, first, X, inv, e);
  // Elements past the first kPer in batches of kPer, each batch's loads in flight together (one at a time, a model of
  // 1.1 M parameters on 2 x 132 blocks waited ~9 memory latencies here and ~9 more in the update).
  for (int64_t b = first + kPer * X; b < a.n; b += kPer * X) {
    Elems t;
    load_grads(a, b, X, t);
    s = add_squares(s, a, b, X, inv, t);
  }
  return s;
}
// The update of this thread's elements (skip: a non-finite step, only the gradient buffer is zeroed for the next).
template <int Kind>
__device__ __forceinline__ void update_batch(const OptimizerArgs& a, const UpdateScalars& u, int64_t first, int64_t X,
                                             const Elems& e, bool skip) {
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = first + k * X;
    if (i >= a.n) continue;
    a.grads[i] = 0.0f;   // the fused buffer starts the next step at zero
    if (!skip) update_element<Kind>(a, u, i, e.g[k], e.p[k], e.m[k], e.v[k]);
  }
}
template <int Kind>
__device__ __forceinline__ void update_elems(const OptimizerArgs& a, const UpdateScalars& u, int64_t first, int64_t X,
                                             const Elems& e, bool skip) {
  update_batch<Kind>(a, u, first, X, e, skip);
  for (int64_t b = first + kPer * X; b < a.n; b += kPer * X) {   // (batches, as in sum_squares)
    Elems t;
    load_state(a, b, X, t);
    load_grads(a, b, X, t);
    update_batch<Kind>(a, u, b, X, t, skip);
  }
}

__global__ void __launch_bounds__(kThreads) fused_optimizer(OptimizerArgs a) {
  const int64_t X = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  Elems e;
  load_state(a, first, X, e);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");   // launched early where allowed (programmatic dependent launch)
#endif
  // Phase 1: partials[block] = sum over the block's elements of (g / count)^2, in double like the CPU's global_norm.
  load_grads(a, first, X, e);
  const float count = a.extras[1];
  const float loss = a.extras[0];   // every block reads it before the barrier (block 0 zeroes it after)
  const float correct = a.extras[2];
  const bool any = count > 0.0f;
  const float inv = any ? __fdiv_rn(1.0f, count) : 0.0f;
  double s = any ? sum_squares(a, first, X, inv, e) : 0.0;
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
  if (blockIdx.x == 0 && threadIdx.x == 0) publish_totals(a, loss, count, correct, norm);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");   // as the cluster shape
#endif
  if (!any) return;   // a step without sequences: the host reports it; gradients are all zero already
  // A NaN/Inf anywhere in the summed gradient makes the norm non-finite. Every block sees the same norm and loss
  // (and so does the host, from readback), so every block and every rank skips the update together: the
  // parameters and moments stay as they were, only the buffer is zeroed for the next step.
  update_elems<-1>(a, update_scalars(a, inv, norm), first, X, e, !isfinite(norm) || !isfinite(loss));
}

// The small-model shape: one cluster of kClusterBlocks blocks, every element among a thread's first kPer, and one
// more warp a block: in block 0 it hands the totals to the host (the norm, the stores to mapped memory and their
// system-scope fence took ~1.1 us on the H200 in the thread that then updated its own elements), elsewhere it only
// takes part in the barriers.
constexpr int kClusterBlockThreads = kClusterThreads + 32;
template <int Kind>
__global__ void __cluster_dims__(kClusterBlocks, 1, 1) __launch_bounds__(kClusterBlockThreads)
    fused_optimizer_cluster(OptimizerArgs a) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ double part;   // this block's sum of squares, read by every block of the cluster
  const bool worker = threadIdx.x < kClusterThreads;
  const int64_t X = static_cast<int64_t>(kClusterBlocks) * kClusterThreads;
  const int64_t first = static_cast<int64_t>(cluster.block_rank()) * kClusterThreads + threadIdx.x;
  Elems e;
  if (worker) load_state(a, first, X, e);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");   // launched early (programmatic dependent launch)
#endif
  if (worker) load_grads(a, first, X, e);
  const float count = a.extras[1];
  const float loss = a.extras[0];
  const float correct = a.extras[2];
  const bool any = count > 0.0f;
  const float inv = any ? __fdiv_rn(1.0f, count) : 0.0f;
  double s = any && worker ? sum_squares(a, first, X, inv, e) : 0.0;
  s = block_sum<kClusterBlockThreads>(s);   // the extra warp adds +0.0 last: the same bits
  if (threadIdx.x == 0) part = s;
  cluster.sync();   // every block's part is written (and every block read count and loss above)
  double pb[kClusterBlocks];
#pragma unroll
  for (int b = 0; b < kClusterBlocks; ++b) pb[b] = *cluster.map_shared_rank(&part, b);   // all in flight
  double t = 0.0;
#pragma unroll
  for (int b = 0; b < kClusterBlocks; ++b) t += pb[b];   // the same order everywhere
  const double norm = sqrt(t);   // consumes the remote reads: they are complete before the arrival below
  // No block may leave (taking its part with it) before all have read it: arrive now, wait at the end. Relaxed:
  // it orders no memory (a release arrival waits for this thread's outstanding memory operations).
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  if (cluster.block_rank() == 0 && threadIdx.x == kClusterThreads) publish_totals(a, loss, count, correct, norm);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The next step's input projection may start staging its features now; it waits for this grid's end before it
  // reads a parameter.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  if (any && worker)
    update_elems<Kind>(a, update_scalars(a, inv, norm), first, X, e, !isfinite(norm) || !isfinite(loss));
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}

}  // namespace

int optimizer_blocks(int64_t n, int device) {
  if (n <= kClusterMaxN) return kClusterBlocks;   // launch_optimizer_step then takes the cluster shape
  int sms = 0, per_sm = 0, coop = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device));
  RT_CHECK(coop, "device " << device << " cannot launch cooperative kernels");
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_optimizer, kThreads, 0));
  const int64_t per_block = static_cast<int64_t>(kThreads) * 4;   // half of kPer per thread: short, wide
  int64_t b = (n + per_block - 1) / per_block;
  // Co-resident (a cooperative launch requires it), and at most two per multiprocessor: more blocks only lengthen
  // the barrier.
  const int64_t cap = static_cast<int64_t>(sms) * std::min(2, per_sm < 1 ? 1 : per_sm);
  if (b > cap) b = cap;
  return static_cast<int>(b < 1 ? 1 : b);
}

bool launch_optimizer_step(const OptimizerArgs& a, cudaStream_t s, bool try_pdl) {
  RT_CHECK(a.blocks > 0 && a.partials && a.readback && a.barrier, "optimizer arguments not set");
  OptimizerArgs copy = a;
  void* args[] = {&copy};
  if (a.n <= kClusterMaxN) {
    // Programmatic dependent launch: the cluster may be placed while the kernel before it finishes (it waits for
    // that kernel's memory before it reads anything); a predecessor that never signals simply runs to its end first.
    cudaLaunchAttribute pdl[1] = {};
    pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pdl[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kClusterBlocks);
    cfg.blockDim = dim3(kClusterBlockThreads);
    cfg.stream = s;
    cfg.attrs = pdl;
    cfg.numAttrs = 1;
    const void* k = a.kind == 0   ? reinterpret_cast<const void*>(fused_optimizer_cluster<0>)
                    : a.kind == 1 ? reinterpret_cast<const void*>(fused_optimizer_cluster<1>)
                                  : reinterpret_cast<const void*>(fused_optimizer_cluster<2>);
    CUDA_CHECK(cudaLaunchKernelExC(&cfg, k, args));
    return try_pdl;
  }
  // Cooperative and, where the runtime allows both together, programmatic dependent launch (its launch then overlaps
  // the end of the kernel before it); else a plain cooperative launch.
  cudaLaunchAttribute at[2] = {};
  at[0].id = cudaLaunchAttributeCooperative;
  at[0].val.cooperative = 1;
  at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(a.blocks));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = s;
  cfg.attrs = at;
  cfg.numAttrs = 2;
  const void* k = reinterpret_cast<const void*>(fused_optimizer);
  if (try_pdl) {
    if (cudaLaunchKernelExC(&cfg, k, args) == cudaSuccess) return true;
    (void)cudaGetLastError();   // the combination refused at launch: nothing was queued
  }
  cfg.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelExC(&cfg, k, args));
  return false;
}

}  // namespace ragtrain
