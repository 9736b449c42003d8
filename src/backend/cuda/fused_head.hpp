// The fused recurrence kernels' head (fused_recurrence.cu, fused_cluster.cu, fused_pool_head.cu): the pooling over the
// steps, the Linear head and loss with d loss / d pooled h, and the head's gradients after the backward. Included by
// those files only.
#pragma once

#include <cmath>
#include <cstdint>

#include "fused_device.hpp"
#include "ragtrain/model/dropout_mask.hpp"

namespace ragtrain {
namespace {

// What the pooling keeps of unit j over the forward recurrence (every lane of the quad holds the same bits, as h):
// the sum of h in step order (mean), or the max and the first step holding it (max), as the CPU reference.
struct PoolAcc {
  float v = 0.0f;
  int at = 0;
};

// Unit j's input to the head after the forward: h_{len-1} (h_last), or the mean or the max of h over the steps.
__device__ __forceinline__ float pooled_of(const Args& a, const PoolAcc& acc, float h_last, int len) {
  return a.pool == 0 ? h_last : (a.pool == 1 ? acc.v / static_cast<float>(len) : acc.v);
}

// The top layer's forward stage when the directions run apart (Args::pooled_out): unit j's pooled value v of
// sequence seq (slot b dirs + direction d) and the step pooling took.
__device__ __forceinline__ void store_pooled(const Args& a, int64_t seq, int j, float v, const PoolAcc& acc, int len) {
  a.pooled_out[seq * a.H + j] = v;
  a.pooled_at[seq * a.H + j] = a.pool == 0 ? len - 1 : acc.at;
}

// The head dropout's factor of head input k of the sequence at shard position pos: 0 or 1/(1-p) (1 without). The
// pooled vector is multiplied by it where each unit's value is written (in parallel, before the head reads it), d
// loss / d pooled h where head() writes it, as the CPU reference does.
__device__ __forceinline__ float head_keep(const Args& a, int pos, int k) {
  if (a.drop.threshold == 0) return 1.0f;
  const DropoutKey key{a.drop.seed, a.drop.step, a.drop.indices[pos]};
  return dropout_keep(key, kHeadDropoutLayer, 0, k, a.drop.threshold) ? a.drop.scale : 0.0f;
}

// out[idx(u)] = val[u] (partials) or += (the fused buffer) for the U entries with ok(u); the old values are loaded
// together first (one memory latency for all U, not U of them).
template <int U, class Idx, class Ok>
__device__ __forceinline__ void emit_batch(const Args& a, int seq, const float (&val)[U], Idx idx, Ok ok) {
  float* out = a.out + static_cast<int64_t>(seq) * a.stride;
  float old[U];
#pragma unroll
  for (int u = 0; u < U; ++u) old[u] = (a.accumulate && ok(u)) ? out[idx(u)] : 0.0f;
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (ok(u)) out[idx(u)] = a.accumulate ? old[u] + val[u] : val[u];
}

// The fused-buffer (or partials) entry of the head's value i: fc.weight (i < C H), fc.bias, then loss, count, correct.
__device__ __forceinline__ int64_t head_entry(const Args& a, int i) {
  const int CH = a.C * a.hin;
  return i < CH ? a.lay.fc_w + i : (i < CH + a.C ? a.lay.fc_b + (i - CH) : a.lay.extras + (i - CH - a.C));
}

// Phase 3: logits, loss, d loss / d logits (in lg_s), d loss / d h_last (dh_s; through the head's dropout: hl is the
// pooled vector already masked); the head's gradients are written
// by head_emit after the backward recurrence (their read-modify-write of global memory waited one memory latency
// on the way into the backward).
// All of it in warp 0, one block barrier at the end: lane c takes the classes c, c + 32, ... (its logits' dot
// products over h in a fixed order, four partial sums), the loss and d loss / d logits combine the lanes in a fixed
// butterfly, and lane k takes d h_k, k + 32, ... (a sum over the classes in order). (Spread over the block — a warp
// per class with a butterfly each, the softmax in warp 0, d h over the threads, three barriers — it took ~4.6 K
// cycles at H = 50, C = 10 on the H200; this form 4.2-4.5 K, so the barriers were not the cost. At H = 128 a lane's
// 32-long chains make it slower than the spread form: 8.0 K cycles against 3.6 K.)
// fc_s: the head's weight and bias staged in shared memory before the recurrence, or null (read from global memory).
// label: the sequence's class (classification), loaded ahead (at the kernel's start, or after the forward in the
// cluster variant), not on this phase's path.
__device__ void head(const Args& a, const float* hl, float* lg_s, float* dh_s, float* misc, const float* fc_s,
                     int pos, int label) {
  const int tid = static_cast<int>(threadIdx.x);
  const int H = a.hin, C = a.C, lane = tid % 32;   // H: the head's input width
  if (tid < 32) {
    const float* fcw = fc_s ? fc_s : a.params + a.lay.fc_w;
    const float* fcb = fc_s ? fc_s + C * H : a.params + a.lay.fc_b;
    const float* t = a.classification ? nullptr : a.targets + static_cast<int64_t>(pos) * C;
    const float t_lane = (t && lane < C) ? t[lane] : 0.0f;   // in flight during the dot products
    for (int c = lane; c < C; c += 32) {
      const float* w = fcw + static_cast<int64_t>(c) * H;
      float s4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      int k = 0;
#pragma unroll 2
      for (; k + 4 <= H; k += 4)
#pragma unroll
        for (int e = 0; e < 4; ++e) s4[e] += w[k + e] * hl[k + e];
      if (k < H) s4[0] += w[k] * hl[k];   // H mod 4 left (no array index at run time: registers)
      if (k + 1 < H) s4[1] += w[k + 1] * hl[k + 1];
      if (k + 2 < H) s4[2] += w[k + 2] * hl[k + 2];
      lg_s[c] = ((s4[0] + s4[1]) + (s4[2] + s4[3])) + fcb[c];
    }
    __syncwarp();
    float loss = 0.0f, hit = 0.0f;
    if (a.classification) {
      label = label < 0 ? 0 : (label >= C ? C - 1 : label);   // validated on the host; never index out of bounds
      float m = -INFINITY;
      int best = C;   // argmax, ties to the lowest index as in the reference (C: none above -inf yet)
      for (int c = lane; c < C; c += 32)
        if (lg_s[c] > m) m = lg_s[c], best = c;
      for (int o = 16; o > 0; o >>= 1) {
        const float mo = __shfl_xor_sync(kFull, m, o);
        const int bo = __shfl_xor_sync(kFull, best, o);
        if (mo > m || (mo == m && bo < best)) m = mo, best = bo;
      }
      best = best == C ? 0 : best;
      float sum = 0.0f;
      for (int c = lane; c < C; c += 32) sum += expf(lg_s[c] - m);
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(kFull, sum, o);
      loss = m + logf(sum) - lg_s[label];
      hit = best == label ? 1.0f : 0.0f;
      __syncwarp();   // every lane has read lg_s[label]
      for (int c = lane; c < C; c += 32) lg_s[c] = expf(lg_s[c] - m) / sum - (c == label ? 1.0f : 0.0f);
    } else {
      const float inv_k = 1.0f / static_cast<float>(C);
      float sq = 0.0f;
      for (int c = lane; c < C; c += 32) {
        const float diff = lg_s[c] - (c < 32 ? t_lane : t[c]);
        sq += diff * diff;
        lg_s[c] = 2.0f * diff * inv_k;
      }
      for (int o = 16; o > 0; o >>= 1) sq += __shfl_xor_sync(kFull, sq, o);
      loss = sq * inv_k;
    }
    if (lane == 0) {
      misc[0] = loss;
      misc[1] = hit;
    }
    __syncwarp();   // d loss / d logits are in lg_s
    for (int k = lane; k < H; k += 32) {
      float s = 0.0f;
      for (int c = 0; c < C; ++c) s += fcw[static_cast<int64_t>(c) * H + k] * lg_s[c];
      if (a.drop.threshold) s *= head_keep(a, pos, k);   // the mask's gradient; hl came in masked
      dh_s[k] = s;
    }
  }
  __syncthreads();
}

// The head's gradients (fc.weight, fc.bias) and the loss, count and correct, from what head() left in lg_s and misc
// and its input hl (all untouched by the backward). seq: the sequence's index in the batch (its partials' row); in a
// cluster every block runs the head (each needs d loss / d h of its own units) and one emits. old_s: the old values
// (loaded in the recurrence's prologue), or null (loaded here).
__device__ void head_emit(const Args& a, const float* hl, const float* lg_s, const float* misc, int seq,
                          const float* old_s) {
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int H = a.hin, C = a.C, lim = C * H + C + 3;   // H: the head's input width
  auto value = [&](int i) {
    if (i < C * H) return lg_s[i / H] * hl[i % H];
    if (i < C * H + C) return lg_s[i - C * H];
    const int e = i - C * H - C;
    return e == 0 ? misc[0] : (e == 1 ? 1.0f : misc[1]);
  };
  if (old_s) {
    for (int i = tid; i < lim; i += nt) a.out[head_entry(a, i)] = old_s[i] + value(i);
    return;
  }
  for (int i0 = tid; i0 < lim; i0 += 8 * nt) {   // fc.weight, fc.bias, loss, count, correct
    float v[8];
    int64_t at[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int i = i0 + u * nt;
      v[u] = i < lim ? value(i) : 0.0f;
      at[u] = i < lim ? head_entry(a, i) : 0;
    }
    emit_batch<8>(a, seq, v, [&](int u) { return at[u]; }, [&](int u) { return i0 + u * nt < lim; });
  }
}

}  // namespace
}  // namespace ragtrain
