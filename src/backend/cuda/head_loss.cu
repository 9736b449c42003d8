// Pooling over each sequence's valid steps, head dropout, the Linear head, the per-sequence losses (cross-entropy or mean squared error) and their gradients on the GPU for
// a batch of sequences, and the inference head.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "head_loss.hpp"
#include "ragtrain/core/error_cuda.hpp"
#include "ragtrain/model/dropout_mask.hpp"

namespace ragtrain {
namespace {

constexpr int kHeadThreads = 512;
constexpr int kWarps = kHeadThreads / 32;

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

// logits (C) = W h + b into shared memory; one warp per output row, lanes stride over H.
__device__ void head_logits(const float* h_s, const float* __restrict__ w, const float* __restrict__ b, int H, int C,
                            float* out_s) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (int c = warp; c < C; c += kWarps) {
    float s = 0.0f;
    for (int j = lane; j < H; j += 32) s += w[static_cast<int64_t>(c) * H + j] * h_s[j];
    s = warp_sum(s);
    if (lane == 0) out_s[c] = s + b[c];
  }
}

// The step of y (T, B, DH) that the pooling reads for unit j of sequence b (last: the forward direction's final
// step, the reverse direction's state after the first step; max: the first step holding the max), or -1 (mean).
__device__ int pooled_step(const float* y, int B, int DH, int H, int pool, int b, int len, int j) {
  if (pool == 0) return j < H ? len - 1 : 0;
  if (pool == 1) return -1;
  int best = 0;
  float m = y[static_cast<int64_t>(b) * DH + j];
  for (int t = 1; t < len; ++t) {
    const float v = y[(static_cast<int64_t>(t) * B + b) * DH + j];
    if (v > m) m = v, best = t;   // ties: the first step, as the reference
  }
  return best;
}

// Unit j of sequence b's pooled vector.
__device__ float pooled_value(const float* y, int B, int DH, int H, int pool, int b, int len, int j) {
  const int t = pooled_step(y, B, DH, H, pool, b, len, j);
  if (t >= 0) return y[(static_cast<int64_t>(t) * B + b) * DH + j];
  float sum = 0.0f;   // mean: summed in step order, then divided, as the reference
  for (int u = 0; u < len; ++u) sum += y[(static_cast<int64_t>(u) * B + b) * DH + j];
  return sum / static_cast<float>(len);
}

// The head dropout's factor of unit j of slot b: 0 or 1/(1-p); 1 without dropout.
__device__ float head_keep(const HeadArgs& a, int b, int j) {
  if (a.dropout.threshold == 0) return 1.0f;
  const DropoutKey key{a.dropout.seed, *a.dropout.step, a.dropout.seq[b]};
  return dropout_keep(key, kHeadDropoutLayer, 0, j, a.dropout.threshold) ? a.dropout.scale : 0.0f;
}

// The batched head. Shared memory per chunk of up to `chunk` sequences: their last hidden states, their logits
// (turned into d loss / d logits in place), losses and hits; fc.weight too when w_in_shared (one memory round trip
// instead of C*chunk on this latency-bound single-block kernel).
__global__ void __launch_bounds__(kHeadThreads) head_loss_grad_kernel(HeadArgs a, int chunk, bool w_in_shared) {
  extern __shared__ float smem[];
  // H below is the head's input width D*H (what y, dy and fc.weight rows hold); Hd one direction's.
  const int Hd = a.hidden, H = a.directions * a.hidden, C = a.outputs, B = a.batch;
  const int64_t CH = static_cast<int64_t>(C) * H;
  float* h_s = smem;                      // (chunk, D*H) pooled, after the head dropout
  float* d_s = h_s + chunk * H;           // (chunk, C) logits, then d loss / d logits
  float* loss_s = d_s + chunk * C;        // (chunk)
  float* hit_s = loss_s + chunk;          // (chunk)
  float* w_s = hit_s + chunk;             // (C, H) when w_in_shared
  const int tid = static_cast<int>(threadIdx.x);
  if (w_in_shared)
    for (int64_t i = tid; i < CH; i += kHeadThreads) w_s[i] = a.weight[i];
  const float* w = w_in_shared ? w_s : a.weight;
  float loss_total = 0.0f, hit_total = 0.0f;   // thread 0's running sums over chunks (fixed order)

  for (int b0 = 0; b0 < B; b0 += chunk) {
    const int n = min(chunk, B - b0);
    // The pooled top-layer outputs of each sequence, through the head dropout.
    for (int i = tid; i < n * H; i += kHeadThreads) {
      const int k = i / H, j = i % H, b = b0 + k;
      h_s[i] = pooled_value(a.y, B, H, Hd, a.pool, b, a.lengths[b], j) * head_keep(a, b, j);
    }
    __syncthreads();
    // Logits. Few of them (batch one): a warp each, lanes striding over H (short dependency chains); many: a
    // thread each, summing over H in order.
    if (n * C <= kWarps) {
      const int warp = tid / 32, lane = tid % 32;
      if (warp < n * C) {
        const int k = warp / C, c = warp % C;
        float s = 0.0f;
        for (int j = lane; j < H; j += 32) s += w[static_cast<int64_t>(c) * H + j] * h_s[k * H + j];
        s = warp_sum(s);
        if (lane == 0) d_s[warp] = s + a.bias[c];
      }
    } else {
      for (int i = tid; i < n * C; i += kHeadThreads) {
        const int k = i / C, c = i % C;
        float s = 0.0f;
        for (int j = 0; j < H; ++j) s += w[static_cast<int64_t>(c) * H + j] * h_s[k * H + j];
        d_s[i] = s + a.bias[c];
      }
    }
    __syncthreads();
    // Loss and d loss / d logits: one thread per sequence (the reference's formulas, shifted log-softmax).
    for (int k = tid; k < n; k += kHeadThreads) {
      float* o = d_s + k * C;
      const int b = b0 + k;
      float loss = 0.0f, hit = 0.0f;
      if (a.classification) {
        int label = a.labels[b];
        label = label < 0 ? 0 : (label >= C ? C - 1 : label);   // validated on the host; never index out of bounds
        float m = -INFINITY;
        int best = 0;   // argmax, ties to the lowest index as in the reference
        for (int c = 0; c < C; ++c)
          if (o[c] > m) m = o[c], best = c;
        float sum = 0.0f;
        for (int c = 0; c < C; ++c) sum += expf(o[c] - m);
        loss = m + logf(sum) - o[label];
        hit = best == label ? 1.0f : 0.0f;
        for (int c = 0; c < C; ++c) o[c] = expf(o[c] - m) / sum - (c == label ? 1.0f : 0.0f);
      } else {
        const float inv_k = 1.0f / static_cast<float>(C);
        const float* t = a.targets + static_cast<int64_t>(b) * C;
        float sq = 0.0f;
        for (int c = 0; c < C; ++c) {
          const float diff = o[c] - t[c];
          sq += diff * diff;
          o[c] = 2.0f * diff * inv_k;
        }
        loss = sq * inv_k;
      }
      loss_s[k] = loss;
      hit_s[k] = hit;
    }
    __syncthreads();
    // d pooled = W^T d through the dropout, WRITTEN into dy where the pooling read (the seed of cuDNN's backward
    // pass): the last steps, every valid step (divided by the length), or each unit's max step.
    for (int i = tid; i < n * H; i += kHeadThreads) {
      const int k = i / H, j = i % H, b = b0 + k, len = a.lengths[b];
      float s = 0.0f;
      for (int c = 0; c < C; ++c) s += w[static_cast<int64_t>(c) * H + j] * d_s[k * C + c];
      s *= head_keep(a, b, j);
      const int t = pooled_step(a.y, B, H, Hd, a.pool, b, len, j);
      if (t >= 0) {
        a.dy[(static_cast<int64_t>(t) * B + b) * H + j] = s;
      } else {
        const float share = s / static_cast<float>(len);
        for (int u = 0; u < len; ++u) a.dy[(static_cast<int64_t>(u) * B + b) * H + j] = share;
      }
    }
    // fc.weight += sum over the chunk of d h^T, fc.bias += sum of d (this block is the only writer).
    for (int64_t i = tid; i < CH; i += kHeadThreads) {
      const int c = static_cast<int>(i / H), j = static_cast<int>(i % H);
      float s = 0.0f;
      for (int k = 0; k < n; ++k) s += d_s[k * C + c] * h_s[k * H + j];
      a.d_weight[i] += s;
    }
    for (int c = tid; c < C; c += kHeadThreads) {
      float s = 0.0f;
      for (int k = 0; k < n; ++k) s += d_s[k * C + c];
      a.d_bias[c] += s;
    }
    if (tid == 0)
      for (int k = 0; k < n; ++k) loss_total += loss_s[k], hit_total += hit_s[k];
    __syncthreads();   // the next chunk overwrites the shared arrays
  }
  if (tid == 0) {
    a.extras[0] += loss_total;
    a.extras[1] += static_cast<float>(B);
    a.extras[2] += hit_total;
  }
}

__global__ void __launch_bounds__(kHeadThreads) head_forward_kernel(const float* y, int len, int Hd, int D, int pool,
                                                                   const float* w, const float* b, int C, float* out) {
  extern __shared__ float smem[];
  const int H = D * Hd;    // the head's input width
  float* h_s = smem;       // (D*H) pooled
  float* out_s = h_s + H;  // (C)
  for (int j = static_cast<int>(threadIdx.x); j < H; j += kHeadThreads) h_s[j] = pooled_value(y, 1, H, Hd, pool, 0, len, j);
  __syncthreads();
  head_logits(h_s, w, b, H, C, out_s);
  __syncthreads();
  for (int c = static_cast<int>(threadIdx.x); c < C; c += kHeadThreads) out[c] = out_s[c];
}

}  // namespace

void launch_head_loss_grad(const HeadArgs& a, cudaStream_t s) {
  RT_CHECK(a.batch >= 1, "head of an empty batch");
  // Shared memory: as many sequences per chunk as fit in the default 48 KiB, with fc.weight staged when it leaves
  // room for at least 8 sequences (or the whole batch).
  constexpr size_t kShared = 48 * 1024;
  const size_t DH = static_cast<size_t>(a.directions) * static_cast<size_t>(a.hidden);
  const size_t per_seq = sizeof(float) * (DH + static_cast<size_t>(a.outputs) + 2);
  const size_t w_bytes = sizeof(float) * DH * static_cast<size_t>(a.outputs);
  const size_t want = std::min<size_t>(static_cast<size_t>(a.batch), 8);
  const bool w_in_shared = w_bytes + want * per_seq <= kShared;
  const size_t room = kShared - (w_in_shared ? w_bytes : 0);
  RT_CHECK(per_seq <= room, "head of H=" << a.hidden << ", C=" << a.outputs << " exceeds the kernel's shared memory");
  const int chunk = static_cast<int>(std::min<size_t>(static_cast<size_t>(a.batch), room / per_seq));
  const size_t bytes = static_cast<size_t>(chunk) * per_seq + (w_in_shared ? w_bytes : 0);
  head_loss_grad_kernel<<<1, kHeadThreads, bytes, s>>>(a, chunk, w_in_shared);
  CUDA_CHECK_LAUNCH();
}

void launch_head_forward(const float* y, int32_t length, int32_t hidden, int32_t directions, int32_t pool,
                         const float* weight, const float* bias, int32_t outputs, float* out, cudaStream_t s) {
  const size_t shared = sizeof(float) * (static_cast<size_t>(directions) * hidden + static_cast<size_t>(outputs));
  RT_CHECK(shared <= 48 * 1024, "head of H=" << hidden << ", C=" << outputs << " exceeds the kernel's shared memory");
  head_forward_kernel<<<1, kHeadThreads, shared, s>>>(y, length, hidden, directions, pool, weight, bias, outputs, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace ragtrain
