// Phases 2-4 of the fused LSTM step (fused_lstm.cu) for 64 < H <= 256: a cluster of 4 blocks per sequence (H <= 128)
// or 16 (H <= 256), each holding its share of W_hh in registers, h and d gates exchanged through distributed shared
// memory.
#include <cooperative_groups.h>

#include "fused_chunks.hpp"
#include "fused_cluster_device.hpp"
#include "fused_device.hpp"
#include "fused_head.hpp"
#include "fused_kernels.hpp"

namespace ragtrain {
namespace {

// ---- The cluster variant (64 < H <= 256) ----
// One block cannot hold W_hh twice in registers at H = 128 (2 x 64 K floats; shared memory then bounds a timestep
// by its bandwidth, ~2 K cycles for the forward alone). So a sequence runs on a cluster of CL blocks (one per SM:
// 4 up to H = 128, 16 up to 256) and each block keeps both copies of its share: block c owns hidden units
// j = CL jl + c (jl < kUnits), and its thread (jl, q, p) — 16 lanes per unit, lane 4 q + p of the unit's half-warp —
// holds (ClusterMap, fused_lanes.hpp, where the unit tests check it)
//   forward:  W_hh[q H + j][fwd_col(p, k)], k < H_max / 4    (gate q's row of unit j, the columns of part p)
//   backward: W_hh[g H + i][j] for the 4 gates g and i = 4 q + p + 16 k   (column j, rows of part 4 q + p)
// A forward step: partial dot products over a part, summed over the unit's 4 parts with two xor shuffles (so the four
// lanes hold identical bits), the activations, the cell update in all 16 lanes of the unit, and h_t of the warp's
// two units stored by lane sender(q, p) into that block's shared memory (distributed shared memory) as one 8-byte
// store. The backward step sums over the unit's 16 lanes (four shuffles) and the same lanes send the unit's four d
// gates as one 16-byte store each (d gates unit-major, so a part reads float4s). At H <= 128 each remote store costs:
// one per gate and unit ran ~1,990 cycles a backward step at H = 128, one per unit ~1,400; one per unit forward
// ~1,470, one per warp ~1,440.
// The sends are asynchronous remote stores (st.async) that count their bytes on an mbarrier of the receiving block,
// and a block waits only on its own mbarrier for the step's vector: no cluster barrier per step. (A cluster barrier's
// release must also wait for the step's global stores to reach L2; with it a step cost ~1,750 cycles forward and
// ~2,250 backward on the H200.)
// Double buffers need no other barrier: every block's h_t (d gates) depends on all its warps having read step t's
// input, so no block can send into a buffer before all have read it. Warps whose units are all past H take no part.
// Fixed orders throughout: reruns are bitwise equal.

struct ClusterStep {
  const Args* a;
  float* h_s;        // (2, kVec) h_{t-1} by h_slot, double-buffered; every block holds all of it
  float* dg_s;       // (2, H_max, 4) d gates of step t + 1, unit-major
  uint32_t bars;     // this block's 4 mbarriers: h into buffer 0, 1; d gates into buffer 0, 1
  uint32_t h_far;    // h_s, dg_s and the mbarriers of block sender(q, p) (this lane's) in the cluster
  uint32_t dg_far;
  uint32_t bars_far;
  int H, G, len, j, q, p, ub;   // ub: the unit's first lane in the warp (0 or 16)
  uint32_t h_bytes;  // what one step's h brings each block: 8 bytes per warp whose first unit is below H
  bool valid, lead;  // lead: the thread that re-arms this block's mbarriers
  bool sends;        // this lane sends the unit's h and d gates (to block sender(q, p))
  float* g_r;        // this thread's gate column of gbuf (row 4 j + q)
  float* g_j;        // the unit's first row (4 j): its four gates as one float4
  const float* c_j;  // unit j's c and tanh(c) columns
  const float* tc_j;
  float* save_j;     // what lane (q, 0) saves each forward step: h (q = 1), c (2), tanh(c) (3)
  bool rev;          // direction 1 of directions run apart: max pooling's ties go to the last step processed
  // Overlapped stacked layers (Args::proj_flags): the slot (its flags), this thread's tile of gate rows, the active
  // warps' threads (the named barrier before a publish) and this block's forward progress word (or null).
  int b, tile, bar_threads;
  unsigned long long* fwd_word;
};

// Overlapped (Args::proj_flags): waits for the projection's chunk holding step t of this thread's gate rows; returns
// the first step of the chunk after it (the gates of every step below it are in).
__device__ __forceinline__ int cluster_wait_gates(const ClusterStep& st, int t) {
  wait_proj(*st.a, st.b, t, st.tile);
  return (t / st.a->tc + 1) * st.a->tc;
}

// Overlapped: every active warp of the block has stored h of the steps < v (their saves) when thread 0 publishes v.
__device__ __forceinline__ void cluster_publish_forward(const ClusterStep& st, int v) {
  asm volatile("bar.sync 1, %0;" ::"r"(st.bar_threads) : "memory");
  if (threadIdx.x == 0) publish_progress(st.fwd_word, st.a->epoch, v);
}

// The forward recurrence; returns unit j's input to the head (h_{len-1}, the mean or the max of h over the steps, as
// the one-block kernel) and keeps the max's step in acc.at.
template <class M, bool kChain>
__device__ __forceinline__ float cluster_forward(const ClusterStep& st, const float (&wf)[M::kCols], PoolAcc& acc) {
  const int G = st.G, H = st.H, len = st.len, q = st.q, p = st.p, ub = st.ub;
  const bool valid = st.valid;
  const int pool = st.a->pool;
  int cur = 0;
  float c = 0.0f, h = 0.0f;
  float pre[4];   // the input projections of the next 4 steps, each load issued 4 steps before its use
  // Overlapped: the gates of steps < ready are in (the projection's chunks are >= 8 steps: steps 0..3 in the first).
  const bool poll = kChain && st.a->proj_flags != nullptr;
  int ready = poll && valid ? cluster_wait_gates(st, 0) : 0;
#pragma unroll
  for (int u = 0; u < 4; ++u) pre[u] = (valid && u < len) ? st.g_r[u * G] : 0.0f;
  // Step t's saves (the unit's gates as one float4 by lane (0, 0); h, c, tanh(c) by lanes (1..3, 0)) are stored at
  // the end of the step, after the send: issued after the next step's matvec, as in the one-block kernel, they cost
  // ~140 cycles a forward step and ~90 a backward one on the H200 (H = 128).
  float4 put_act = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float put_val = 0.0f;
  auto put = [&](int ts) {
    if (valid && p == 0 && q == 0) *reinterpret_cast<float4*>(st.g_j + ts * G) = put_act;
    if (valid && p == 0 && q > 0) st.save_j[ts * H] = put_val;
  };
  for (int t0 = 0; t0 < len; t0 += 4) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int t = t0 + u;
      if (t >= len) break;
      if (kChain && st.fwd_word && t > 0 && (t & 7) == 0) cluster_publish_forward(st, t);
      const float xp = pre[u];
      if (poll && valid && t + 4 < len && t + 4 >= ready) ready = cluster_wait_gates(st, t + 4);
      pre[u] = (valid && t + 4 < len) ? st.g_r[(t + 4) * G] : 0.0f;
      if (t > 0) {   // h_{t-1}, sent at step t - 1 into buffer cur: the ((t - 1) / 2)-th phase of its mbarrier
        mbar_wait(st.bars + 8 * cur, ((t - 1) >> 1) & 1);
        if (st.lead) mbar_arm(st.bars + 8 * cur, st.h_bytes);   // its next phase
      }
      const float* hs = st.h_s + cur * M::kVec + p * M::kPart;   // h_{t-1} of part p's units: zero at t = 0
      // Four chains of FMAs, k mod 4 each, joined as (0 + 1) + (2 + 3), written out here (through a shared helper
      // ptxas ordered this kernel's loop differently, and only this order has been measured on the GPU).
      float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll
      for (int k = 0; k < M::kCols; k += 8) {
        const float4 m0 = *reinterpret_cast<const float4*>(hs + k);
        const float4 m1 = *reinterpret_cast<const float4*>(hs + k + 4);
        a0 += wf[k] * m0.x;
        a1 += wf[k + 1] * m0.y;
        a2 += wf[k + 2] * m0.z;
        a3 += wf[k + 3] * m0.w;
        a0 += wf[k + 4] * m1.x;
        a1 += wf[k + 5] * m1.y;
        a2 += wf[k + 6] * m1.z;
        a3 += wf[k + 7] * m1.w;
      }
      float part = (a0 + a1) + (a2 + a3);
      part += __shfl_xor_sync(kFull, part, 1);
      part += __shfl_xor_sync(kFull, part, 2);
      const float pre_act = xp + part;
      const float s = sigmoid_f(q == 2 ? 2.0f * pre_act : pre_act);
      const float act = q == 2 ? 2.0f * s - 1.0f : s;   // gate g: tanh
      const float ig = __shfl_sync(kFull, act, ub + p), fg = __shfl_sync(kFull, act, ub + 4 + p);
      const float gg = __shfl_sync(kFull, act, ub + 8 + p), og = __shfl_sync(kFull, act, ub + 12 + p);
      c = (t > 0 ? fg * c : 0.0f) + ig * gg;
      const float tc = tanh_f(c);
      h = og * tc;
      const float hv = valid ? h : 0.0f;
      const float h_odd = __shfl_sync(kFull, hv, (ub + 4 * q + p) | 16);   // the warp's second unit (j + CL)
      if (valid && ub == 0 && st.sends && t + 1 < len)   // (h_{len-1} goes to the head by pool_s)
        send2(st.h_far + 4 * ((cur ^ 1) * M::kVec + M::h_slot(st.j)), make_float2(hv, h_odd),
              st.bars_far + 8 * (cur ^ 1));
      if (pool == 1) {
        acc.v += h;
      } else if (pool == 2 && (t == 0 || h > acc.v || (st.rev && h == acc.v))) {   // ties: the first timestep
        acc.v = h;
        acc.at = t;
      }
      put_act = make_float4(ig, fg, gg, og);
      put_val = q == 1 ? h : (q == 2 ? c : tc);
      put(t);
      cur ^= 1;
    }
  }
  if (kChain && st.fwd_word) cluster_publish_forward(st, len);
  return pool == 0 ? h : (pool == 1 ? acc.v / static_cast<float>(len) : acc.v);
}

// The backward recurrence, seeded by d loss / d pooled h (`seed` at step seed_at, or at every step for the mean);
// d gates replace the activations in gbuf.
// Streaming (progress non-null), the block's active warps meet at a named barrier at the first group of 4 steps past
// each chunk boundary, and thread 0 publishes the block's progress word (the warps meet at no barrier otherwise).
// kExt (a layer below the top of a stacked LSTM): d h_t also gets the layer above's d loss / d h_t (ext_j: unit j's
// column of Args::dh_ext), loaded 4 steps ahead with the rest.
template <class M, bool kExt, bool kChain>
__device__ __forceinline__ void cluster_backward(const ClusterStep& st, const float (&wb)[M::kCols], float seed,
                                                 int seed_at, unsigned long long* progress, uint32_t epoch,
                                                 int bar_threads, const float* ext_j) {
  const int G = st.G, H = st.H, len = st.len, q = st.q, p = st.p, ub = st.ub;
  const bool valid = st.valid, every = st.a->pool == 1;
  int cb = 0;
  float dc = 0.0f;
  float pa[4], pc[4], pt[4], pe[4];
  // Overlapped (Args::dx_flags): the rows of dh_ext from ext_ready up are in (the input gradient's tiles of kIgT).
  int ext_ready = len;
  auto fetch = [&](int t, float& act, float& cp, float& tcv, float& ev) {
    act = (valid && t >= 0) ? st.g_r[t * G] : 0.0f;
    cp = (valid && t >= 1) ? st.c_j[(t - 1) * H] : 0.0f;
    tcv = (valid && t >= 0) ? st.tc_j[t * H] : 0.0f;
    if constexpr (kExt) {
      if (st.a->dx_flags && valid && t >= 0 && t < ext_ready) {
        const int tb = t / kIgT;
        for (int kb = 0; kb * kIgK < H; ++kb)
          while (!progress_reached(st.a->dx_flags + dx_flag(*st.a, st.b, tb, kb), st.a->epoch, 0)) __nanosleep(32);
        ext_ready = tb * kIgT;
      }
      ev = (valid && t >= 0) ? ext_j[t * H] : 0.0f;
    }
  };
#pragma unroll
  for (int u = 0; u < 4; ++u) fetch(len - 1 - u, pa[u], pc[u], pt[u], pe[u]);
  float4 put_dg = make_float4(0.0f, 0.0f, 0.0f, 0.0f);   // step t's d gates, stored at the end of the step
  auto put = [&](int ts) {
    if (valid && q == 1 && p == 0) *reinterpret_cast<float4*>(st.g_j + ts * G) = put_dg;
  };
  int published = len;
  auto publish = [&](int v) {   // every active warp of the block stored its d gates of steps >= v
    asm volatile("bar.sync 1, %0;" ::"r"(bar_threads) : "memory");
    if (threadIdx.x == 0) publish_progress(progress, epoch, v);
    published = v;
  };
  for (int t0 = len - 1; t0 >= 0; t0 -= 4) {
    // Each warp stored step t0 + 1's d gates at its end (after its send), so steps >= t0 + 2 are all in. (The
    // overlapped chain's variant publishes every 8 steps: the input gradient of the layer below waits for them.)
    const int v = kChain ? (t0 + 2 + 7) / 8 * 8 : wg_chunk_ceil(t0 + 2);
    if (progress && v < published) publish(v);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int t = t0 - u;
      if (t < 0) break;
      const float act = pa[u], cprev = pc[u], tc = pt[u];
      float ext = 0.0f;
      if constexpr (kExt) ext = pe[u];
      fetch(t - 4, pa[u], pc[u], pt[u], pe[u]);
      const float ig = __shfl_sync(kFull, act, ub + p), fg = __shfl_sync(kFull, act, ub + 4 + p);
      const float gg = __shfl_sync(kFull, act, ub + 8 + p), og = __shfl_sync(kFull, act, ub + 12 + p);
      const int s = len - 1 - t;   // the backward's step count
      if (s > 0) {                 // the d gates of step t + 1, sent into buffer cb
        mbar_wait(st.bars + 8 * (2 + cb), ((s - 1) >> 1) & 1);
        if (st.lead) mbar_arm(st.bars + 8 * (2 + cb), 16 * H);
      }
      // The d gates of units i = pt + 16 k (zero at t = len - 1): lanes pt and pt + 8 on distinct banks.
      const float* d = st.dg_s + cb * 4 * M::kHmax + 4 * (4 * q + p);
      float b0 = 0.0f, b1 = 0.0f, b2 = 0.0f, b3 = 0.0f;
#pragma unroll
      for (int k = 0; k < M::kCols / 4; ++k) {
        const float4 m = *reinterpret_cast<const float4*>(d + 64 * k);
        b0 += wb[4 * k] * m.x;
        b1 += wb[4 * k + 1] * m.y;
        b2 += wb[4 * k + 2] * m.z;
        b3 += wb[4 * k + 3] * m.w;
      }
      float P = (b0 + b1) + (b2 + b3);
#pragma unroll
      for (int o = 1; o < 16; o <<= 1) P += __shfl_xor_sync(kFull, P, o);   // the unit's 16 lanes, identical bits
      float dh = P + ((every || t == seed_at) ? seed : 0.0f);
      if constexpr (kExt) dh += ext;
      const float dct = dc + dh * og * (1.0f - tc * tc);
      const float d0 = dct * gg * ig * (1.0f - ig);
      const float d1 = t > 0 ? dct * cprev * fg * (1.0f - fg) : 0.0f;
      const float d2 = dct * ig * (1.0f - gg * gg);
      const float d3 = dh * tc * og * (1.0f - og);
      dc = dct * fg;
      const float4 dg = make_float4(d0, d1, d2, d3);
      if (valid && st.sends && t > 0)
        send4(st.dg_far + 4 * ((cb ^ 1) * 4 * M::kHmax + 4 * st.j), dg, st.bars_far + 8 * (2 + (cb ^ 1)));
      put_dg = dg;
      put(t);
      cb ^= 1;
    }
  }
  if (progress) publish(0);
}

// The cluster variant's recurrence kernel: blocks CL s .. CL s + CL - 1 run sequence s (the cluster's size is the
// launch's: 16 is a non-portable size, which only a launch attribute can ask for). Stacked (Args::stage):
// kStageForward stops after the forward, kStageBackward runs only the backward, seeded by dh_ext (kExt).
// Bidirectional, the directions run apart in stages: sequence s is direction s mod 2 of slot s / 2.
// kChain: the overlapped chain's variant (Args::proj_flags: polls the projection's chunks, publishes its forward
// progress); the plain one compiles that out (it cost a one-layer step at H = 128 2% on the H100). kExt implies it.
template <class M, bool kExt, bool kChain>
__global__ void __launch_bounds__(M::kThreads, 1) fused_lstm_cluster_kernel(const __grid_constant__ Params p) {
  constexpr int kCl = M::kCl, kThreads = M::kThreads;
  namespace cg = cooperative_groups;
  const Args& a = p.a;
  extern __shared__ float4 smem4[];
  float* const base = reinterpret_cast<float*>(smem4);   // the mbarriers (4 x 8 bytes), then:
  float* h_s = base + kClBars;                      // (2, kVec)
  float* dg_s = h_s + 2 * M::kVec;                  // (2, H_max, 4) (within 8 kVec)
  float* pool_s = dg_s + 8 * M::kVec;               // (H_max) the head's input by unit
  float* dh_s = pool_s + M::kHmax;                  // (H_max) d loss / d pooled h
  float* misc = dh_s + M::kHmax;                    // (4)
  float* lg_s = misc + 4;                           // (Cp) logits, then d loss / d logits
  float* fc_s = lg_s + a.Cp;                        // (fc_smem) the head's weight, then its bias
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank()), seq = static_cast<int>(blockIdx.x) / kCl;
  const int dir = seq % a.dirs;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31;
  const int q = (tid >> 2) & 3, pp = tid & 3;
  const int H = a.H, G = 4 * H, j = M::unit(rank, tid);
  const bool valid = j < H;
  const int to = M::sender(q, pp);
  const bool sends = to < kCl;
  const int far = sends ? to : 0;   // the block this lane sends to (an address in the cluster either way)
  const GatherSlot slot = slot_of(p, seq / a.dirs);
  const int len = slot.length;
  float* gbuf = a.scratch + static_cast<int64_t>(seq) * a.per_seq;   // the one-block kernel's scratch layout
  float* cbuf = gbuf + a.t_cap * G;
  float* tcbuf = cbuf + a.t_cap * H;
  float* hbuf = tcbuf + a.t_cap * H;
  mark(a, 0);

  for (int i = tid; i < kClusterSmemFixed<M> - kClBars; i += kThreads) h_s[i] = 0.0f;   // padding included
  // Both shares of W_hh into registers from the packed copy (zero-padded past H), all loads in flight.
  constexpr int kCols = M::kCols;
  float wf[kCols], wb[kCols];
  load_packed<M>(a, dir, rank, tid, wf, wb);
  const uint32_t bars = smem_addr(base);
  uint32_t h_bytes = 0;   // 8 for each warp of the cluster whose first unit, kCl (2 w) + r, is below H
  for (int r = 0; r < kCl; ++r)
    for (int w = 0; w < M::kUnits / 2; ++w) h_bytes += kCl * 2 * w + r < H ? 8 : 0;
  if (tid == 0) {
    for (int b = 0; b < 4; ++b) mbar_init(bars + 8 * b);
    for (int b = 0; b < 4; ++b) mbar_arm(bars + 8 * b, b < 2 ? h_bytes : 16 * H);   // each one's first phase
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  const int nfc = a.fc_smem ? a.C * H + a.C : 0;
  for (int i = tid; i < nfc; i += kThreads)
    fc_s[i] = a.params[i < a.C * H ? a.lay.fc_w + i : a.lay.fc_b + (i - a.C * H)];
  // Every block of the cluster is running, zeroed and its mbarriers set before any block sends into another.
  cluster.sync();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // gbuf holds the projection kernel's output (overlapped: its flags say which chunks, and dh_ext's say which rows).
  if (!kChain || !a.proj_flags) asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  mark(a, 1);
  int bar_threads = 0;   // the active warps' threads of this block (warp w holds units kCl (2 w) + rank, + kCl)
  for (int w = 0; w < kThreads / 32; ++w) bar_threads += kCl * 2 * w + rank < H ? 32 : 0;
  const ClusterStep st{&a,
                       h_s,
                       dg_s,
                       bars,
                       remote_addr(smem_addr(h_s), far),
                       remote_addr(smem_addr(dg_s), far),
                       remote_addr(bars, far),
                       H,
                       G,
                       len,
                       j,
                       q,
                       pp,
                       lane & 16,
                       h_bytes,
                       valid,
                       tid == 0,
                       sends,
                       gbuf + 4 * j + q,
                       gbuf + 4 * j,
                       cbuf + j,
                       tcbuf + j,
                       (q <= 1 ? hbuf : (q == 2 ? cbuf : tcbuf)) + j,
                       dir == 1,
                       seq / a.dirs,
                       (4 * j + q) / kMaxProjThreads,
                       bar_threads,
                       a.fwd_words ? a.fwd_words + static_cast<int64_t>(seq) * kMaxCl + rank : nullptr};
  // A warp whose units are all past H sits the recurrences out (it would only wait; nothing waits for it).
  const bool active = kCl * 2 * (tid >> 5) + rank < H;
  PoolAcc acc;
  const int stage = a.stage;
  const float pooled = active && stage != kStageBackward ? cluster_forward<M, kChain>(st, wf, acc) : 0.0f;
  if (stage == kStageForward) {
    // The top layer of directions run apart: its pooled value (and the step pooling took) for pool_head_kernel.
    if (a.pooled_out && valid && q == 0 && pp == 0) store_pooled(a, seq, j, pooled, acc, len);
    cluster.sync();   // no block leaves while another may still send into it
    return;
  }
  const float* const ext_j = kExt ? a.dh_ext + static_cast<int64_t>(seq) * a.t_cap * H + j : nullptr;
  if (stage == kStageBackward) {   // no head: the backward is seeded by dh_ext alone
    // Overlapped: the chain launched this kernel early, maybe while this layer's forward stage (another launch) still
    // runs: every block of it must have stored all its steps before this one reads them.
    if (kChain && a.fwd_words) {
      if (tid < kCl)
        while (!fwd_reached(a.fwd_words + static_cast<int64_t>(seq) * kMaxCl + tid, a.epoch, len)) __nanosleep(64);
      __syncthreads();
    }
    if (active)
      cluster_backward<M, kExt, kChain>(st, wb, 0.0f, 0,
                                a.stream ? a.progress + static_cast<int64_t>(seq) * kMaxCl + rank : nullptr, a.epoch,
                                bar_threads, ext_j);
    cluster.sync();
    return;
  }
  // For the head, loaded here (no register to spare through the recurrence): its latency overlaps the barrier.
  const int label = a.classification ? a.labels[slot.pos] : 0;
  if (valid && sends)   // every block gets the whole vector (through the head's dropout)
    cluster.map_shared_rank(pool_s, to)[j] = a.drop.threshold ? pooled * head_keep(a, slot.pos, j) : pooled;
  cluster.sync();
  mark(a, 2);

  // Each block runs the head (so each has d loss / d pooled h of its own units); block 0 emits its gradients.
  head(a, pool_s, lg_s, dh_s, misc, a.fc_smem ? fc_s : nullptr, slot.pos, label);
  mark(a, 3);

  const float seed = valid ? (a.pool == 1 ? dh_s[j] / static_cast<float>(len) : dh_s[j]) : 0.0f;
  if (active)
    cluster_backward<M, kExt, kChain>(st, wb, seed, a.pool == 0 ? len - 1 : acc.at,
                              a.stream ? a.progress + static_cast<int64_t>(seq) * kMaxCl + rank : nullptr, a.epoch,
                              bar_threads, ext_j);
  mark(a, 4);
  if (rank == 0) head_emit(a, pool_s, lg_s, misc, seq, nullptr);
  cluster.sync();   // no block leaves while another may still read or wait on anything of it
}

}  // namespace

template <class M, bool kExt, bool kChain>
const void* fused_cluster_kernel() {
  return reinterpret_cast<const void*>(fused_lstm_cluster_kernel<M, kExt, kChain>);
}
template const void* fused_cluster_kernel<ClusterMap4, false, false>();
template const void* fused_cluster_kernel<ClusterMap16, false, false>();
template const void* fused_cluster_kernel<ClusterMap4, false, true>();
template const void* fused_cluster_kernel<ClusterMap16, false, true>();
template const void* fused_cluster_kernel<ClusterMap4, true, true>();
template const void* fused_cluster_kernel<ClusterMap16, true, true>();

}  // namespace ragtrain
