// Phases 2-4 of the fused LSTM step (fused_lstm.cu) for 128 < H <= 256 with more than kStreamMaxB sequences: S
// sequences on each 16-block cluster, in lock step. One sequence a cluster (fused_cluster.cu) leaves K > 1 bound by
// the clusters the GPU runs at once (8 of 16 SMs on 132: K = 32 ran in 4 waves of a K = 1 recurrence, 995 us a step
// on the H100); here a lane's registers (W_hh, the lane map of ClusterMap16) serve S sequences per step, so K = 32
// runs in one wave. Everything else is the one-sequence kernel's, per sequence: h and d gates exchanged through
// distributed shared memory (S vectors a step, each counted on the receiving block's mbarrier), the pooling, the head
// (one warp per sequence), the scratch layout read by the weight-gradient GEMM.
// Ragged lengths: the cluster runs to its longest sequence; a sequence takes part in the steps t < len (forward)
// and t <= len - 1 (backward) only, and each mbarrier phase expects the bytes of the sequences that send into it.
// The host sorts a batch by length (longest first) when it runs this kernel, so a cluster's sequences are of
// similar length (less lock-step idle).
#include <cooperative_groups.h>

#include "fused_cluster_device.hpp"
#include "fused_head.hpp"
#include "fused_kernels.hpp"
#include "fused_multi_phases.hpp"

namespace ragtrain {
namespace {

// Arms the barrier's next phase for `bytes`, unless that is none (multi_arm_phase says why).
__device__ __forceinline__ void arm_if(uint32_t bar, uint32_t bytes) {
  if (multi_arm_phase(bytes)) mbar_arm(bar, bytes);
}

template <class M, int S>
struct MultiStep {
  const Args* a;
  float* h_s;         // (2, S, kVec) h_{t-1} of each sequence by h_slot, double-buffered
  float* dg_s;        // (2, S, H_max, 4) d gates of step t + 1, unit-major
  uint32_t bars;      // this block's 4 mbarriers: h into buffer 0, 1; d gates into buffer 0, 1
  uint32_t h_far, dg_far, bars_far;   // the same in block sender(q, p)
  int H, G, j, q, p, ub, T;           // T: the cluster's longest sequence
  uint32_t h_bytes;   // one sequence's h of a step, as each block receives it
  bool valid, lead, sends;
  int len[S];
  float* gbuf[S];     // each sequence's scratch (the one-block kernel's layout)
  // What a block's buffer receives in the phase holding h_u, and step u's d gates (fused_multi_phases.hpp).
  __device__ uint32_t h_expect(int u) const { return multi_h_expect(len, S, h_bytes, u); }
  __device__ uint32_t dg_expect(int u) const { return multi_dg_expect(len, S, H, u); }
};

// The forward recurrence of the cluster's sequences; acc[s] ends holding sequence s's head input (h_{len-1}, the sum
// of h or the max) and the max's step.
template <class M, int S>
__device__ __forceinline__ void multi_forward(const MultiStep<M, S>& st, const float (&wf)[M::kCols],
                                              PoolAcc (&acc)[S]) {
  const int G = st.G, H = st.H, q = st.q, p = st.p, ub = st.ub, j = st.j;
  const bool valid = st.valid;
  const int pool = st.a->pool, t_cap = st.a->t_cap;
  float c[S], pre[S];   // pre: the next step's input projection, loaded a step ahead (a step is ~1 us)
#pragma unroll
  for (int s = 0; s < S; ++s) {
    c[s] = 0.0f;
    pre[s] = (valid && st.len[s] > 0) ? st.gbuf[s][4 * j + q] : 0.0f;
  }
  int cur = 0;
  for (int t = 0; t < st.T; ++t) {
    if (t > 0) {   // h_{t-1} of every sequence that sent it, in buffer cur
      mbar_wait(st.bars + 8 * cur, ((t - 1) >> 1) & 1);
      if (st.lead) arm_if(st.bars + 8 * cur, st.h_expect(t + 1));   // its next phase: h_{t+1}
    }
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int len = st.len[s];
      if (t >= len) continue;   // the same for every thread of the cluster
      float* gb = st.gbuf[s];
      const float xp = pre[s];
      pre[s] = (valid && t + 1 < len) ? gb[(t + 1) * G + 4 * j + q] : 0.0f;
      const float* hs = st.h_s + (cur * S + s) * M::kVec + p * M::kPart;   // zero at t = 0
      // The one-sequence kernel's chains and order of sums, written out as there (cluster_forward says why it is
      // not a shared helper): each sequence gets that kernel's arithmetic.
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
      const float sg = sigmoid_f(q == 2 ? 2.0f * pre_act : pre_act);
      const float act = q == 2 ? 2.0f * sg - 1.0f : sg;   // gate g: tanh
      const float ig = __shfl_sync(kFull, act, ub + p), fg = __shfl_sync(kFull, act, ub + 4 + p);
      const float gg = __shfl_sync(kFull, act, ub + 8 + p), og = __shfl_sync(kFull, act, ub + 12 + p);
      c[s] = (t > 0 ? fg * c[s] : 0.0f) + ig * gg;
      const float tc = tanh_f(c[s]);
      const float h = og * tc;
      const float hv = valid ? h : 0.0f;
      const float h_odd = __shfl_sync(kFull, hv, (ub + 4 * q + p) | 16);   // the warp's second unit (j + CL)
      if (valid && ub == 0 && st.sends && t + 1 < len)
        send2(st.h_far + 4 * (((cur ^ 1) * S + s) * M::kVec + M::h_slot(j)), make_float2(hv, h_odd),
              st.bars_far + 8 * (cur ^ 1));
      if (pool == 0) {
        acc[s].v = h;
      } else if (pool == 1) {
        acc[s].v += h;
      } else if (t == 0 || h > acc[s].v) {   // ties: the first step
        acc[s].v = h;
        acc[s].at = t;
      }
      if (valid && p == 0) {   // the unit's gates (lane q = 0), h, c, tanh(c) (q = 1, 2, 3) for the backward
        if (q == 0) {
          *reinterpret_cast<float4*>(gb + t * G + 4 * j) = make_float4(ig, fg, gg, og);
        } else {
          float* cb = gb + t_cap * G;   // c, then tanh(c), then h: t_cap H each
          float* save = q == 1 ? cb + 2 * t_cap * H : (q == 2 ? cb : cb + t_cap * H);
          save[t * H + j] = q == 1 ? h : (q == 2 ? c[s] : tc);
        }
      }
    }
    cur ^= 1;
  }
}

// The backward recurrence of the cluster's sequences, seeded by d loss / d pooled h (seed[s] at step seed_at[s], or
// at every step for the mean); d gates replace the activations in each sequence's scratch.
template <class M, int S>
__device__ __forceinline__ void multi_backward(const MultiStep<M, S>& st, const float (&wb)[M::kCols],
                                               const float (&seed)[S], const int (&seed_at)[S]) {
  const int G = st.G, H = st.H, q = st.q, p = st.p, ub = st.ub, j = st.j;
  const bool valid = st.valid, every = st.a->pool == 1;
  const int t_cap = st.a->t_cap;
  float dc[S], pa[S], pc[S], pt[S];   // pa, pc, pt: the step's activation, c_{t-1}, tanh(c_t), a step ahead
  auto fetch = [&](int s, int t, float& act, float& cp, float& tcv) {
    const float* gb = st.gbuf[s];
    const bool in = valid && t >= 0 && t < st.len[s];
    act = in ? gb[t * G + 4 * j + q] : 0.0f;
    cp = (in && t >= 1) ? gb[t_cap * G + (t - 1) * H + j] : 0.0f;
    tcv = in ? gb[t_cap * G + t_cap * H + t * H + j] : 0.0f;
  };
#pragma unroll
  for (int s = 0; s < S; ++s) {
    dc[s] = 0.0f;
    fetch(s, st.len[s] - 1, pa[s], pc[s], pt[s]);   // its first step (each later one fetched by the one before)
  }
  int cb = 0;
  for (int t = st.T - 1; t >= 0; --t) {
    const int k = st.T - 1 - t;   // the backward's step count
    if (k > 0) {                  // the d gates of step t + 1, in buffer cb
      mbar_wait(st.bars + 8 * (2 + cb), ((k - 1) >> 1) & 1);
      if (st.lead) arm_if(st.bars + 8 * (2 + cb), st.dg_expect(t - 1));   // its next phase: step t - 1's
    }
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int len = st.len[s];
      if (t >= len) continue;   // not started yet (the same for every thread of the cluster)
      const float act = pa[s], cprev = pc[s], tc = pt[s];
      fetch(s, t - 1, pa[s], pc[s], pt[s]);
      const float ig = __shfl_sync(kFull, act, ub + p), fg = __shfl_sync(kFull, act, ub + 4 + p);
      const float gg = __shfl_sync(kFull, act, ub + 8 + p), og = __shfl_sync(kFull, act, ub + 12 + p);
      float P = 0.0f;
      if (t + 1 < len) {   // the d gates of units i = 4 q + p + 16 k at step t + 1 (none at the sequence's last)
        const float* d = st.dg_s + (cb * S + s) * 4 * M::kHmax + 4 * (4 * q + p);
        float b0 = 0.0f, b1 = 0.0f, b2 = 0.0f, b3 = 0.0f;
#pragma unroll
        for (int kk = 0; kk < M::kCols / 4; ++kk) {
          const float4 m = *reinterpret_cast<const float4*>(d + 64 * kk);
          b0 += wb[4 * kk] * m.x;
          b1 += wb[4 * kk + 1] * m.y;
          b2 += wb[4 * kk + 2] * m.z;
          b3 += wb[4 * kk + 3] * m.w;
        }
        P = (b0 + b1) + (b2 + b3);
#pragma unroll
        for (int o = 1; o < 16; o <<= 1) P += __shfl_xor_sync(kFull, P, o);   // the unit's 16 lanes
      }
      const float dh = P + ((every || t == seed_at[s]) ? seed[s] : 0.0f);
      const float dct = dc[s] + dh * og * (1.0f - tc * tc);
      const float d0 = dct * gg * ig * (1.0f - ig);
      const float d1 = t > 0 ? dct * cprev * fg * (1.0f - fg) : 0.0f;
      const float d2 = dct * ig * (1.0f - gg * gg);
      const float d3 = dh * tc * og * (1.0f - og);
      dc[s] = dct * fg;
      const float4 dg = make_float4(d0, d1, d2, d3);
      if (valid && st.sends && t > 0)
        send4(st.dg_far + 4 * (((cb ^ 1) * S + s) * 4 * M::kHmax + 4 * j), dg, st.bars_far + 8 * (2 + (cb ^ 1)));
      if (valid && q == 1 && p == 0) *reinterpret_cast<float4*>(st.gbuf[s] + t * G + 4 * j) = dg;
    }
    cb ^= 1;
  }
}

// Blocks CL g .. CL g + CL - 1 run the batch's sequences S g .. S g + S - 1 (those below B).
template <class M, int S>
__global__ void __launch_bounds__(M::kThreads, 1) fused_lstm_cluster_multi_kernel(const __grid_constant__ Params p) {
  constexpr int kCl = M::kCl, kThreads = M::kThreads, kHmax = M::kHmax;
  namespace cg = cooperative_groups;
  const Args& a = p.a;
  extern __shared__ float4 smem4[];
  float* const base = reinterpret_cast<float*>(smem4);   // the mbarriers (4 x 8 bytes), then:
  float* h_s = base + kClBars;               // (2, S, kVec)
  float* dg_s = h_s + 2 * S * M::kVec;       // (2, S, H_max, 4)
  float* pool_s = dg_s + 8 * S * kHmax;      // (S, H_max) each sequence's head input by unit
  float* dh_s = pool_s + S * kHmax;          // (S, H_max) d loss / d pooled h
  float* misc = dh_s + S * kHmax;            // (S, 4)
  float* lg_s = misc + 4 * S;                // (S, Cp) logits, then d loss / d logits
  float* fc_s = lg_s + S * a.Cp;             // (fc_smem) the head's weight, then its bias
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank()), group = static_cast<int>(blockIdx.x) / kCl;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31;
  const int q = (tid >> 2) & 3, pp = tid & 3;
  const int H = a.H, G = 4 * H, j = M::unit(rank, tid);
  const int to = M::sender(q, pp);
  const bool sends = to < kCl;
  const int far = sends ? to : 0;
  mark(a, 0);

  MultiStep<M, S> st;
  st.T = 0;
#pragma unroll
  for (int s = 0; s < S; ++s) {
    const int b = group * S + s;
    st.len[s] = b < a.B ? slot_of(p, b).length : 0;
    st.gbuf[s] = a.scratch + static_cast<int64_t>(b < a.B ? b : 0) * a.per_seq;
    st.T = max(st.T, st.len[s]);
  }
  for (int i = tid; i < kClusterMultiSmemFixed<M, S> - kClBars; i += kThreads) h_s[i] = 0.0f;
  float wf[M::kCols], wb[M::kCols];
  load_packed<M>(a, rank, tid, wf, wb);
  const uint32_t bars = smem_addr(base);
  uint32_t h_bytes = 0;   // 8 for each warp of the cluster whose first unit, kCl (2 w) + r, is below H
  for (int r = 0; r < kCl; ++r)
    for (int w = 0; w < M::kUnits / 2; ++w) h_bytes += kCl * 2 * w + r < H ? 8 : 0;
  st.a = &a;
  st.h_s = h_s;
  st.dg_s = dg_s;
  st.bars = bars;
  st.h_far = remote_addr(smem_addr(h_s), far);
  st.dg_far = remote_addr(smem_addr(dg_s), far);
  st.bars_far = remote_addr(bars, far);
  st.H = H;
  st.G = G;
  st.j = j;
  st.q = q;
  st.p = pp;
  st.ub = lane & 16;
  st.h_bytes = h_bytes;
  st.valid = j < H;
  st.lead = tid == 0;
  st.sends = sends;
  if (tid == 0) {
    for (int b = 0; b < 4; ++b) mbar_init(bars + 8 * b);
    // Each one's first phase: h_1 into buffer 0, h_0 into 1; the backward's first sends (step T - 1) into d-gate
    // buffer 1, its second's into 0.
    arm_if(bars, st.h_expect(1));
    arm_if(bars + 8, st.h_expect(0));
    arm_if(bars + 16, st.dg_expect(st.T - 2));
    arm_if(bars + 24, st.dg_expect(st.T - 1));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  const int nfc = a.fc_smem ? a.C * H + a.C : 0;
  for (int i = tid; i < nfc; i += kThreads)
    fc_s[i] = a.params[i < a.C * H ? a.lay.fc_w + i : a.lay.fc_b + (i - a.C * H)];
  cluster.sync();   // every block running, zeroed and its mbarriers set before any block sends into another
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");   // the scratch holds the projection kernel's output
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  mark(a, 1);
  const bool active = kCl * 2 * (tid >> 5) + rank < H;   // a warp whose units are all past H sits out
  PoolAcc acc[S];
  if (active) multi_forward<M, S>(st, wf, acc);
  // Every block gets each sequence's whole head input (through the head's dropout).
#pragma unroll
  for (int s = 0; s < S; ++s) {
    if (st.len[s] == 0 || !st.valid || !sends) continue;
    const int pos = slot_of(p, group * S + s).pos;
    const float pooled = a.pool == 1 ? acc[s].v / static_cast<float>(st.len[s]) : acc[s].v;
    cluster.map_shared_rank(pool_s, to)[s * kHmax + j] = a.drop.threshold ? pooled * head_keep(a, pos, j) : pooled;
  }
  cluster.sync();
  mark(a, 2);

  // Each block runs every sequence's head, warp s sequence s (each block needs d loss / d pooled h of its units).
  const int warp = tid >> 5;
#pragma unroll
  for (int s = 0; s < S; ++s) {
    if (warp != s || st.len[s] == 0) continue;
    const GatherSlot slot = slot_of(p, group * S + s);
    const int label = a.classification ? a.labels[slot.pos] : 0;
    head_warp(a, pool_s + s * kHmax, lg_s + s * a.Cp, dh_s + s * kHmax, misc + 4 * s, a.fc_smem ? fc_s : nullptr,
              slot.pos, label);
  }
  __syncthreads();
  mark(a, 3);

  float seed[S];
  int seed_at[S];
#pragma unroll
  for (int s = 0; s < S; ++s) {
    const float d = st.valid ? dh_s[s * kHmax + j] : 0.0f;
    seed[s] = a.pool == 1 ? d / static_cast<float>(max(st.len[s], 1)) : d;
    seed_at[s] = a.pool == 0 ? st.len[s] - 1 : acc[s].at;
  }
  if (active) multi_backward<M, S>(st, wb, seed, seed_at);
  mark(a, 4);
  // Block s emits sequence s's head gradients (its partials' row).
#pragma unroll
  for (int s = 0; s < S; ++s)
    if (rank == s && st.len[s] > 0)
      head_emit(a, pool_s + s * kHmax, lg_s + s * a.Cp, misc + 4 * s, group * S + s, nullptr);
  cluster.sync();   // no block leaves while another may still read or wait on anything of it
}

}  // namespace

template <class M, int S>
const void* fused_cluster_multi_kernel() {
  return reinterpret_cast<const void*>(fused_lstm_cluster_multi_kernel<M, S>);
}
template const void* fused_cluster_multi_kernel<ClusterMap16, kSeqPerCluster>();
template const void* fused_cluster_multi_kernel<ClusterMap16, kSeqPerClusterMax>();

}  // namespace ragtrain
