// Phases 2-4 of the fused LSTM step (fused_lstm.cu) for H <= 64, one thread block per sequence and direction with
// W_hh in registers: the forward recurrence with the pooling, the head and loss (fused_head.hpp), the backward
// recurrence (publishing its progress for the streaming weight gradients), then the head's gradients.
// Bidirectional, a sequence runs on a cluster of 2 blocks, block d direction d with the same code: direction 1's
// projection is stored in its processing order (timestep len - 1 - s at row s), so its recurrences walk rows as the
// forward's do. The pooled vectors meet through distributed shared memory before the head ([forward ; reverse], as
// PyTorch's output), each block runs the head for its half of d loss / d pooled h, and block 0 emits the head's
// gradients.
#include <cooperative_groups.h>

#include "fused_chunks.hpp"
#include "fused_device.hpp"
#include "fused_head.hpp"
#include "fused_kernels.hpp"
#include "fused_lanes.hpp"

namespace ragtrain {
namespace {

// What the two recurrences share (inlined: these stay in registers).
struct Step {
  float* h_s;        // (2, HP)
  float* dg_s;       // (2, 4, HP)
  const float* dh_s; // (HP) d loss / d pooled h of this direction's units
  int H, G, HP, len, j, q, quad, pool;
  bool valid;
  float* g_r;        // this thread's gate column of gbuf
  float* c_j;        // its unit's c, tanh(c) columns, and what it saves in the forward pass
  float* tc_j;
  float* save_j;
  unsigned long long* progress;   // this sequence's progress word (Args::progress)
  uint32_t epoch;
  bool lead;                      // thread 0 of a streaming run: publishes the progress
  bool rev;                       // direction 1: max pooling's ties go to the last step processed (the first timestep)
  const float* ext_j;             // a stacked layer below the top: unit j's column of Args::dh_ext (kExt)
};

// The recurrences' matrix-vector products read their vector from shared memory, and there the cost is the number of
// load instructions, not of bytes: on the H200 a 16-byte load takes two wavefronts of the shared-memory pipe when the
// whole warp reads one address and four when it reads a few (one per quarter warp), and a timestep's loads of all
// warps queue behind each other there (ncu, H = 50: 13 loads a lane, 182 wavefronts a forward step and 364 a backward
// one, against steps of ~716 and ~810 cycles). So a lane holds the weights of several rows for a part of the columns,
// loads only that part, and the partial sums are exchanged by shuffles.
//
// Both matvecs give a lane four rows' worth of partial sums over a quarter of the vector — slice k of it: float4 blocks
// k, k + 4, ... and then its share of the tail (HR = 4 or 8 mod 16: float k or float2 k of the last 4 or 8) — and
// reduce them over the four lanes of the slices, S apart, in two rounds of shuffles: lane k keeps row k's sum,
// (k + k ^ 2) + (k ^ 1 + k ^ 3), a fixed order (reruns are bitwise equal). Its weights are in lane-relative order,
// w[u HR / 4 + s] for row k ^ u at element s of its slice, so the exchange needs no select.
//  - Forward (S = 1): lane q of unit j's quad; row u is gate q ^ u of unit j (PyTorch row (q ^ u) H + j), v is h.
//  - Backward (S = 4): the quads of units 4 m .. 4 m + 3 form a group of 16 lanes; lane (k = j & 3, q) takes gate q's
//    d gates at row slice k, and row u is column j ^ u of W_hh^T's gate-q block (W_hh[q H + i][j ^ u]); v is gate
//    q's d gates. The result is gate q's share of (W_hh^T dg)[j]; the quad then adds its four gates. (With a quarter
//    of the rows for four units a lane loads 13 floats at H = 50 where an octet of two units loaded 26, and a
//    backward step's loads cost 91 wavefronts of the shared-memory pipe instead of 196.)
template <int HR, int S>
__device__ __forceinline__ float slice_matvec(const float (&w)[HR], const float* v, int k) {
  using L = LaneSlice<HR>;
  static_assert(L::kTail <= 2 && HR % 4 == 0, "slice_matvec: HR = 0, 4 or 8 (mod 16)");
  float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < L::kF4; ++i) {
    const float4 m = *reinterpret_cast<const float4*>(v + 16 * i + 4 * k);
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      a[g] += w[g * L::kS + 4 * i] * m.x;
      a[g] += w[g * L::kS + 4 * i + 1] * m.y;
      a[g] += w[g * L::kS + 4 * i + 2] * m.z;
      a[g] += w[g * L::kS + 4 * i + 3] * m.w;
    }
  }
  if constexpr (L::kTail == 1) {
    const float m = v[16 * L::kF4 + k];
#pragma unroll
    for (int g = 0; g < 4; ++g) a[g] += w[g * L::kS + 4 * L::kF4] * m;
  } else if constexpr (L::kTail == 2) {
    const float2 m = *reinterpret_cast<const float2*>(v + 16 * L::kF4 + 2 * k);
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      a[g] += w[g * L::kS + 4 * L::kF4] * m.x;
      a[g] += w[g * L::kS + 4 * L::kF4 + 1] * m.y;
    }
  }
  const float u0 = a[0] + __shfl_xor_sync(kFull, a[2], 2 * S);   // row k: lane k ^ 2's slot 2
  const float u1 = a[1] + __shfl_xor_sync(kFull, a[3], 2 * S);   // row k ^ 1: its slot 3
  return u0 + __shfl_xor_sync(kFull, u1, S);                      // lane k ^ 1's u1 is row k
}

// v = *p if `load`, else v as it was: a predicated load into v's own register. The recurrences' rings of values
// loaded kRing steps ahead need it: from `v = load ? *p : 0` ptxas may issue the load into another register (ahead of
// the old value's last uses) and move it into v's at the end of the step, and that move waits for the load (on the
// H200 such moves drew 10% of the one-block recurrence's stall samples at H = 50, a backward step ~90 cycles longer).
// The asm is volatile so that it stays between the block barriers around it.
__device__ __forceinline__ void load_if(float& v, const float* p, bool load) {
  asm volatile(
      "{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %2, 0;\n\t@q ld.global.f32 %0, [%1];\n\t}"
      : "+f"(v)
      : "l"(p), "r"(static_cast<int>(load)));
}

// Phase 2: the forward recurrence; returns which half of h_s holds h_{len-1}, and unit j's pooling in `acc`.
// Loads of the recurrences are issued kRing steps ahead (2 measured slower on the H200: 872 vs 834 cycles a step).
constexpr int kRing = 4;
template <int HR>
__device__ __forceinline__ int forward_recurrence(const Step& st, const float (&wf)[HR], PoolAcc& acc) {
  float* const h_s = st.h_s;
  const int H = st.H, G = st.G, HP = st.HP, len = st.len;
  const int j = st.j, q = st.q, quad = st.quad;
  const bool valid = st.valid;
  float* const g_r = st.g_r;
  float* const save_j = st.save_j;
  // The input projections of the next 4 steps wait in registers: each load is issued 4 steps before its use.
  int cur = 0;
  float c = 0.0f;
  float pre[kRing];
#pragma unroll
  for (int u = 0; u < kRing; ++u) pre[u] = (valid && u < len) ? g_r[u * G] : 0.0f;
  // What step t saves: the unit's four activations as one float4 (lane 0: g_r is then row 4 j, 16-byte aligned), h,
  // c and tanh(c) (lanes 1, 2, 3), one store a lane. Issued in step t + 1 after its h loads, with that step's
  // prefetch: global accesses queued before the loads delay them (H = 50 on the H200: 834 cycles a step with the
  // stores before the barrier, 757 here, 671 without any).
  // Steps are stored in order, through pointers that move on by a step each (an index times the row length costs a
  // 64-bit address computation on the chain).
  float4 put_act = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float put_val = 0.0f;
  float* put_g = g_r;
  float* put_s = save_j;
  auto put = [&]() {
    if (valid && q == 0) *reinterpret_cast<float4*>(put_g) = put_act;
    if (valid && q > 0) *put_s = put_val;
    put_g += G;
    put_s += H;
  };
  const float kq = q == 2 ? 2.0f * kNegLog2e : kNegLog2e;   // gate g: tanh(v) = 2 sigmoid(2 v) - 1
  for (int t0 = 0; t0 < len; t0 += kRing) {
#pragma unroll
    for (int u = 0; u < kRing; ++u) {
      const int t = t0 + u;
      if (t >= len) break;
      const float xp = pre[u];
      // h_{t-1} (zero at t = 0), padded to HR with zero weights: no branch, loads hoisted
      const float pre_act = xp + slice_matvec<HR, 1>(wf, h_s + cur * HP, q);
      load_if(pre[u], g_r + (t + kRing) * G, valid && t + kRing < len);   // (past len: never read)
      if (t > 0) put();   // step t - 1
      const float s = sigmoid_scaled(pre_act * kq);
      const float act = q == 2 ? 2.0f * s - 1.0f : s;
      const float ig = __shfl_sync(kFull, act, quad), fg = __shfl_sync(kFull, act, quad + 1);
      const float gg = __shfl_sync(kFull, act, quad + 2), og = __shfl_sync(kFull, act, quad + 3);
      c = (t > 0 ? fg * c : 0.0f) + ig * gg;
      const float tc = tanh_f(c);
      const float h = og * tc;
      if (valid && q == 0) h_s[(cur ^ 1) * HP + j] = h;
      // Pooling: a compare or an add beside the chain (nothing downstream in this step waits for it).
      if (st.pool == 1) {
        acc.v += h;
      } else if (st.pool == 2 && (t == 0 || h > acc.v || (st.rev && h == acc.v))) {   // ties: the first timestep
        acc.v = h;
        acc.at = t;
      }
      put_act = make_float4(ig, fg, gg, og);
      put_val = q == 1 ? h : (q == 2 ? c : tc);
      __syncthreads();
      cur ^= 1;
    }
  }
  put();   // step len - 1
  return cur;
}

// Phase 4: the backward recurrence, from d loss / d pooled h in dh_s; d gates replace the activations in gbuf.
// The pooling's backward seeds d h: at the last step (last), at every step divided by the length (mean, as the
// reference: dq / n added at each step), or at unit j's argmax step (max, `at`).
// kExt (a layer below the top of a stacked LSTM): d h_t also gets the layer above's d loss / d h_t (ext_j), loaded
// with the other values kRing steps ahead.
template <int HR, bool kExt>
__device__ __forceinline__ void backward_recurrence(const Step& st, const float (&wb)[HR], int at) {
  float* const dg_s = st.dg_s;
  const int H = st.H, G = st.G, HP = st.HP, len = st.len;
  const int j = st.j, q = st.q, quad = st.quad;
  const bool valid = st.valid;
  float* const g_r = st.g_r;
  const float* const c_j = st.c_j;
  const float* const tc_j = st.tc_j;
  const float* const dh_s = st.dh_s;
  const float seed = st.pool == 1 ? dh_s[j] / static_cast<float>(len) : dh_s[j];
  const int seed_at = st.pool == 0 ? len - 1 : at;   // mean: every step
  // Thread (j, q) sums gate q's share of (W_hh^T dg)[j]; the quad adds the four.
  // Step t's activation, c_{t-1} and tanh(c_t) are loaded 4 steps ahead, as in the forward loop: zero for an invalid
  // lane or a step before 0 at first, then (load_if) left as they are (the steps before 0 never run, c_{-1} is never
  // read, an invalid lane keeps its zeros).
  int cb = 0;
  float dc = 0.0f;
  float pa[kRing], pc[kRing], pt[kRing], pe[kRing];
  const float* const ext_j = st.ext_j;
  auto fetch = [&](int t, float& act, float& cp, float& tcv, float& ev) {
    act = (valid && t >= 0) ? g_r[t * G] : 0.0f;
    cp = (valid && t >= 1) ? c_j[(t - 1) * H] : 0.0f;
    tcv = (valid && t >= 0) ? tc_j[t * H] : 0.0f;
    if constexpr (kExt) ev = (valid && t >= 0) ? ext_j[t * H] : 0.0f;
  };
#pragma unroll
  for (int u = 0; u < kRing; ++u) fetch(len - 1 - u, pa[u], pc[u], pt[u], pe[u]);
  auto refetch = [&](int t, float& act, float& cp, float& tcv, float& ev) {
    load_if(act, g_r + t * G, valid && t >= 0);
    load_if(cp, c_j + (t - 1) * H, valid && t >= 1);
    load_if(tcv, tc_j + t * H, valid && t >= 0);
    if constexpr (kExt) load_if(ev, ext_j + t * H, valid && t >= 0);
  };
  // Step t's d gates (one float4, lane 0) go to global memory in step t - 1 after its matvec, as in the forward.
  float4 put_dg = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  auto put = [&](int ts) {
    if (valid && q == 0) *reinterpret_cast<float4*>(g_r + ts * G) = put_dg;   // row 4 j
  };
  int published = len;   // streaming: the progress word's last value (all steps >= it are stored)
  for (int t0 = len - 1; t0 >= 0; t0 -= kRing) {
    // Steps >= t0 + 2 are in the scratch: the d gates of step t0 + 2 were stored in step t0 + 1, before its barrier.
    // Published at the first group of kRing steps past each chunk boundary, before this thread's own stores of
    // the group, so the fence finds little left in flight; outside the unrolled steps, whose scheduling a fence (a
    // compiler barrier too) would constrain (inside them it cost ~90 cycles a step on the H200, even in runs that
    // never published).
    const int v = wg_chunk_ceil(t0 + 2);   // a chunk boundary with every step >= it stored
    if (st.lead && v < published) {
      published = v;
      publish_progress(st.progress, st.epoch, v);
    }
#pragma unroll
    for (int u = 0; u < kRing; ++u) {
      const int t = t0 - u;
      if (t < 0) break;
      const float act = pa[u], cprev = pc[u], tc = pt[u];
      float ext = 0.0f;
      if constexpr (kExt) ext = pe[u];
      // The gates of the unit first, and every factor of the d gates that does not depend on d h: none of it waits
      // for the recurrence, so it leaves the critical path (which keeps d h -> d c -> d gate: an add, an FMA and a
      // product), and the saved values are used up before the loads that refill their registers.
      const float ig = __shfl_sync(kFull, act, quad), fg = __shfl_sync(kFull, act, quad + 1);
      const float gg = __shfl_sync(kFull, act, quad + 2), og = __shfl_sync(kFull, act, quad + 3);
      const float kc = og * (1.0f - tc * tc);   // d c_t / d h_t
      const float k0 = gg * (ig * (1.0f - ig));
      const float k1 = t > 0 ? cprev * (fg * (1.0f - fg)) : 0.0f;
      const float k2 = ig * (1.0f - gg * gg);
      const float k3 = tc * (og * (1.0f - og));
      const float kd = q == 0 ? k0 : (q == 1 ? k1 : (q == 2 ? k2 : k3));
      // d gates of step t + 1 (zero at t = len - 1): gate q's share for unit j, then the quad's sum over gates
      float P = slice_matvec<HR, 4>(wb, dg_s + cb * 4 * HP + q * HP, j & 3);
      // Step t - 4's values into the registers step t has just read. (Refilled after the barrier instead, where every
      // use of the old values comes before the load, a backward step took ~45 cycles longer on the H200: the loads
      // then queue before the step's shared-memory loads.)
      refetch(t - kRing, pa[u], pc[u], pt[u], pe[u]);
      if (t < len - 1) put(t + 1);
      P += __shfl_xor_sync(kFull, P, 1);   // identical bits in all four lanes (addition commutes exactly)
      P += __shfl_xor_sync(kFull, P, 2);
      float dh = P + ((st.pool == 1 || t == seed_at) ? seed : 0.0f);
      if constexpr (kExt) dh += ext;
      const float dct = dc + dh * kc;
      // Selects, not branches on q (those would run the four paths one after another in every warp); lane 0 stores
      // all four, each the same product as its lane's.
      const float dg = (q == 3 ? dh : dct) * kd;
      dc = dct * fg;
      if (valid) dg_s[(cb ^ 1) * 4 * HP + q * HP + j] = dg;
      put_dg = make_float4(dct * k0, dct * k1, dct * k2, dh * k3);
      __syncthreads();
      cb ^= 1;
    }
  }
  put(0);
  __syncthreads();   // every thread's last d gates are issued
  if (st.lead) publish_progress(st.progress, st.epoch, 0);
}

// Bidirectional: both blocks of the cluster get [forward ; reverse] in pool2 (direction d's unit j at d H + j): each
// writes its half there and into the other block, and the cluster barrier orders those stores before either block's
// head reads them (no block touches the other's shared memory after it).
__device__ __forceinline__ void exchange_pooled(float* pool2, int d, int H, int j, bool write, float v) {
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  if (write) {
    pool2[d * H + j] = v;
    cluster.map_shared_rank(pool2, d ^ 1)[d * H + j] = v;
  }
  cluster.sync();
}

// Stacked (Args::stage): kStageForward stops after the forward (its h, c, tanh(c) and activations stay in the scratch
// for the layer above and for the backward); kStageBackward skips the forward and the head and seeds the backward with
// nothing but dh_ext.
// The prologue's recurrent weights into registers: forward, the four gates' rows of unit j at lane q's slice of the
// columns; backward, gate q's rows at slice j & 3 of the rows for the columns of the four units of j's group
// (slice_matvec; lanes past H hold their group's other units' weights too: those units' sums need every slice). All of
// W_hh goes through shared memory first, row-major, warp w copying the four gates' rows of units 8 w .. 8 w + 7 (for
// each gate 8 H contiguous floats) by cp.async, every copy in flight at once; each lane reads its forward row slices
// there at once, and its backward column entries after the forward (they hold no registers through it). (The
// backward's entries read straight from global memory touched 8-16 sectors a warp's load for 4 useful bytes a lane: on
// the H200 the prologue took ~3.9 us at H = 50, the first step waiting for it; rows straight into registers, 32
// sectors a load, took 8.2 K cycles at K = 128.)
// Block b dirs + d runs direction d of slot b (a cluster of the two when bidirectional); its scratch (int offsets
// within it: t_cap * 4H fits easily) and progress words are indexed by blockIdx.x.
template <int HR, bool kExt>
__global__ void __launch_bounds__(256, 1) fused_lstm_kernel(const __grid_constant__ Params p) {
  const Args& a = p.a;
  extern __shared__ float4 smem4[];
  const int H = a.H, G = 4 * H, HP = a.HP;
  float* h_s = reinterpret_cast<float*>(smem4);   // (2, HP) h, double-buffered
  float* dg_s = h_s + 2 * HP;    // (2, 4, HP) d gates, gate-major, double-buffered
  float* lg_s = dg_s + 8 * HP;   // (Cp) logits, then d loss / d logits
  float* dh_s = lg_s + a.Cp;     // (dirs HP) d loss / d pooled h (both directions': hin)
  float* misc = dh_s + a.dirs * HP;   // (4)
  float* pool2 = misc + 4;       // (bidirectional: 2 HP) the pooled vectors of both directions, hin contiguous
  float* fc_s = pool2 + (a.dirs == 2 ? 2 * HP : 0);   // (fc_smem) the head's weight, then its bias
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, nt = static_cast<int>(blockDim.x);
  const int r = tid, j = r >> 2, q = r & 3, quad = lane & ~3;
  const bool valid = r < G;
  const int d = a.dirs == 2 ? static_cast<int>(blockIdx.x) & 1 : 0, b = static_cast<int>(blockIdx.x) / a.dirs;
  const GatherSlot slot = slot_of(p, b);
  const int len = slot.length;
  const int label = a.classification ? a.labels[slot.pos] : 0;   // for the head, loaded long before
  float* gbuf = a.scratch + static_cast<int64_t>(blockIdx.x) * a.per_seq;   // (t_cap, G) by interleaved row
  float* cbuf = gbuf + a.t_cap * G;                                          // (t_cap, H)
  float* tcbuf = cbuf + a.t_cap * H;
  float* hbuf = tcbuf + a.t_cap * H;
  mark(a, 0);

  // Recurrent weights into registers, through shared memory (the comment above the kernel says how and why).
  constexpr int P = HR + 1;                // odd: a warp's 32 rows start on distinct banks
  float* const wall = fc_s + a.fc_smem;   // (warp, gate, unit - 8 warp) x P
  // One sequence with a small head: the fused buffer's values of the head's gradients, copied here with W_hh, so that
  // head_emit after the backward adds to them without a load (nothing else writes them during the step; the update
  // that zeroed them has ended: this grid starts after the projection's wait).
  float* const old_s = a.accumulate && a.fc_smem ? wall + nt * P : nullptr;
  float wf[HR];
  {
    float* const wst = wall + (tid >> 5) * 32 * P;   // this warp's rows
    const int j0 = (tid >> 5) * 8, n = max(0, min(8, H - j0)) * H;
    const float inv_h = 1.0f / static_cast<float>(H);   // (e + 0.5) / H is >= 1 / (2 H) from an integer: exact floor
#pragma unroll 1
    for (int g = 0; g < 4; ++g) {
      const float* src = a.params + lay_of(a, d).w_hh[g] + static_cast<int64_t>(j0) * H;
#pragma unroll
      for (int u = 0; u < HR / 4; ++u) {   // 32 lanes x HR / 4 = 8 HR >= 8 H floats
        const int e = lane + 32 * u, row = static_cast<int>((static_cast<float>(e) + 0.5f) * inv_h);
        if (e < n) cp_async4(wst + (8 * g + row) * P + (e - row * H), src + e, true);
      }
    }
    if (old_s)
      for (int i = tid; i < a.C * a.hin + a.C + 3; i += nt) cp_async4(old_s + i, a.out + head_entry(a, i), true);
    for (int i = tid; i < 10 * HP; i += nt) h_s[i] = 0.0f;   // h_s and dg_s, padding included
    // The head's parameters too: at the last step the head then waits on no global load (4 in flight per thread).
    const int CH = a.C * a.hin, nfc = a.fc_smem ? CH + a.C : 0;
    for (int i0 = tid; i0 < nfc; i0 += 4 * nt) {
      float v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int i = i0 + u * nt;
        v[u] = i < nfc ? a.params[i < CH ? a.lay.fc_w + i : a.lay.fc_b + (i - CH)] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (i0 + u * nt < nfc) fc_s[i0 + u * nt] = v[u];
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();   // all of W_hh, h_s and fc_s in shared memory
#pragma unroll
    for (int g = 0; g < 4; ++g) {   // slot g: gate q ^ g
      const float* wrow = wst + (8 * (q ^ g) + (lane >> 2)) * P;
#pragma unroll
      for (int s = 0; s < HR / 4; ++s) {
        const int k = LaneSlice<HR>::col(q, s);
        wf[g * (HR / 4) + s] = (valid && k < H) ? wrow[k] : 0.0f;
      }
    }
  }
  // Everything above read only the parameters; gbuf is the projection kernel's output (launched before this one
  // with programmatic dependent launch, so the staging above overlapped it).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  // The weight-gradient kernel may be scheduled now: it waits for this grid's end before it reads anything.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  mark(a, 1);
  float* const g_r = gbuf + r;       // this thread's gate column
  float* const c_j = cbuf + j;       // its unit's columns
  float* const tc_j = tcbuf + j;
  // What lane q saves each forward step, branch-free: h (q = 1), c (q = 2), tanh(c) (q = 3); q = 0 the activations.
  float* const save_j = (q <= 1 ? hbuf : (q == 2 ? cbuf : tcbuf)) + j;

  const Step st{h_s,   dg_s,  dh_s + d * H,   H,    G,    HP,   len,
                j,     q,     quad,   a.pool, valid, g_r, c_j,
                tc_j,  save_j, a.progress + blockIdx.x * kMaxCl, a.epoch, tid == 0 && a.stream, d == 1,
                kExt ? a.dh_ext + static_cast<int64_t>(blockIdx.x) * a.t_cap * H + j : nullptr};
  PoolAcc acc;
  const int cur = a.stage != kStageBackward ? forward_recurrence<HR>(st, wf, acc) : 0;
  if (a.stage == kStageForward) {   // (no other block of a cluster waits for this one; apart: the pooled values)
    if (a.pooled_out && valid && q == 0)
      store_pooled(a, blockIdx.x, j, pooled_of(a, acc, h_s[cur * HP + j], len), acc, len);
    return;
  }
  float wb[HR];   // the backward's weights from the staged W_hh (untouched since the prologue)
  {
    // Row i of gate q (unit i's row) is row 8 q + i % 8 of warp i / 8's rows; the slice's float4 blocks, i = 16 b +
    // 4 k + e, are rows 8 q + 4 (k & 1) + e of warp 2 b + k / 2: one base and constant offsets.
    const int k = j & 3;
    const float* const wcol = wall + ((k >> 1) * 32 + 8 * q + 4 * (k & 1)) * P;
#pragma unroll
    for (int u = 0; u < 4; ++u) {   // slot u: column j ^ u
      const int c = j ^ u;
#pragma unroll
      for (int s = 0; s < HR / 4; ++s) {
        const int i = LaneSlice<HR>::col(k, s);
        const float* const at = s < 4 * LaneSlice<HR>::kF4 ? wcol + (64 * (s / 4) + s % 4) * P + c
                                                            : wall + ((i >> 3) * 32 + 8 * q + (i & 7)) * P + c;
        wb[u * (HR / 4) + s] = (c < H && i < H) ? *at : 0.0f;
      }
    }
  }
  // The head's input: h_{len-1} as it is, or the pooled vector in the other half of h_s (h_{len-2}, which nothing
  // reads any more: every thread passed the last step's barrier).
  // With the head's dropout, the masked vector (h_{len-1} too is then copied there).
  const float* pooled = h_s + cur * HP;
  if (a.stage == kStageBackward) {   // no head: d loss / d pooled h is zero, dh_ext seeds the backward
    for (int i = tid; i < a.dirs * HP; i += nt) dh_s[i] = 0.0f;
    __syncthreads();
    backward_recurrence<HR, kExt>(st, wb, 0);
    return;
  }
  if (a.dirs == 2) {
    const float v = pooled_of(a, acc, h_s[cur * HP + j], len);
    const bool write = valid && q == 0;
    exchange_pooled(pool2, d, H, j, write, write && a.drop.threshold ? v * head_keep(a, slot.pos, d * H + j) : v);
    pooled = pool2;
  } else if (a.pool != 0 || a.drop.threshold) {
    if (valid && q == 0) {
      const float v = pooled_of(a, acc, h_s[cur * HP + j], len);
      h_s[(cur ^ 1) * HP + j] = a.drop.threshold ? v * head_keep(a, slot.pos, j) : v;
    }
    __syncthreads();
    pooled = h_s + (cur ^ 1) * HP;
  }
  mark(a, 2);

  head(a, pooled, lg_s, dh_s, misc, a.fc_smem ? fc_s : nullptr, slot.pos, label);
  mark(a, 3);

  backward_recurrence<HR, kExt>(st, wb, acc.at);
  mark(a, 4);
  // The backward left pool2, h_s, lg_s, misc alone. Bidirectional: block 0 has the whole head input and emits.
  if (d == 0) head_emit(a, pooled, lg_s, misc, b, old_s);
}

}  // namespace

template <int HR, bool kExt>
const void* fused_one_block_kernel() {
  return reinterpret_cast<const void*>(fused_lstm_kernel<HR, kExt>);
}
template const void* fused_one_block_kernel<32, false>();
template const void* fused_one_block_kernel<48, false>();
template const void* fused_one_block_kernel<52, false>();
template const void* fused_one_block_kernel<56, false>();
template const void* fused_one_block_kernel<64, false>();
template const void* fused_one_block_kernel<32, true>();
template const void* fused_one_block_kernel<48, true>();
template const void* fused_one_block_kernel<52, true>();
template const void* fused_one_block_kernel<56, true>();
template const void* fused_one_block_kernel<64, true>();

}  // namespace ragtrain
