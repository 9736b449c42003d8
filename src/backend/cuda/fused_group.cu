// Phases 2 and 4 of the fused LSTM step (fused_lstm.cu) for more than kStreamMaxB sequences at 128 < H <= 256: the
// slots, sorted by length, run in groups of up to 16 in lock step, a group (and direction) on a cluster of 16 blocks,
// the recurrent matvecs of the whole group on the tensor cores. The recurrences run in stages, as when the directions
// run apart: the forward stage leaves the pooled values (pool_head_kernel runs the head), the backward stage is seeded
// by d loss / d h_t in Args::dh_ext.
//
// Why: one sequence on a 16-block cluster (fused_cluster.cu) uses a whole cluster for one matvec a step, so at most
// 8 sequences run at once on 132 SMs and K = 32 takes four waves (998 us a step on the H100). Here the step of every
// sequence of a group is one small matrix product, W_hh (64 gate rows of the block x 256) times h (256 x up to 24
// sequences), on the tensor cores to float accuracy (a tf32 product and a bf16 one for the cross terms: mma2x4), what
// the CPU reference's tolerance needs; the 7 clusters an H100 runs at once hold 168 sequences. Block `rank` owns the
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
#include "fused_mixed_mma.hpp"

namespace ragtrain {
namespace {

using GM = GroupMap;

// The group a cluster runs: direction d's slots first .. first + nb - 1 (sorted: the first is the longest).
struct GroupOf {
  int d, first, nb, maxlen;
};
__device__ __forceinline__ GroupOf group_of(const Params& p) {
  const Args& a = p.a;
  const int ci = static_cast<int>(blockIdx.x) / GM::kCl, gi = ci / a.dirs;
  GroupOf g;
  g.d = ci % a.dirs;
  if (a.plan_n > 0) {
    g.first = a.plan_lo[gi];
    g.nb = a.plan_hi[gi] - g.first;
  } else {
    g.first = gi * a.group_n;
    g.nb = min(a.group_n, a.B - g.first);
  }
  g.maxlen = slot_of(p, g.first).length;
  return g;
}

// A (unit, member) pair whose cell a thread updates: pair e of thread tid is unit u = tid mod 16 of the block and
// member s = tid / 16 + 16 e (3 tiles: the first 128 threads take a second member, warp by warp).
struct GroupSeq {
  int s, len;           // len 0: s is no member of the group
  bool elem, unit_ok;   // elem: s < kNP (the thread updates the pair); unit_ok: a member and unit j below H
  int64_t seq;          // the member's sequence index (slot dirs + d)
  float* gbuf;          // its scratch (the one-block kernel's layout): gates (4H a step), then c, tanh(c), h (H each)
};
template <int NT>
__device__ __forceinline__ GroupSeq group_seq(const Params& p, const GroupOf& g, int j, int e) {
  const Args& a = p.a;
  GroupSeq q;
  q.s = (static_cast<int>(threadIdx.x) >> 4) + 16 * e;
  q.elem = q.s < 8 * NT;
  const bool member = q.elem && q.s < g.nb;
  q.len = member ? slot_of(p, g.first + q.s).length : 0;
  q.unit_ok = member && j < a.H;
  q.seq = static_cast<int64_t>(g.first + (member ? q.s : 0)) * a.dirs + g.d;
  q.gbuf = a.scratch + q.seq * a.per_seq;
  return q;
}
// Pairs a thread updates: 16 kNP over the block's threads.
template <int NT>
constexpr int kGroupPairs = (16 * 8 * NT + GM::kThreads - 1) / GM::kThreads;

// Sets up the block's mbarriers (each one's first phase expects one step's vector, `bytes`) and, after every block of
// the cluster did, lets the sends begin; then waits for the kernel before this one (its scratch), unless this launch
// runs beside it (Args::plan_join: group_finish waits instead).
__device__ __forceinline__ void group_start(const Args& a, uint32_t bars, uint32_t bytes) {
  if (threadIdx.x == 0) {
    for (int b = 0; b < 2; ++b) mbar_init(bars + 8 * b);
    for (int b = 0; b < 2; ++b) mbar_arm(bars + 8 * b, bytes);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cooperative_groups::this_cluster().sync();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (!a.plan_join) asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// The end of a stage kernel: no block leaves while another may still send into it; a launch beside the one before it
// ends only after that one (the kernel after this one waits for this one alone).
__device__ __forceinline__ void group_finish(const Args& a) {
  cooperative_groups::this_cluster().sync();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (a.plan_join) asm volatile("griddepcontrol.wait;" ::: "memory");
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
  constexpr int kNP = S::kNP, kTiles = GM::kFwdTiles, kPairs = kGroupPairs<NT>;
  const Args& a = p.a;
  extern __shared__ float4 group_smem4[];
  float* const base = reinterpret_cast<float*>(group_smem4);
  float* const h_s = base + S::kBars;          // (2, kNP, kHp) h of the group by sequence
  float* const red = h_s + 2 * kNP * S::kHp;   // (2, 2, kNP, kRp) each column half's W_hh h by sequence
  const int rank = static_cast<int>(cooperative_groups::this_cluster().block_rank());
  const GroupOf g = group_of(p);
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31, H = a.H, G = 4 * H;
  const int u = tid & 15, j = GM::kUnits * rank + u;
  // The block's rows of W_hh as tf32 pairs, loaded before the wait (the parameters change only between steps).
  const FusedLayout& lay = lay_of(a, g.d);
  uint32_t ah[kTiles][4], ax[kTiles][4];
#pragma unroll
  for (int kt = 0; kt < kTiles; ++kt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = GM::fwd_row(warp, lane, i);
      weight_parts(w_hh(a, lay, GM::kUnits * rank + r / 4, r % 4, GM::fwd_col(warp, lane, kt, i)), ah[kt][i],
                   ax[kt][i]);
    }
  for (int i = tid; i < 2 * kNP * S::kHp; i += GM::kThreads) h_s[i] = 0.0f;
  const uint32_t bars = smem_addr(base), bytes = GM::kHmax * kNP * 4;
  // Lane u of a member's 16 lanes sends units 4 (u mod 4) .. of the block to blocks u / 4 + 4 i (pair e: member
  // s + 16 e, 16 rows further).
  uint32_t far_h[4], far_bar[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int to = GM::h_dest(u, i);
    far_h[i] = remote_addr(smem_addr(h_s + (tid >> 4) * S::kHp + GM::kUnits * rank + 4 * GM::h_chunk(u)), to);
    far_bar[i] = remote_addr(bars, to);
  }
  GroupSeq sq[kPairs];
  float c[kPairs], h_last[kPairs];
  PoolAcc acc[kPairs];
  float4 x[kPairs];   // step t's gate inputs (the projection), loaded a step ahead
#pragma unroll
  for (int e = 0; e < kPairs; ++e) {
    sq[e] = group_seq<NT>(p, g, j, e);
    c[e] = h_last[e] = 0.0f;
    x[e] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  group_start(a, bars, bytes);

#pragma unroll
  for (int e = 0; e < kPairs; ++e)
    if (sq[e].unit_ok) x[e] = __ldcg(reinterpret_cast<const float4*>(sq[e].gbuf + 4 * j));
  const int mt = warp & 3, kh = warp >> 2;
  const int64_t tcap = a.t_cap;
  for (int t = 0; t < g.maxlen; ++t) {
    float* const rb = red + (t & 1) * 2 * kNP * S::kRp;
    if (t > 0) {   // W_hh h_{t-1} for the group: rows 16 mt .., columns of half kh
      group_wait(bars, t - 1, bytes);
      const float* hb = h_s + ((t - 1) & 1) * kNP * S::kHp + (lane >> 2) * S::kHp + (lane & 3);
      float ac[4][NT][4] = {};   // accumulator kt mod 4
#pragma unroll
      for (int kt0 = 0; kt0 < kTiles; kt0 += 4)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const float* const b0 = hb + nt * 8 * S::kHp + (GM::kHmax / 2) * kh + 8 * kt0;
          float(*d[4])[4] = {&ac[0][nt], &ac[1][nt], &ac[2][nt], &ac[3][nt]};
          const float* const b[4] = {b0, b0 + 8, b0 + 16, b0 + 24};
          mma2x4(d, ah, ax, kt0, b);
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
#pragma unroll
    for (int e = 0; e < kPairs; ++e) {
      const GroupSeq& q = sq[e];
      if (!q.elem) continue;   // (warp-uniform)
      const bool live = q.unit_ok && t < q.len;
      float4 z = x[e];
      if (t > 0) {
        const float4 r0 = *reinterpret_cast<const float4*>(rb + q.s * S::kRp + 4 * u);
        const float4 r1 = *reinterpret_cast<const float4*>(rb + (kNP + q.s) * S::kRp + 4 * u);
        z.x += r0.x + r1.x;
        z.y += r0.y + r1.y;
        z.z += r0.z + r1.z;
        z.w += r0.w + r1.w;
      }
      const float ig = sigmoid_f(z.x), fg = sigmoid_f(z.y), gg = tanh_f(z.z), og = sigmoid_f(z.w);
      c[e] = (t > 0 ? fg * c[e] : 0.0f) + ig * gg;
      const float tc = tanh_f(c[e]), h = og * tc;
      const float hv = live ? h : 0.0f;
      if (t + 1 < g.maxlen) {   // h_t of the block's units to every block: four float4s a member from four lanes
        const int src = (lane & 16) + 4 * GM::h_chunk(u);
        const float4 v = make_float4(__shfl_sync(kFull, hv, src), __shfl_sync(kFull, hv, src + 1),
                                     __shfl_sync(kFull, hv, src + 2), __shfl_sync(kFull, hv, src + 3));
        const uint32_t off = 4 * ((t & 1) * kNP + 16 * e) * S::kHp;
#pragma unroll
        for (int i = 0; i < 4; ++i) send4(far_h[i] + off, v, far_bar[i] + 8 * (t & 1));
      }
      if (live) {
        float* const row = q.gbuf + t * G;
        *reinterpret_cast<float4*>(row + 4 * j) = make_float4(ig, fg, gg, og);
        float* const cj = q.gbuf + tcap * G + t * H + j;   // c, then tanh(c), then h: t_cap H apart
        cj[0] = c[e];
        cj[tcap * H] = tc;
        cj[2 * tcap * H] = h;
        if (a.pool == 1) {
          acc[e].v += h;
        } else if (a.pool == 2 && (t == 0 || h > acc[e].v || (g.d == 1 && h == acc[e].v))) {   // ties: the first
          acc[e].v = h;                                                                        // step (reverse: the
          acc[e].at = t;                                                                       // last)
        }
        h_last[e] = h;
        if (t + 1 < q.len) x[e] = __ldcg(reinterpret_cast<const float4*>(row + G + 4 * j));
      }
    }
  }
#pragma unroll
  for (int e = 0; e < kPairs; ++e)
    if (a.pooled_out && sq[e].unit_ok)
      store_pooled(a, sq[e].seq, j, pooled_of(a, acc[e], h_last[e], sq[e].len), acc[e], sq[e].len);
  group_finish(a);
}

// The backward stage, seeded by Args::dh_ext alone: d gates replace the activations in each member's scratch.
template <int NT>
__global__ void __launch_bounds__(GM::kThreads, 1) group_backward_kernel(const __grid_constant__ Params p) {
  using S = GroupSmem<NT>;
  constexpr int kNP = S::kNP, kTiles = GM::kBwdTiles, kPart = GM::kUnits * S::kPp, kPairs = kGroupPairs<NT>;
  const Args& a = p.a;
  extern __shared__ float4 group_smem4[];
  float* const base = reinterpret_cast<float*>(group_smem4);
  float* const part = base + S::kBars;                // (2, 16 blocks, 16 units, kPp) partial d h of the block's units
  float* const dgl = part + 2 * GM::kCl * kPart;      // (2, kNP, kRp) the block's d gates by sequence
  const int rank = static_cast<int>(cooperative_groups::this_cluster().block_rank());
  const GroupOf g = group_of(p);
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31, H = a.H, G = 4 * H;
  const int u = tid & 15, j = GM::kUnits * rank + u;
  const FusedLayout& lay = lay_of(a, g.d);
  uint32_t ah[2][kTiles][4], ax[2][kTiles][4];
#pragma unroll
  for (int mm = 0; mm < 2; ++mm)
#pragma unroll
    for (int kt = 0; kt < kTiles; ++kt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = GM::bwd_row(lane, kt, i);
        weight_parts(w_hh(a, lay, GM::kUnits * rank + r / 4, r % 4, GM::bwd_col(warp, lane, mm, i)), ah[mm][kt][i],
                     ax[mm][kt][i]);
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
  GroupSeq sq[kPairs];
#pragma unroll
  for (int e = 0; e < kPairs; ++e) sq[e] = group_seq<NT>(p, g, j, e);
  group_start(a, bars, bytes);

  const int64_t tcap = a.t_cap;
  // Each pair's d c, and step t's activations, c_{t-1}, tanh(c_t) and d loss / d h_t from outside, loaded a step
  // ahead.
  float dc[kPairs], cp[kPairs], tcv[kPairs], ev[kPairs];
  float4 act[kPairs];
  auto fetch = [&](int e, int t) {
    const GroupSeq& q = sq[e];
    if (!q.unit_ok || t < 0) return;
    act[e] = __ldcg(reinterpret_cast<const float4*>(q.gbuf + t * G + 4 * j));
    const float* const cj = q.gbuf + tcap * G + t * H + j;
    cp[e] = t >= 1 ? __ldcg(cj - H) : 0.0f;
    tcv[e] = __ldcg(cj + tcap * H);
    ev[e] = __ldcg(a.dh_ext + q.seq * tcap * H + t * H + j);
  };
#pragma unroll
  for (int e = 0; e < kPairs; ++e) {
    dc[e] = cp[e] = tcv[e] = ev[e] = 0.0f;
    act[e] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    fetch(e, sq[e].len - 1);
  }
  for (int i = 0; i < g.maxlen; ++i) {
    if (i > 0 && sq[0].elem) group_wait(bars, i - 1, bytes);   // (thread 0, the lead, has an element)
#pragma unroll
    for (int e = 0; e < kPairs; ++e) {
      const GroupSeq& q = sq[e];
      if (!q.elem) continue;
      const int t = q.len - 1 - i;
      const bool live = q.unit_ok && t >= 0;
      float P = 0.0f;   // W_hh^T d gates of step t + 1, summed over the 16 blocks' rows in block order
      if (i > 0) {
        const float* pp = part + ((i - 1) & 1) * GM::kCl * kPart + u * S::kPp + q.s;
#pragma unroll
        for (int src = 0; src < GM::kCl; ++src) P += pp[src * kPart];
      }
      const float dh = P + ev[e];
      const float ig = act[e].x, fg = act[e].y, gg = act[e].z, og = act[e].w, tc = tcv[e];
      const float dct = dc[e] + dh * og * (1.0f - tc * tc);
      const float d0 = dct * gg * ig * (1.0f - ig);
      const float d1 = t > 0 ? dct * cp[e] * fg * (1.0f - fg) : 0.0f;
      const float d2 = dct * ig * (1.0f - gg * gg);
      const float d3 = dh * tc * og * (1.0f - og);
      dc[e] = dct * fg;
      const float4 dg = live ? make_float4(d0, d1, d2, d3) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      *reinterpret_cast<float4*>(dgl + ((i & 1) * kNP + q.s) * S::kRp + 4 * u) = dg;
      if (live) *reinterpret_cast<float4*>(q.gbuf + t * G + 4 * j) = dg;
      fetch(e, t - 1);
    }
    if (i + 1 == g.maxlen) break;
    __syncthreads();
    // W_hh^T (units of blocks 2 warp, + 1; the block's gate rows) times the block's d gates of step i.
    const float* db = dgl + (i & 1) * kNP * S::kRp + (lane >> 2) * S::kRp + (lane & 3);
#pragma unroll
    for (int mm = 0; mm < 2; ++mm) {
      float ac[4][NT][4] = {};   // accumulator kt mod 4
#pragma unroll
      for (int kt0 = 0; kt0 < kTiles; kt0 += 4)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const float* const b0 = db + nt * 8 * S::kRp + 8 * kt0;
          float(*d[4])[4] = {&ac[0][nt], &ac[1][nt], &ac[2][nt], &ac[3][nt]};
          const float* const b[4] = {b0, b0 + 8, b0 + 16, b0 + 24};
          mma2x4(d, ah[mm], ax[mm], kt0, b);
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
  group_finish(a);
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
template const void* fused_group_forward_kernel<3>();
template const void* fused_group_backward_kernel<1>();
template const void* fused_group_backward_kernel<2>();
template const void* fused_group_backward_kernel<3>();

}  // namespace ragtrain
