// Phases 2 and 4 of the fused LSTM step (fused_lstm.cu) for more than kStreamMaxB sequences at 128 < H <= 256: the
// slots, sorted by length, run in groups of up to 16 in lock step, a group (and direction) on a cluster of 16 blocks,
// the recurrent matvecs of the whole group on the tensor cores. The recurrences run in stages, as when the directions
// run apart: the forward stage leaves the pooled values (pool_head_kernel runs the head), the backward stage is seeded
// by d loss / d h_t in Args::dh_ext.
//
// Why: one sequence on a 16-block cluster (fused_cluster.cu) uses the tensor of a whole cluster for one matvec a
// step, so at most 8 sequences run at once on 132 SMs and K = 32 takes four waves (998 us a step on the H100). Here
// the step of every sequence of a group is one small matrix product, W_hh (64 gate rows of the block x 256) times h
// (256 x up to 16 sequences), as m16n8k8 tf32 mma with three products per float product (tf32_split.hpp: float
// accuracy, what the CPU reference's tolerance needs), so 8 clusters hold 128 sequences at once. Block `rank` owns the
// units j = 16 rank + u (GroupMap, fused_lanes.hpp, where the unit tests check which lane holds which weight).
//   forward:  each block computes its 64 gate rows for the group from the whole h_{t-1} (every block sends its units'
//             h to every block: st.async into each one's buffer, bytes counted on its mbarrier), a thread per (unit,
//             sequence) then does the cell update;
//   backward: each block multiplies W_hh^T, restricted to its own 64 gate rows, by its own d gates: partial sums of
//             d h_{t-1} for every unit, and sends each block the partial sums of that block's units (a reduce-scatter:
//             16 x fewer bytes than sending every block the d gates); the receiver adds its 16 parts in block order.
// Fixed orders throughout (the mma's tiles, the parts, the blocks): reruns are bitwise equal. Ragged groups: member s
// runs its own steps (forward t = i, backward t = len_s - 1 - i at lock step i); a member past its end computes on
// zeros and stores nothing. Double buffers need no other barrier: a block's step i + 1 starts only after every block
// sent it step i's vector, which each block sends only after all its warps passed the step's barrier.
#include <cooperative_groups.h>

#include "fused_cluster_device.hpp"
#include "fused_device.hpp"
#include "fused_head.hpp"
#include "fused_kernels.hpp"
#include "tf32_split.hpp"

namespace ragtrain {
namespace {

using GM = GroupMap;

// d += A B in three tf32 products (lo hi, hi lo, hi hi): A split once (ah, al), B's two values split here.
__device__ __forceinline__ void mma3(float (&d)[4], const uint32_t (&ah)[4], const uint32_t (&al)[4], float x0,
                                     float x1) {
  uint32_t h0, l0, h1, l1;
  tf32_split(x0, h0, l0);
  tf32_split(x1, h1, l1);
  mma_tf32(d, al, h0, h1);
  mma_tf32(d, ah, l0, l1);
  mma_tf32(d, ah, h0, h1);
}

// W_hh[q H + j][k] of direction d, zero past H (the padding of the 256 x 256 tile).
__device__ __forceinline__ float w_hh(const Args& a, const FusedLayout& lay, int j, int q, int k) {
  return (j < a.H && k < a.H) ? __ldcg(a.params + lay.w_hh[q] + static_cast<int64_t>(j) * a.H + k) : 0.0f;
}

// What every thread knows of its group, and the (unit, sequence) it updates (threads below 16 kNP: u = tid mod 16,
// s = tid / 16; their slot's scratch).
struct GroupLane {
  int rank, d, first, nb, maxlen;   // cluster rank, direction, the group's first slot, members, longest length
  int u, s, j, len;                 // this thread's unit and member, the unit's index, the member's length (0: none)
  bool elem, member;                // elem: the thread updates (u, s); member: s is a slot of the group
  int64_t seq;                      // the member's sequence index (slot dirs + d): its scratch
  float *gbuf, *cbuf, *tcbuf, *hbuf;
};

template <int NT>
__device__ __forceinline__ GroupLane group_lane(const Params& p, int rank) {
  const Args& a = p.a;
  GroupLane g{};
  const int ci = static_cast<int>(blockIdx.x) / GM::kCl, tid = static_cast<int>(threadIdx.x);
  g.rank = rank;
  g.d = ci % a.dirs;
  g.first = (ci / a.dirs) * a.group_n;
  g.nb = min(a.group_n, a.B - g.first);
  g.maxlen = slot_of(p, g.first).length;   // sorted: the first member is the longest
  g.u = tid & 15;
  g.s = tid >> 4;
  g.j = GM::kUnits * rank + g.u;
  g.elem = tid < 16 * 8 * NT;
  g.member = g.elem && g.s < g.nb;
  g.len = g.member ? slot_of(p, g.first + g.s).length : 0;
  g.seq = static_cast<int64_t>(g.first + (g.member ? g.s : 0)) * a.dirs + g.d;
  g.gbuf = a.scratch + g.seq * a.per_seq;   // the one-block kernel's scratch layout
  g.cbuf = g.gbuf + static_cast<int64_t>(a.t_cap) * 4 * a.H;
  g.tcbuf = g.cbuf + static_cast<int64_t>(a.t_cap) * a.H;
  g.hbuf = g.tcbuf + static_cast<int64_t>(a.t_cap) * a.H;
  return g;
}

// Sets up the block's mbarriers (each one's first phase expects one step's vector, `bytes`) and, after every block of
// the cluster did, lets the sends begin; then waits for the kernel before this one (its scratch).
__device__ __forceinline__ void group_start(uint32_t bars, uint32_t bytes) {
  if (threadIdx.x == 0) {
    for (int b = 0; b < 2; ++b) mbar_init(bars + 8 * b);
    for (int b = 0; b < 2; ++b) mbar_arm(bars + 8 * b, bytes);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cooperative_groups::this_cluster().sync();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Step i's vector in buffer i mod 2 (the (i / 2)-th phase of its mbarrier); the lead thread re-arms its next phase.
__device__ __forceinline__ void group_wait(uint32_t bars, int i, uint32_t bytes) {
  mbar_wait(bars + 8 * (i & 1), (i >> 1) & 1);
  if (threadIdx.x == 0) mbar_arm(bars + 8 * (i & 1), bytes);
}

// The forward stage: gates, c, tanh(c) and h of every member into its scratch, the pooled values into
// Args::pooled_out (the top layer).
template <int NT>
__global__ void __launch_bounds__(GM::kThreads, 1) group_forward_kernel(const __grid_constant__ Params p) {
  using S = GroupSmem<NT>;
  constexpr int kNP = S::kNP, kTiles = GM::kFwdTiles;
  const Args& a = p.a;
  extern __shared__ float4 group_smem4[];
  float* const base = reinterpret_cast<float*>(group_smem4);
  float* const h_s = base + S::kBars;          // (2, kNP, kHp) h of the group by sequence
  float* const red = h_s + 2 * kNP * S::kHp;   // (2, 2, kNP, kRp) each column half's W_hh h by sequence
  const int rank = static_cast<int>(cooperative_groups::this_cluster().block_rank());
  const GroupLane g = group_lane<NT>(p, rank);
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31, H = a.H, G = 4 * H;
  // The block's rows of W_hh as tf32 pairs, loaded before the wait (the parameters change only between steps).
  const FusedLayout& lay = lay_of(a, g.d);
  uint32_t ah[kTiles][4], al[kTiles][4];
#pragma unroll
  for (int kt = 0; kt < kTiles; ++kt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = GM::fwd_row(warp, lane, i);
      tf32_split(w_hh(a, lay, GM::kUnits * rank + r / 4, r % 4, GM::fwd_col(warp, lane, kt, i)), ah[kt][i], al[kt][i]);
    }
  for (int i = tid; i < 2 * kNP * S::kHp; i += GM::kThreads) h_s[i] = 0.0f;
  const uint32_t bars = smem_addr(base), bytes = GM::kHmax * kNP * 4;
  // Lane u of a member's 16 lanes sends units 4 (u mod 4) .. of the block to blocks u / 4 + 4 i.
  uint32_t far_h[4], far_bar[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int to = GM::h_dest(g.u, i);
    far_h[i] = remote_addr(smem_addr(h_s + g.s * S::kHp + GM::kUnits * rank + 4 * GM::h_chunk(g.u)), to);
    far_bar[i] = remote_addr(bars, to);
  }
  group_start(bars, bytes);

  const bool unit_ok = g.member && g.j < H;
  float c = 0.0f, h_last = 0.0f;
  PoolAcc acc;
  float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);   // step t's gate inputs (the projection), loaded a step ahead
  if (unit_ok) x = __ldcg(reinterpret_cast<const float4*>(g.gbuf + 4 * g.j));
  const int mt = warp & 3, kh = warp >> 2;
  for (int t = 0; t < g.maxlen; ++t) {
    float* const rb = red + (t & 1) * 2 * kNP * S::kRp;
    if (t > 0) {   // W_hh h_{t-1} for the group: rows 16 mt .., columns of half kh
      group_wait(bars, t - 1, bytes);
      const float* hb = h_s + ((t - 1) & 1) * kNP * S::kHp + (lane >> 2) * S::kHp + (lane & 3);
      float ac[4][NT][4] = {};
#pragma unroll
      for (int kt = 0; kt < kTiles; ++kt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const float* b = hb + nt * 8 * S::kHp + (GM::kHmax / 2) * kh + 8 * kt;
          mma3(ac[kt & 3][nt], ah[kt], al[kt], b[0], b[4]);
        }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        float* const o = rb + kh * kNP * S::kRp + (nt * 8 + 2 * (lane & 3)) * S::kRp + 16 * mt + (lane >> 2);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float v = (ac[0][nt][e] + ac[1][nt][e]) + (ac[2][nt][e] + ac[3][nt][e]);
          o[(e & 1) * S::kRp + (e >> 1) * 8] = v;
        }
      }
    }
    __syncthreads();
    if (!g.elem) continue;
    const bool live = unit_ok && t < g.len;
    float4 z = x;
    if (t > 0) {
      const float4 r0 = *reinterpret_cast<const float4*>(rb + g.s * S::kRp + 4 * g.u);
      const float4 r1 = *reinterpret_cast<const float4*>(rb + (kNP + g.s) * S::kRp + 4 * g.u);
      z.x += r0.x + r1.x;
      z.y += r0.y + r1.y;
      z.z += r0.z + r1.z;
      z.w += r0.w + r1.w;
    }
    const float ig = sigmoid_f(z.x), fg = sigmoid_f(z.y), gg = tanh_f(z.z), og = sigmoid_f(z.w);
    c = (t > 0 ? fg * c : 0.0f) + ig * gg;
    const float tc = tanh_f(c), h = og * tc;
    const float hv = live ? h : 0.0f;
    if (t + 1 < g.maxlen) {   // h_t of the block's units to every block: four float4s a member from four lanes
      const int src = (lane & 16) + 4 * GM::h_chunk(g.u);
      const float4 v = make_float4(__shfl_sync(kFull, hv, src), __shfl_sync(kFull, hv, src + 1),
                                   __shfl_sync(kFull, hv, src + 2), __shfl_sync(kFull, hv, src + 3));
      const uint32_t off = 4 * (t & 1) * kNP * S::kHp;
#pragma unroll
      for (int i = 0; i < 4; ++i) send4(far_h[i] + off, v, far_bar[i] + 8 * (t & 1));
    }
    if (live) {
      *reinterpret_cast<float4*>(g.gbuf + static_cast<int64_t>(t) * G + 4 * g.j) = make_float4(ig, fg, gg, og);
      const int64_t o = static_cast<int64_t>(t) * H + g.j;
      g.hbuf[o] = h;
      g.cbuf[o] = c;
      g.tcbuf[o] = tc;
      if (a.pool == 1) {
        acc.v += h;
      } else if (a.pool == 2 && (t == 0 || h > acc.v || (g.d == 1 && h == acc.v))) {   // ties: the first step
        acc.v = h;                                                                     // (reverse: the last)
        acc.at = t;
      }
      h_last = h;
      if (t + 1 < g.len) x = __ldcg(reinterpret_cast<const float4*>(g.gbuf + static_cast<int64_t>(t + 1) * G + 4 * g.j));
    }
  }
  if (a.pooled_out && unit_ok) store_pooled(a, g.seq, g.j, pooled_of(a, acc, h_last, g.len), acc, g.len);
  cooperative_groups::this_cluster().sync();   // no block leaves while another may still send into it
}

// The backward stage, seeded by Args::dh_ext alone: d gates replace the activations in each member's scratch.
template <int NT>
__global__ void __launch_bounds__(GM::kThreads, 1) group_backward_kernel(const __grid_constant__ Params p) {
  using S = GroupSmem<NT>;
  constexpr int kNP = S::kNP, kTiles = GM::kBwdTiles, kPart = GM::kUnits * S::kPp;
  const Args& a = p.a;
  extern __shared__ float4 group_smem4[];
  float* const base = reinterpret_cast<float*>(group_smem4);
  float* const part = base + S::kBars;                // (2, 16 blocks, 16 units, kPp) partial d h of the block's units
  float* const dgl = part + 2 * GM::kCl * kPart;      // (2, kNP, kRp) the block's d gates by sequence
  const int rank = static_cast<int>(cooperative_groups::this_cluster().block_rank());
  const GroupLane g = group_lane<NT>(p, rank);
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31, H = a.H, G = 4 * H;
  const FusedLayout& lay = lay_of(a, g.d);
  uint32_t ah[2][kTiles][4], al[2][kTiles][4];
#pragma unroll
  for (int mm = 0; mm < 2; ++mm)
#pragma unroll
    for (int kt = 0; kt < kTiles; ++kt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = GM::bwd_row(lane, kt, i);
        tf32_split(w_hh(a, lay, GM::kUnits * rank + r / 4, r % 4, GM::bwd_col(warp, lane, mm, i)), ah[mm][kt][i],
                   al[mm][kt][i]);
      }
  for (int i = tid; i < 2 * kNP * S::kRp; i += GM::kThreads) dgl[i] = 0.0f;
  const uint32_t bars = smem_addr(base), bytes = GM::kHmax * kNP * 4;
  // Warp w sends blocks 2 w and 2 w + 1 their units' partial sums: lane (g, t)'s units g, g + 8, sequences 2 t, + 1.
  uint32_t far_p[2], far_bar[2];
#pragma unroll
  for (int mm = 0; mm < 2; ++mm) {
    const int to = 2 * warp + mm;
    far_p[mm] = remote_addr(smem_addr(part + rank * kPart + (lane >> 2) * S::kPp + 2 * (lane & 3)), to);
    far_bar[mm] = remote_addr(bars, to);
  }
  group_start(bars, bytes);

  const bool unit_ok = g.member && g.j < H;
  const float* const ext = a.dh_ext + g.seq * a.t_cap * H + g.j;
  float dc = 0.0f;
  // Step t's activations, c_{t-1}, tanh(c_t) and d loss / d h_t from outside, loaded a step ahead.
  float4 act = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float cp = 0.0f, tcv = 0.0f, ev = 0.0f;
  auto fetch = [&](int t) {
    if (!unit_ok || t < 0) return;
    act = __ldcg(reinterpret_cast<const float4*>(g.gbuf + static_cast<int64_t>(t) * G + 4 * g.j));
    cp = t >= 1 ? __ldcg(g.cbuf + static_cast<int64_t>(t - 1) * H + g.j) : 0.0f;
    tcv = __ldcg(g.tcbuf + static_cast<int64_t>(t) * H + g.j);
    ev = __ldcg(ext + static_cast<int64_t>(t) * H);
  };
  fetch(g.len - 1);
  for (int i = 0; i < g.maxlen; ++i) {
    if (g.elem) {
      const int t = g.len - 1 - i;
      const bool live = unit_ok && t >= 0;
      float P = 0.0f;   // W_hh^T d gates of step t + 1, summed over the 16 blocks' rows in block order
      if (i > 0) {
        group_wait(bars, i - 1, bytes);
        const float* pp = part + ((i - 1) & 1) * GM::kCl * kPart + g.u * S::kPp + g.s;
#pragma unroll
        for (int src = 0; src < GM::kCl; ++src) P += pp[src * kPart];
      }
      const float dh = P + ev;
      const float ig = act.x, fg = act.y, gg = act.z, og = act.w;
      const float dct = dc + dh * og * (1.0f - tcv * tcv);
      const float d0 = dct * gg * ig * (1.0f - ig);
      const float d1 = t > 0 ? dct * cp * fg * (1.0f - fg) : 0.0f;
      const float d2 = dct * ig * (1.0f - gg * gg);
      const float d3 = dh * tcv * og * (1.0f - og);
      dc = dct * fg;
      const float4 dg = live ? make_float4(d0, d1, d2, d3) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      *reinterpret_cast<float4*>(dgl + ((i & 1) * kNP + g.s) * S::kRp + 4 * g.u) = dg;
      if (live) *reinterpret_cast<float4*>(g.gbuf + static_cast<int64_t>(t) * G + 4 * g.j) = dg;
      fetch(t - 1);
    }
    if (i + 1 == g.maxlen) break;
    __syncthreads();
    // W_hh^T (units of blocks 2 warp, + 1; the block's gate rows) times the block's d gates of step i.
    const float* db = dgl + (i & 1) * kNP * S::kRp + (lane >> 2) * S::kRp + (lane & 3);
#pragma unroll
    for (int mm = 0; mm < 2; ++mm) {
      float ac[4][NT][4] = {};
#pragma unroll
      for (int kt = 0; kt < kTiles; ++kt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const float* b = db + nt * 8 * S::kRp + 8 * kt;
          mma3(ac[kt & 3][nt], ah[mm][kt], al[mm][kt], b[0], b[4]);
        }
      const uint32_t off = 4 * (i & 1) * GM::kCl * kPart;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = (ac[0][nt][e] + ac[1][nt][e]) + (ac[2][nt][e] + ac[3][nt][e]);
        send2(far_p[mm] + off + 4 * 8 * nt, make_float2(v[0], v[1]), far_bar[mm] + 8 * (i & 1));
        send2(far_p[mm] + off + 4 * (8 * S::kPp + 8 * nt), make_float2(v[2], v[3]), far_bar[mm] + 8 * (i & 1));
      }
    }
  }
  cooperative_groups::this_cluster().sync();   // no block leaves while another may still send into it
}

}  // namespace

template <int NT>
const void* fused_group_forward_kernel() {
  return reinterpret_cast<const void*>(group_forward_kernel<NT>);
}
template <int NT>
const void* fused_group_backward_kernel() {
  return reinterpret_cast<const void*>(group_backward_kernel<NT>);
}
template const void* fused_group_forward_kernel<1>();
template const void* fused_group_forward_kernel<2>();
template const void* fused_group_backward_kernel<1>();
template const void* fused_group_backward_kernel<2>();

}  // namespace ragtrain
