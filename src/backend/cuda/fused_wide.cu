// Phases 2 and 4 of the fused LSTM step (fused_lstm.cu) at 256 < H <= 512: the slots, sorted by length, run in groups
// in lock step as in fused_group.cu, but a group (and direction) spans a cohort of 64 blocks (WideMap::kBlocks), one
// an SM anywhere on the GPU, and the blocks exchange h and the partial sums of d h through global memory (L2).
//
// Why not a cluster: in the tensor cores' split (a tf32 part and a bf16 pair, fused_mixed_mma.hpp) W_hh takes 8 MB at
// H = 512, twice the registers of the 16 SMs a cluster can span; held as 64 blocks x 32 gate rows it takes the
// registers the 16-block groups take at H = 256. The price is the exchange: a step's h (or partial sums) goes out as
// global stores, a flag a block says which steps it completed, and every block waits for all 64 flags before it reads
// (at H = 512, K = 32 on the H100 under Nsight Compute's locked clocks: ~3.6 us a forward and ~4.0 us a backward
// timestep, mostly that wait).
//   forward:  each block computes its 32 gate rows for the group from the whole h_{t-1} (read into shared memory),
//             a thread per (unit, sequence) does the cell update and stores h for every block to read;
//   backward: each block multiplies W_hh^T, restricted to its own 32 gate rows, by its own d gates (partial sums of
//             d h_{t-1} for every unit) and stores them; each block then adds its units' 64 parts in block order.
// A cohort runs its groups in rounds (groups x directions c, c + cohorts, ...), so the grid never exceeds the blocks
// the GPU holds at once (FusedLstm sizes it): every block of a group is resident, and the flags cannot wait on a block
// that is not. Each flag counts the steps its block completed in this kernel, over the rounds, so a step's wait also
// tells that every block is done with the buffer (of two) the step overwrites. Fixed orders throughout: reruns are
// bitwise equal. Ragged groups as in fused_group.cu: member s runs its own steps, one past its end computes on zeros
// and stores nothing.
#include "fused_device.hpp"
#include "fused_head.hpp"
#include "fused_kernels.hpp"
#include "fused_mixed_mma.hpp"

namespace ragtrain {
namespace {

using WM = WideMap;

// A flag's word: this kernel's key (the layer's epoch and the stage) over the steps its block completed.
__device__ __forceinline__ unsigned long long wide_key(const Args& a, int stage) {
  return ((static_cast<unsigned long long>(a.epoch) << 1) | static_cast<unsigned long long>(stage)) << 31;
}
__device__ __forceinline__ void wide_publish(unsigned long long* flag, unsigned long long key, int steps) {
  __threadfence();   // the block's stores, ordered before the flag by the barrier before this, at GPU scope
  const unsigned long long v = key | static_cast<unsigned long long>(steps);
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(flag), "l"(v) : "memory");
}
// Waits until every block of the cohort completed `steps` steps (warp 0 polls the flags; a barrier of the block after
// it). (Every warp polling, with no barrier after, together with the backward's partial sums gathered into shared
// memory in one round trip, made a step at H = 512 K = 32 5% slower on the H100: 1,723 against 1,642 us.)
__device__ __forceinline__ void wide_wait(const unsigned long long* flags, unsigned long long key, int steps) {
  if (threadIdx.x < 32) {
    const unsigned long long need = key | static_cast<unsigned long long>(steps);
    bool ok = false;
    while (!__all_sync(kFull, ok)) {
      ok = true;
#pragma unroll
      for (int r = 0; r < WM::kBlocks / 32; ++r) {
        unsigned long long v;
        asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(flags + threadIdx.x + 32 * r) : "memory");
        ok = ok && (v >> 31) == (key >> 31) && v >= need;
      }
    }
  }
  __syncthreads();
}

// Round `ui` of a cohort: direction d's slots first .. first + nb - 1 (sorted: the first is the longest).
struct WideGroup {
  int d, first, nb, maxlen;
};
__device__ __forceinline__ WideGroup wide_group(const Params& p, int ui) {
  const Args& a = p.a;
  WideGroup g;
  g.d = ui % a.dirs;
  g.first = (ui / a.dirs) * a.group_n;
  g.nb = min(a.group_n, a.B - g.first);
  g.maxlen = slot_of(p, g.first).length;
  return g;
}

// The (unit, member) pair a thread updates: member s = tid mod kNP, unit u = tid / kNP of the block (so that a warp's
// loads of the partial sums, unit-major by sequence, are contiguous).
struct WideSeq {
  int s, u, j, len;     // len 0: no member
  bool elem, unit_ok;   // elem: the thread has a pair; unit_ok: a member and unit j below H
  int64_t seq;          // the member's sequence index (slot dirs + d)
  float* gbuf;          // its scratch: gates (4H a step), then c, tanh(c), h (H each)
};
template <int NT>
__device__ __forceinline__ WideSeq wide_seq(const Params& p, const WideGroup& g, int rank) {
  constexpr int kNP = 8 * NT;
  const Args& a = p.a;
  const int tid = static_cast<int>(threadIdx.x);
  WideSeq q;
  q.s = tid % kNP;
  q.u = tid / kNP;
  q.j = WM::kUnits * rank + q.u;
  q.elem = tid < WM::kUnits * kNP;
  const bool member = q.elem && q.s < g.nb;
  q.len = member ? slot_of(p, g.first + q.s).length : 0;
  q.unit_ok = member && q.j < a.H;
  q.seq = static_cast<int64_t>(g.first + (member ? q.s : 0)) * a.dirs + g.d;
  q.gbuf = a.scratch + q.seq * a.per_seq;
  return q;
}

__device__ __forceinline__ void wide_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The forward stage: gates, c, tanh(c) and h of every member into its scratch, the pooled values into
// Args::pooled_out (the top layer).
template <int NT>
__global__ void __launch_bounds__(WM::kThreads, 1) wide_forward_kernel(const __grid_constant__ Params p) {
  using S = WideSmem<NT>;
  constexpr int kNP = S::kNP, kTiles = WM::kFwdTiles;
  const Args& a = p.a;
  extern __shared__ float4 wide_smem4[];
  float* const h_s = reinterpret_cast<float*>(wide_smem4);   // (kNP, kHp) h_{t-1} of the group
  float* const red = h_s + kNP * S::kHp;                     // (4, kNP, kRp) each column quarter's W_hh h
  const int rank = static_cast<int>(blockIdx.x) % WM::kBlocks, cohort = static_cast<int>(blockIdx.x) / WM::kBlocks;
  const int cohorts = static_cast<int>(gridDim.x) / WM::kBlocks;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31, H = a.H, G = 4 * H;
  float* const hx = a.wide_h + static_cast<int64_t>(cohort) * 2 * kGroupMaxN * WM::kHmax;   // (2, kGroupMaxN, 512)
  unsigned long long* const flags = a.wide_flags + cohort * WM::kBlocks;
  const unsigned long long key = wide_key(a, 0);
  const int units = (a.B + a.group_n - 1) / a.group_n * a.dirs;
  const int mt = warp & 1, kq = warp >> 1;
  uint32_t ah[kTiles][4], ax[kTiles][4];
  auto load_weights = [&](int d) {   // the block's gate rows of direction d as tf32 pairs
    const FusedLayout& lay = lay_of(a, d);
#pragma unroll
    for (int kt = 0; kt < kTiles; ++kt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = WM::fwd_row(warp, lane, i);
        weight_parts(w_hh(a, lay, WM::kUnits * rank + r / 4, r % 4, WM::fwd_col(warp, lane, kt, i)), ah[kt][i],
                     ax[kt][i]);
      }
  };
  int loaded = cohort % a.dirs;
  load_weights(loaded);   // before the wait: the parameters change only between steps
  wide_start();
  const int64_t tcap = a.t_cap;
  int step = 0;   // steps the cohort completed in this kernel
  for (int ui = cohort; ui < units; ui += cohorts) {
    const WideGroup g = wide_group(p, ui);
    if (g.d != loaded) load_weights(loaded = g.d);
    const WideSeq q = wide_seq<NT>(p, g, rank);
    const int u = q.u, j = q.j;
    float c = 0.0f, h_last = 0.0f;
    PoolAcc acc;
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);   // step t's gate inputs (the projection), loaded a step ahead
    if (q.unit_ok) x = __ldcg(reinterpret_cast<const float4*>(q.gbuf + 4 * j));
    for (int t = 0; t < g.maxlen; ++t, ++step) {
      if (step > 0) wide_wait(flags, key, step);   // h_{t-1} stored; buffer step mod 2 read by every block
      if (t > 0) {   // W_hh h_{t-1} for the group: rows 16 mt .., the columns of quarter kq
        const float* const src = hx + ((step - 1) & 1) * kGroupMaxN * WM::kHmax;
        for (int e = tid; e < kNP * WM::kHmax / 4; e += WM::kThreads) {
          const int n = e / (WM::kHmax / 4), k4 = e % (WM::kHmax / 4);
          cp_async16(h_s + n * S::kHp + 4 * k4, src + n * WM::kHmax + 4 * k4, true);
        }
        asm volatile("cp.async.wait_all;" ::: "memory");
        __syncthreads();
        const float* hb = h_s + (lane >> 2) * S::kHp + (WM::kHmax / 4) * kq + (lane & 3);
        float ac[4][NT][4] = {};   // accumulator kt mod 4
#pragma unroll
        for (int kt0 = 0; kt0 < kTiles; kt0 += 4)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const float* const b0 = hb + nt * 8 * S::kHp + 8 * kt0;
            float(*d[4])[4] = {&ac[0][nt], &ac[1][nt], &ac[2][nt], &ac[3][nt]};
            const float* const b[4] = {b0, b0 + 8, b0 + 16, b0 + 24};
            mma2x4(d, ah, ax, kt0, b);
          }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          float* const o = red + kq * kNP * S::kRp + (nt * 8 + 2 * (lane & 3)) * S::kRp + 16 * mt + (lane >> 2);
#pragma unroll
          for (int e = 0; e < 4; ++e)
            o[(e & 1) * S::kRp + (e >> 1) * 8] = (ac[0][nt][e] + ac[1][nt][e]) + (ac[2][nt][e] + ac[3][nt][e]);
        }
        __syncthreads();
      }
      if (q.elem) {
        const bool live = q.unit_ok && t < q.len;
        float4 z = x;
        if (t > 0) {
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const float4 r = *reinterpret_cast<const float4*>(red + (k * kNP + q.s) * S::kRp + 4 * u);
            z.x += r.x;
            z.y += r.y;
            z.z += r.z;
            z.w += r.w;
          }
        }
        const float ig = sigmoid_f(z.x), fg = sigmoid_f(z.y), gg = tanh_f(z.z), og = sigmoid_f(z.w);
        c = (t > 0 ? fg * c : 0.0f) + ig * gg;
        const float tc = tanh_f(c), h = og * tc;
        hx[((step & 1) * kGroupMaxN + q.s) * WM::kHmax + j] = live ? h : 0.0f;
        if (live) {
          float* const row = q.gbuf + t * G;
          *reinterpret_cast<float4*>(row + 4 * j) = make_float4(ig, fg, gg, og);
          float* const cj = q.gbuf + tcap * G + t * H + j;   // c, then tanh(c), then h: t_cap H apart
          cj[0] = c;
          cj[tcap * H] = tc;
          cj[2 * tcap * H] = h;
          if (a.pool == 1) {
            acc.v += h;
          } else if (a.pool == 2 && (t == 0 || h > acc.v || (g.d == 1 && h == acc.v))) {   // ties: the first step
            acc.v = h;                                                                      // (reverse: the last)
            acc.at = t;
          }
          h_last = h;
          if (t + 1 < q.len) x = __ldcg(reinterpret_cast<const float4*>(row + G + 4 * j));
        }
      }
      __syncthreads();
      if (tid == 0) wide_publish(flags + rank, key, step + 1);
    }
    if (a.pooled_out && q.unit_ok) store_pooled(a, q.seq, j, pooled_of(a, acc, h_last, q.len), acc, q.len);
  }
}

// The backward stage, seeded by Args::dh_ext alone: d gates replace the activations in each member's scratch.
template <int NT>
__global__ void __launch_bounds__(WM::kThreads, 1) wide_backward_kernel(const __grid_constant__ Params p) {
  using S = WideSmem<NT>;
  constexpr int kNP = S::kNP, kTiles = WM::kBwdTiles, kM = WM::kBwdM;
  const Args& a = p.a;
  extern __shared__ float4 wide_smem4[];
  float* const dgl = reinterpret_cast<float*>(wide_smem4);   // (kNP, kRp) the block's d gates by sequence
  const int rank = static_cast<int>(blockIdx.x) % WM::kBlocks, cohort = static_cast<int>(blockIdx.x) / WM::kBlocks;
  const int cohorts = static_cast<int>(gridDim.x) / WM::kBlocks;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31, H = a.H, G = 4 * H;
  // (2, kBlocks source blocks, kHmax units, kNP sequences) the partial sums of d h
  constexpr int64_t kPartBuf = static_cast<int64_t>(WM::kBlocks) * WM::kHmax * kNP;
  float* const part = a.wide_part + static_cast<int64_t>(cohort) * 2 * WM::kBlocks * WM::kHmax * kGroupMaxN;
  unsigned long long* const flags = a.wide_flags + cohort * WM::kBlocks;
  const unsigned long long key = wide_key(a, 1);
  const int units = (a.B + a.group_n - 1) / a.group_n * a.dirs;
  uint32_t ah[kM][kTiles][4], ax[kM][kTiles][4];
  auto load_weights = [&](int d) {   // W_hh^T over the block's gate rows, for the warp's units, as tf32 pairs
    const FusedLayout& lay = lay_of(a, d);
#pragma unroll
    for (int mm = 0; mm < kM; ++mm)
#pragma unroll
      for (int kt = 0; kt < kTiles; ++kt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = WM::bwd_row(lane, kt, i);
          weight_parts(w_hh(a, lay, WM::kUnits * rank + r / 4, r % 4, WM::bwd_col(warp, lane, mm, i)),
                       ah[mm][kt][i], ax[mm][kt][i]);
        }
  };
  int loaded = cohort % a.dirs;
  load_weights(loaded);
  wide_start();
  const int64_t tcap = a.t_cap;
  int step = 0;
  for (int ui = cohort; ui < units; ui += cohorts) {
    const WideGroup g = wide_group(p, ui);
    if (g.d != loaded) load_weights(loaded = g.d);
    const WideSeq q = wide_seq<NT>(p, g, rank);
    const int u = q.u, j = q.j;
    // d c, and step t's activations, c_{t-1}, tanh(c_t) and d loss / d h_t from outside, loaded a step ahead.
    float dc = 0.0f, cp = 0.0f, tcv = 0.0f, ev = 0.0f;
    float4 act = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    auto fetch = [&](int t) {
      if (!q.unit_ok || t < 0) return;
      act = __ldcg(reinterpret_cast<const float4*>(q.gbuf + t * G + 4 * j));
      const float* const cj = q.gbuf + tcap * G + t * H + j;
      cp = t >= 1 ? __ldcg(cj - H) : 0.0f;
      tcv = __ldcg(cj + tcap * H);
      ev = __ldcg(a.dh_ext + q.seq * tcap * H + t * H + j);
    };
    fetch(q.len - 1);
    for (int i = 0; i < g.maxlen; ++i, ++step) {
      if (step > 0) wide_wait(flags, key, step);   // step - 1's parts stored; buffer step mod 2 read by every block
      if (q.elem) {
        const int t = q.len - 1 - i;
        const bool live = q.unit_ok && t >= 0;
        float P = 0.0f;   // W_hh^T d gates of step t + 1, summed over the blocks' rows in block order
        if (i > 0) {      // (through shared memory in one round trip instead: slower, see wide_wait)
          const float* pp = part + ((step - 1) & 1) * kPartBuf + j * kNP + q.s;
#pragma unroll 8
          for (int src = 0; src < WM::kBlocks; ++src) P += __ldcg(pp + src * WM::kHmax * kNP);
        }
        const float dh = P + ev;
        const float ig = act.x, fg = act.y, gg = act.z, og = act.w, tc = tcv;
        const float dct = dc + dh * og * (1.0f - tc * tc);
        const float d0 = dct * gg * ig * (1.0f - ig);
        const float d1 = t > 0 ? dct * cp * fg * (1.0f - fg) : 0.0f;
        const float d2 = dct * ig * (1.0f - gg * gg);
        const float d3 = dh * tc * og * (1.0f - og);
        dc = dct * fg;
        const float4 dg = live ? make_float4(d0, d1, d2, d3) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        *reinterpret_cast<float4*>(dgl + q.s * S::kRp + 4 * u) = dg;
        if (live) *reinterpret_cast<float4*>(q.gbuf + t * G + 4 * j) = dg;
        fetch(t - 1);
      }
      __syncthreads();
      if (i + 1 < g.maxlen) {   // W_hh^T (the warp's units; the block's gate rows) times the block's d gates
        const float* const db = dgl + (lane >> 2) * S::kRp + (lane & 3);
        float* const out = part + (step & 1) * kPartBuf + static_cast<int64_t>(rank) * WM::kHmax * kNP;
#pragma unroll
        for (int mm = 0; mm < kM; ++mm) {
          float ac[4][NT][4] = {};   // accumulator kt
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const float* const b0 = db + nt * 8 * S::kRp;
            float(*d[4])[4] = {&ac[0][nt], &ac[1][nt], &ac[2][nt], &ac[3][nt]};
            const float* const b[4] = {b0, b0 + 8, b0 + 16, b0 + 24};
            mma2x4(d, ah[mm], ax[mm], 0, b);
          }
          // lane (g, t): units g, g + 8 of the tile, sequences 2 t, 2 t + 1 of each n tile
          const int unit = 16 * (kM * warp + mm) + (lane >> 2);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            float v[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) v[e] = (ac[0][nt][e] + ac[1][nt][e]) + (ac[2][nt][e] + ac[3][nt][e]);
            float* const o = out + unit * kNP + 8 * nt + 2 * (lane & 3);
            __stcg(reinterpret_cast<float2*>(o), make_float2(v[0], v[1]));
            __stcg(reinterpret_cast<float2*>(o + 8 * kNP), make_float2(v[2], v[3]));
          }
        }
        __syncthreads();
      }
      if (tid == 0) wide_publish(flags + rank, key, step + 1);
    }
  }
}

}  // namespace

template <int NT>
const void* fused_wide_forward_kernel() {
  return reinterpret_cast<const void*>(wide_forward_kernel<NT>);
}
template <int NT>
const void* fused_wide_backward_kernel() {
  return reinterpret_cast<const void*>(wide_backward_kernel<NT>);
}
template const void* fused_wide_forward_kernel<1>();
template const void* fused_wide_forward_kernel<2>();
template const void* fused_wide_forward_kernel<3>();
template const void* fused_wide_backward_kernel<1>();
template const void* fused_wide_backward_kernel<2>();
template const void* fused_wide_backward_kernel<3>();

}  // namespace ragtrain
