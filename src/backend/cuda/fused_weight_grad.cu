// Phase 5 of the fused LSTM step (fused_lstm.cu) for up to 16 sequences: the weight gradients as a tiled GEMM over
// sequence groups, summing each chunk of timesteps as soon as the backward recurrence has published it.
#include "fused_chunks.hpp"
#include "fused_device.hpp"
#include "fused_grad_entries.hpp"
#include "fused_kernels.hpp"

namespace ragtrain {
namespace {

// Phase 5, the weight gradients as one GEMM: for gate row m (interleaved, m = 4 j + q) and column n of
// z_t = [x_t, h_{t-1}, 1] (h_{-1} = 0; the last column gives the bias gradient), sum over the group's sequences in
// slot order and over t in chunks, the last chunk first (the backward's order), of dg_t[m] z_t[n]. A block computes a
// kWgM x kWgN tile (each thread 2 x 4), staging a chunk of d gates and z in shared memory, the next chunk's loads in
// flight while it computes. Streaming (Args::stream), a chunk's loads wait for the backward's progress word instead of
// the whole recurrence kernel.
__global__ void __launch_bounds__(kWgThreads) weight_grad_kernel(const __grid_constant__ Params p) {
  const Args& a = p.a;
  __shared__ __align__(16) float As[kWgL * kWgM];
  __shared__ __align__(16) float Zs[kWgL * kWgN];
  const int tid = static_cast<int>(threadIdx.x), tx = tid & 7, ty = tid >> 3;
  const int H = a.H, F = a.F, G = 4 * H, NW = F + H + 1;
  const int m0 = static_cast<int>(blockIdx.x) * kWgM, n0 = static_cast<int>(blockIdx.y) * kWgN;
  // z = d groups + g: direction d's group g (bidirectional: direction 1's d gates and h are in its processing
  // order, step s reading x at timestep len - 1 - s).
  const int d = static_cast<int>(blockIdx.z) / a.groups, g = static_cast<int>(blockIdx.z) - d * a.groups;
  const int b_lo = g * a.B / a.groups, b_hi = (g + 1) * a.B / a.groups;   // >= 1 sequence: groups <= B
  // What this thread stages: d gates of row lm for timesteps lt + 4 i, and z column lc for timesteps zt + 8 i.
  constexpr int kA = kWgL * kWgM / kWgThreads, kZ = kWgL * kWgN / kWgThreads;
  const int lm = m0 + (tid % kWgM), lt = tid / kWgM, lc = n0 + (tid % kWgN), zt = tid / kWgN;
  const bool row_ok = lm < G;
  const int zkind = lc < F ? 0 : (lc < F + H ? 1 : (lc == F + H ? 2 : 3));   // x, h_{t-1}, the bias' 1, padding
  // The group's slots in shared memory: read from the device table in the loop, each chunk's loads waited one
  // memory latency for the slot first (the host wrote the table before the step, so this runs before the wait).
  static_assert(kMaxGatherSlots <= kMaxGroups * kWgSlots, "a group's slots exceed the staged table");
  __shared__ GatherSlot gs[kWgSlots];
  for (int b = b_lo + tid; b < b_hi; b += kWgThreads) gs[b - b_lo] = slot_of(p, b);
  __syncthreads();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The optimizer after this kernel (programmatic dependent launch) may be placed now; it waits for this grid.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (!a.stream) asm volatile("griddepcontrol.wait;" ::: "memory");   // the recurrence kernel's d gates and h
#endif
  // Every thread polls the words itself (a warp's loads of one are one request), so no block barrier is added.
  auto ready = [&](int b, int t0) {
    if (!a.stream) return;
    for (int w = 0; w < a.words; ++w)
      while (!progress_reached(a.progress + static_cast<int64_t>(b * a.dirs + d) * kMaxCl + w, a.epoch, t0))
        __nanosleep(64);
  };
  // This thread's outputs, and (one sequence: added into the fused buffer) their old values, loaded now: only this
  // thread writes them in this step, and the update that zeroed them has ended (this grid starts after the
  // recurrence kernel's wait, which follows the projection's wait for the update).
  int mm[8], nn[8];
  bool ok[8];
#pragma unroll
  for (int u = 0; u < 8; ++u) {
    mm[u] = m0 + 2 * ty + u / 4;
    nn[u] = n0 + 4 * tx + u % 4;
    ok[u] = mm[u] < G && nn[u] < NW;
  }
  WgOld<8> old;
  if (a.groups == 1) wg_load(a, d, mm, nn, ok, old);
  auto top = [&](int b) { return wg_chunk_floor(gs[b - b_lo].length - 1); };
  auto end = [&](int b, int t0) { return min(gs[b - b_lo].length, t0 == 0 ? kWgLast : t0 + kWgL); };   // wg_chunk_end
  float va[kA], vz[kZ];
  auto load = [&](int b, int t0) {
    const GatherSlot slot = gs[b - b_lo];
    const int t_end = end(b, t0);
    const float* gcol = a.scratch + static_cast<int64_t>(b * a.dirs + d) * a.per_seq + lm;
    const float* hcol = a.scratch + static_cast<int64_t>(b * a.dirs + d) * a.per_seq +
                        static_cast<int64_t>(a.t_cap) * (G + 2 * H) + max(lc - F, 0);   // h_t at hcol[t * H]
    const float* xcol = a.features + slot.row * F + min(lc, F - 1);
    const int xlast = d ? slot.length - 1 : 0;   // step t's timestep: |xlast - t|
#pragma unroll
    for (int i = 0; i < kA; ++i) {
      const int t = t0 + lt + i * (kWgThreads / kWgM);
      va[i] = (row_ok && t < t_end) ? gcol[static_cast<int64_t>(t) * G] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kZ; ++i) {
      const int t = t0 + zt + i * (kWgThreads / kWgN);
      const bool in = t < t_end;
      if (zkind == 0) vz[i] = in ? xcol[static_cast<int64_t>(abs(xlast - t)) * F] : 0.0f;
      else if (zkind == 1) vz[i] = (in && t > 0) ? hcol[static_cast<int64_t>(t - 1) * H] : 0.0f;
      else vz[i] = (in && zkind == 2) ? 1.0f : 0.0f;
    }
  };
  float acc[2][4] = {};
  int b = b_lo, t0 = top(b_lo);
  ready(b, t0);
  load(b, t0);
  while (b < b_hi) {
#pragma unroll
    for (int i = 0; i < kA; ++i) As[tid + i * kWgThreads] = va[i];
#pragma unroll
    for (int i = 0; i < kZ; ++i) Zs[tid + i * kWgThreads] = vz[i];
    __syncthreads();
    const int nl = end(b, t0) - t0;
    int nb = b, nt = wg_chunk_below(t0);   // (t0 == 0: the next sequence's top, below)
    if (t0 == 0) {
      ++nb;
      nt = nb < b_hi ? top(nb) : 0;
    }
    if (nb < b_hi) {
      ready(nb, nt);
      load(nb, nt);   // in flight while this chunk is summed
    }
#pragma unroll 8
    for (int l = 0; l < nl; ++l) {
      const float2 av = *reinterpret_cast<const float2*>(As + l * kWgM + 2 * ty);
      const float4 zv = *reinterpret_cast<const float4*>(Zs + l * kWgN + 4 * tx);
      acc[0][0] += av.x * zv.x;
      acc[0][1] += av.x * zv.y;
      acc[0][2] += av.x * zv.z;
      acc[0][3] += av.x * zv.w;
      acc[1][0] += av.y * zv.x;
      acc[1][1] += av.y * zv.y;
      acc[1][2] += av.y * zv.z;
      acc[1][3] += av.y * zv.w;
    }
    __syncthreads();   // the tiles are consumed before the next store
    b = nb;
    t0 = nt;
  }
  float v[8];
#pragma unroll
  for (int u = 0; u < 8; ++u) v[u] = acc[u / 4][u % 4];
  if (a.groups == 1) {
    wg_store(a, old, v);
  } else {
#pragma unroll
    for (int u = 0; u < 8; ++u)
      if (ok[u]) a.wpart[(static_cast<int64_t>(blockIdx.z) * NW + nn[u]) * a.wstride + mm[u]] = v[u];
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Streaming, this grid may otherwise end before the recurrence kernel (whose head gradients and totals the next
  // kernels read): its end now implies the recurrence's, for every kernel ordered after it.
  if (a.stream) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace

const void* fused_weight_grad_kernel() { return reinterpret_cast<const void*>(weight_grad_kernel); }

}  // namespace ragtrain
