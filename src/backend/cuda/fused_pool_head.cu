// The head of a bidirectional fused step whose directions run apart (H > 64 or stacked; fused_lstm.cu): each
// direction's forward stage left its pooled values (Args::pooled_out); this runs the Linear head and loss on
// [forward ; reverse], emits the head's gradients, and writes the pooling's backward, d loss / d h_t of the top layer
// by direction, into dx, which that layer's backward stage then reads as dh_ext, as it reads a layer above's.
#include "fused_device.hpp"
#include "fused_head.hpp"
#include "fused_kernels.hpp"

namespace ragtrain {
namespace {

// One block a slot. Dynamic shared memory: the pooled vector and d loss / d pooled h (hin each, rounded to 4), the
// logits (Cp), misc (4).
__global__ void __launch_bounds__(256) pool_head_kernel(const __grid_constant__ Params p) {
  const Args& a = p.a;
  extern __shared__ float4 head_smem[];
  const int hp = (a.hin + 3) & ~3;
  float* const pool_s = reinterpret_cast<float*>(head_smem);
  float* const dh_s = pool_s + hp;
  float* const lg_s = dh_s + hp;
  float* const misc = lg_s + a.Cp;
  const int b = static_cast<int>(blockIdx.x), tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const GatherSlot slot = slot_of(p, b);
  const int label = a.classification ? a.labels[slot.pos] : 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");   // the forward stages' pooled values
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const int H = a.H, len = slot.length;
  const int64_t first = static_cast<int64_t>(b) * a.dirs * H;   // (slot b, direction 0)'s pooled values
  for (int k = tid; k < a.hin; k += nt) {   // head input k: direction k / H's unit k mod H
    const float v = a.pooled_out[first + k];
    pool_s[k] = a.drop.threshold ? v * head_keep(a, slot.pos, k) : v;
  }
  __syncthreads();
  head(a, pool_s, lg_s, dh_s, misc, nullptr, slot.pos, label);
  // The pooling's backward, as the recurrence kernels seed it: every step d / len (mean), else the pooling's step.
  // A thread a unit (the unit's gradient and pooled step loaded once), the steps in turn, 8 stores in flight; the
  // warps' stores of a step are adjacent. (A thread an element, its step and unit from a division by H, took 36 us
  // at H = 256, K = 128 on the H100.)
  for (int d = 0; d < a.dirs; ++d) {
    float* const dxd = a.dx + (first / H + d) * a.t_cap * H;
    const int32_t* const at = a.pooled_at + first + d * H;
    for (int j = tid; j < H; j += nt) {
      const float g = dh_s[d * H + j], mean = g / static_cast<float>(len);
      const int sj = a.pool == 1 ? -1 : at[j];
      float* const col = dxd + j;
#pragma unroll 8
      for (int s = 0; s < len; ++s) col[s * H] = a.pool == 1 ? mean : (s == sj ? g : 0.0f);
    }
  }
  head_emit(a, pool_s, lg_s, misc, b, nullptr);
}

}  // namespace

const void* fused_pool_head_kernel() { return reinterpret_cast<const void*>(pool_head_kernel); }

}  // namespace ragtrain
