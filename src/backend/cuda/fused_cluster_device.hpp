// Device helpers of the cluster variant of the fused recurrence (fused_cluster.cu): the packed W_hh into registers,
// distributed shared memory addresses, mbarriers and the asynchronous remote stores that count their bytes on them.
// Included by that kernel file only.
#pragma once

#include <cstdint>

#include "fused_device.hpp"

namespace ragtrain {
namespace {

// Direction d's packed W_hh of this run is complete (every pack block's flag carries this run's epoch); the block's
// loads of it after this are ordered after the flags.
__device__ __forceinline__ void wait_packed(const Args& a, int d) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < kPack)
    while (!progress_reached(a.pack_flags + d * kPack + tid, a.epoch, 0)) __nanosleep(32);
  __syncthreads();
}

// The same shared-memory offset in block `rank` of the cluster.
__device__ __forceinline__ uint32_t remote_addr(uint32_t local, int rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(local), "r"(rank));
  return r;
}
__device__ __forceinline__ void mbar_init(uint32_t bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
// The barrier's current phase completes once `bytes` have arrived (and this, its one arrival, is made).
__device__ __forceinline__ void mbar_arm(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
}
// v into the remote address `at` (8-byte aligned), its bytes counted on the remote mbarrier `bar` (both in the same
// block); send4: 16 bytes, 16-byte aligned.
__device__ __forceinline__ void send2(uint32_t at, float2 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(at),
               "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void send4(uint32_t at, float4 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(at),
               "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)), "r"(__float_as_uint(v.z)),
               "r"(__float_as_uint(v.w)), "r"(bar)
               : "memory");
}

// Both shares of direction d's W_hh into a lane's registers from the packed copy (zero-padded past H), all loads in
// flight.
template <class M>
__device__ __forceinline__ void load_packed(const Args& a, int d, int rank, int tid, float (&wf)[M::kCols],
                                            float (&wb)[M::kCols]) {
  constexpr int kCols = M::kCols, kThreads = M::kThreads;
  wait_packed(a, d);
  const float4* pk = reinterpret_cast<const float4*>(a.packed + static_cast<int64_t>(d) * a.packed_floats) +
                     rank * 2 * (kThreads * kCols / 4) + tid;
#pragma unroll
  for (int k4 = 0; k4 < kCols / 4; ++k4) {
    const float4 f = __ldcg(pk + k4 * kThreads), g = __ldcg(pk + (kCols / 4 + k4) * kThreads);
    wf[4 * k4] = f.x, wf[4 * k4 + 1] = f.y, wf[4 * k4 + 2] = f.z, wf[4 * k4 + 3] = f.w;
    wb[4 * k4] = g.x, wb[4 * k4 + 1] = g.y, wb[4 * k4 + 2] = g.z, wb[4 * k4 + 3] = g.w;
  }
}

}  // namespace
}  // namespace ragtrain
