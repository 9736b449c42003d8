// The last kernel of a fused LSTM step over K > 1 sequences (fused_lstm.cu): the weight gradients' sums over the
// sequence groups or the split GEMM's parts, and the head's over the sequences, in a fixed order.
#include "fused_device.hpp"
#include "fused_grad_entries.hpp"
#include "fused_kernels.hpp"

namespace ragtrain {
namespace {

// B > 1, both sums into the fused buffer in one launch (launched early, programmatic dependent launch):
//  - blocks [0, a.dirs a.sum_blocks), a.sum_blocks a direction: each weight-gradient entry += its sum over the
//    a.groups partial sums of its direction, in order. Up to kSumFew partials (the sequence groups of K <= 16, the
//    split GEMM's parts above H = 64: 8 at H = 256, 2 at H = 512) a thread an entry, its loads all in flight, 256
//    entries a block (the slices below over 8 parts, 9,400 blocks of 32 entries at H = 256, took 55 us at K = 128 on
//    the H100, a sixth of the GEMM whose parts they add); more (the split GEMM's 132 parts at H = 50), 32 entries a
//    block, lane l of warp w summing slice w of entry l's partials (one 128-byte line a load, every load of a slice
//    in flight at once), then warp 0 the 8 slices in order (a thread per entry over 132 partials waited one memory
//    latency per 32; 8 slices of an entry in adjacent lanes took 9 us at K = 128, 8 lines a load);
//  - the blocks after: the head's gradients and the extras, entries [a.head_lo, a.n_grad), += the sum over the
//    sequences of the partials. A warp per entry, lane l summing b = l, l + 32, ... in order, then the lanes in a
//    fixed butterfly: every load of a warp in flight at once (summing b in order in one thread waited one memory
//    latency per 8 sequences: 13.8 us at K = 128).
constexpr int kSumSlices = 8;
// Direction d's weight-gradient entry (m, n) += s.
__device__ __forceinline__ void add_entry(const Args& a, int d, int m, int n, float s) {
  const int mm[1] = {m}, nn[1] = {n};
  const bool ok[1] = {true};
  const float sv[1] = {s};
  wg_add(a, d, mm, nn, ok, sv);
}
__global__ void __launch_bounds__(256) sums_kernel(const __grid_constant__ Params p) {
  const Args& a = p.a;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");   // the weight-gradient kernel (and so the recurrence) ended
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  if (static_cast<int>(blockIdx.x) < a.sum_blocks * a.dirs && a.groups <= kSumFew) {   // a thread an entry
    const int NW = a.F + a.H + 1, G = 4 * a.H;
    const int d = static_cast<int>(blockIdx.x) / a.sum_blocks;
    const int i = (static_cast<int>(blockIdx.x) - d * a.sum_blocks) * sum_entries_per_block(a.groups) +
                  static_cast<int>(threadIdx.x);
    if (i >= G * NW) return;
    const int n = i / G, m = i - n * G;   // column-major, as the partials
    const int64_t gstride = static_cast<int64_t>(NW) * a.wstride;
    const float* const src = a.wpart + d * a.groups * gstride + static_cast<int64_t>(n) * a.wstride + m;
    float v[kSumFew];
#pragma unroll
    for (int g = 0; g < kSumFew; ++g) v[g] = g < a.groups ? src[g * gstride] : 0.0f;
    float s = 0.0f;
#pragma unroll
    for (int g = 0; g < kSumFew; ++g)
      if (g < a.groups) s += v[g];
    add_entry(a, d, m, n, s);
    return;
  }
  if (static_cast<int>(blockIdx.x) < a.sum_blocks * a.dirs) {   // direction d's a.sum_blocks, d = 0 first
    static_assert(kSumSlices * 32 == 256, "a warp per slice");
    __shared__ float slice_sum[kSumSlices][32];
    const int NW = a.F + a.H + 1, n_all = 4 * a.H * NW;
    const int lane = static_cast<int>(threadIdx.x) & 31, slice = static_cast<int>(threadIdx.x) >> 5;
    const int d = static_cast<int>(blockIdx.x) / a.sum_blocks;
    const int i = (static_cast<int>(blockIdx.x) - d * a.sum_blocks) * 32 + lane;   // (sum_entries_per_block)
    const bool in = i < n_all;
    const int G = 4 * a.H, n = in ? i / G : 0, m = in ? i - n * G : 0;   // column-major, as the partials
    // Direction d's partials are d a.groups + 0 .. a.groups - 1. (As an offset of src instead, ptxas gave the kernel
    // 80 registers, not 64: 3 blocks of 256 threads an SM instead of 4.)
    const int g_lo = d * a.groups + slice * a.groups / kSumSlices;
    const int g_hi = in ? d * a.groups + (slice + 1) * a.groups / kSumSlices : g_lo;
    const float* src = a.wpart + static_cast<int64_t>(n) * a.wstride + m;
    const int64_t gstride = static_cast<int64_t>(NW) * a.wstride;
    float s = 0.0f;
    for (int g0 = g_lo; g0 < g_hi; g0 += 32) {   // 32 loads in flight, then their sum in order
      float v[32];
#pragma unroll
      for (int g = 0; g < 32; ++g) v[g] = g0 + g < g_hi ? src[(g0 + g) * gstride] : 0.0f;
#pragma unroll
      for (int g = 0; g < 32; ++g)
        if (g0 + g < g_hi) s += v[g];
    }
    slice_sum[slice][lane] = s;
    __syncthreads();
    if (slice != 0 || !in) return;
    for (int w = 1; w < kSumSlices; ++w) s += slice_sum[w][lane];
    add_entry(a, d, m, n, s);
    return;
  }
  const int lane = static_cast<int>(threadIdx.x) & 31, B = a.B;
  const int64_t i =
      a.head_lo +
      (static_cast<int64_t>(static_cast<int>(blockIdx.x) - a.sum_blocks * a.dirs) * blockDim.x + threadIdx.x) / 32;
  if (i >= a.n_grad) return;   // the whole warp
  float s = 0.0f;
  for (int b0 = lane; b0 < B; b0 += 8 * 32) {
    float v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int b = b0 + 32 * u;
      v[u] = b < B ? a.out[static_cast<int64_t>(b) * a.stride + i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) s += v[u];
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFull, s, o);
  if (lane == 0) a.grads[i] += s;
}

}  // namespace

const void* fused_sums_kernel() { return reinterpret_cast<const void*>(sums_kernel); }

}  // namespace ragtrain
