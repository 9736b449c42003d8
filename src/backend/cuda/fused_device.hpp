// Device helpers of the fused LSTM step that several of its kernels share: the activations, asynchronous copies into
// shared memory, the progress words, the phase clock and a batch's slot. Included by the kernel files only.
#pragma once

#include <cstdint>

#include "fused_kernels.hpp"

namespace ragtrain {
namespace {

// sigmoid(v), and tanh(v) = 2 sigmoid(2v) - 1 (gate g, tanh(c)): one exp and one reciprocal, no branch, so the
// four gates of a quad take the same path (tanhf and expf in divergent lanes cost both, on the critical path).
// The approximate reciprocal: the correctly rounded one adds a range check and a branch to every activation (seen in
// the SASS); 1 / inf still gives 0, so sigmoid saturates correctly. The flush-to-zero forms of ex2 and rcp are bare
// MUFU instructions (the others wrap them in denormal scaling, on the critical path); they give the same bits as
// __expf and __fdividef(1, x) wherever input and result are normal, and a denormal 2^(-v log2 e) only perturbs
// 1 + it below float resolution.
__device__ __forceinline__ float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rcp_ftz(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// sigmoid_scaled takes v (-log2 e): the recurrences fold the factor 2 of tanh into that one product (2 (-log2 e) is
// exact in float, so v (2 (-log2 e)) and (2 v) (-log2 e) round to the same bits), one instruction less on the chain.
constexpr float kNegLog2e = -1.44269504088896341f;
__device__ __forceinline__ float sigmoid_scaled(float v) { return rcp_ftz(1.0f + ex2_ftz(v)); }
__device__ __forceinline__ float sigmoid_f(float v) { return sigmoid_scaled(v * kNegLog2e); }
__device__ __forceinline__ float tanh_f(float v) { return 2.0f * sigmoid_scaled(v * (2.0f * kNegLog2e)) - 1.0f; }

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 4 (16) bytes global -> shared, asynchronously; zeros when !ok (src is then not read).
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool ok) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(ok ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(ok ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void mark(const Args& a, int phase) {
  if (a.cycles && blockIdx.x == 0 && threadIdx.x == 0) a.cycles[phase] = clock64();
}

// The progress word of a sequence (Args::progress). The writer's fence makes every store that reached it through
// the block's barriers visible at GPU scope before the word; the reader's acquire orders its loads after the word.
__device__ __forceinline__ void publish_progress(unsigned long long* word, uint32_t epoch, int v) {
  __threadfence();
  const unsigned long long val = (static_cast<unsigned long long>(epoch) << 32) | static_cast<uint32_t>(v);
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(word), "l"(val) : "memory");
}
__device__ __forceinline__ bool progress_reached(const unsigned long long* word, uint32_t epoch, int v) {
  unsigned long long val;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(val) : "l"(word) : "memory");
  return static_cast<uint32_t>(val >> 32) == epoch && static_cast<int>(static_cast<uint32_t>(val)) <= v;
}

// A forward progress word (Args::fwd_words) of this epoch says every h of steps < v is stored.
__device__ __forceinline__ bool fwd_reached(const unsigned long long* word, uint32_t epoch, int v) {
  unsigned long long val;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(val) : "l"(word) : "memory");
  return static_cast<uint32_t>(val >> 32) == epoch && static_cast<int>(static_cast<uint32_t>(val)) >= v;
}

// The input gradient's flag of (slot b, tile tblock x kblock) (fused_kernels.hpp's chain_dx_flag).
__device__ __forceinline__ int dx_flag(const Args& a, int b, int tblock, int kblock) {
  return chain_dx_flag(a.t_cap, a.H, b, tblock, kblock);
}
// Spins until every flag of the gates' chunk holding step t (its tile of gate rows) is published.
__device__ __forceinline__ void wait_proj(const Args& a, int b, int t, int tile) {
  while (!progress_reached(a.proj_flags + chain_proj_flag(a.t_cap, a.H, b, t / a.tc, tile), a.epoch, 0))
    __nanosleep(32);
}

// Direction d's gate blocks (0 forward, 1 reverse).
__device__ __forceinline__ const FusedLayout& lay_of(const Args& a, int d) { return d ? a.lay1 : a.lay; }

__device__ __forceinline__ GatherSlot slot_of(const Params& p, int b) {
  return p.a.B <= kInline ? p.slot[b] : p.a.slots[b];
}

}  // namespace
}  // namespace ragtrain
