// Reference LSTM + Linear head forward/backward and per-sequence losses on the CPU, in float and double.
#include "ragtrain/backend/cpu_lstm.hpp"

#include <algorithm>
#include <cmath>

#include "ragtrain/core/error.hpp"

namespace ragtrain {
namespace {

// Elements per 16-byte SIMD register (SSE2, the x86-64 baseline that plain -O2 targets).
template <class T>
constexpr int64_t kVector = static_cast<int64_t>(16 / sizeof(T));

// Buffers only grow, so training on ragged lengths stops allocating once the longest sequence was seen.
template <class T>
T* grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

// NV vectors' worth of outputs of gemv_rows, held in registers across the whole k loop; the first `skip`
// outputs are computed but not stored. Fixed trip counts are what let g++ -O2 (the "very cheap" vectoriser
// cost model) emit SIMD without reassociating any sum; unrolling keeps each accumulator in a register.
template <int64_t NV, class T>
void gemv_block(T* __restrict y, const T* __restrict a, int64_t lda, const T* __restrict x, int64_t incx,
                int64_t K, int64_t skip) {
  constexpr int64_t V = kVector<T>;
  T acc[NV][V];
#pragma GCC unroll 16
  for (int64_t s = 0; s < NV; ++s)
    for (int64_t u = 0; u < V; ++u) acc[s][u] = y[s * V + u];
  for (int64_t k = 0; k < K; ++k) {
    const T xk = x[k * incx];
    const T* row = a + k * lda;
#pragma GCC unroll 16
    for (int64_t s = 0; s < NV; ++s)
      for (int64_t u = 0; u < V; ++u) acc[s][u] += row[s * V + u] * xk;
  }
  for (int64_t n = skip; n < NV * V; ++n) y[n] = acc[n / V][n % V];
}

template <class T>
void gemv_block_n(int64_t nv, T* __restrict y, const T* __restrict a, int64_t lda, const T* __restrict x,
                  int64_t incx, int64_t K, int64_t skip) {
  switch (nv) {
    case 1: return gemv_block<1>(y, a, lda, x, incx, K, skip);
    case 2: return gemv_block<2>(y, a, lda, x, incx, K, skip);
    case 3: return gemv_block<3>(y, a, lda, x, incx, K, skip);
    case 4: return gemv_block<4>(y, a, lda, x, incx, K, skip);
    case 5: return gemv_block<5>(y, a, lda, x, incx, K, skip);
    case 6: return gemv_block<6>(y, a, lda, x, incx, K, skip);
    case 7: return gemv_block<7>(y, a, lda, x, incx, K, skip);
    default: return gemv_block<8>(y, a, lda, x, incx, K, skip);
  }
}

// y[n] += sum_k a[k*lda + n] * x[k*incx] for n < N, a (K, lda) row-major. Every output sums in k order, so
// the result does not depend on which block computes it. Outputs are innermost: independent, contiguous.
template <class T>
void gemv_rows(T* __restrict y, const T* __restrict a, int64_t lda, const T* __restrict x, int64_t incx,
               int64_t K, int64_t N) {
  constexpr int64_t V = kVector<T>, B = 8 * V;
  const int64_t full = N / B * B;
  const int64_t rest = N - full;
  const int64_t nv = (rest + V - 1) / V;
  int64_t done = full;   // outputs [done, N) still to do after the full blocks
  if (rest > 0 && nv * V <= N) {
    // One block ending at N, overlapping the full blocks rather than leaving a scalar tail, whose lone
    // dependency chains would each cost K add latencies. It runs first, so it reads y before they store.
    gemv_block_n(nv, y + N - nv * V, a + N - nv * V, lda, x, incx, K, nv * V - rest);
    done = N;
  }
  for (int64_t n = 0; n < full; n += B) gemv_block<8>(y + n, a + n, lda, x, incx, K, 0);
  for (; done + V <= N; done += V) gemv_block<1>(y + done, a + done, lda, x, incx, K, 0);
  for (; done < N; ++done) {
    T acc = y[done];
    for (int64_t k = 0; k < K; ++k) acc += a[k * lda + done] * x[k * incx];
    y[done] = acc;
  }
}

// dst (cols, rows) = src (rows, cols)^T, tile by tile: a plain loop strides a whole row apart on one side,
// and with power-of-two sizes (H = 64: 4H = 256) those accesses all land in the same cache sets.
template <class T>
void transpose(T* dst, const T* src, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 8;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
        for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r) dst[c * rows + r] = src[r * cols + c];
}

template <class T>
T sigmoid(T v) {
  return T(1) / (T(1) + std::exp(-v));
}

// glibc's tanhf goes through a slow expm1f; one double exp is about twice as fast and, once tiny |v| (where
// 1 - e would cancel, and tanh(v) rounds to v in float) is handled, still correct to float rounding.
float act_tanh(float v) {
  const double a = std::fabs(static_cast<double>(v));
  if (a < 1e-4) return v;
  const double e = std::exp(-2.0 * a);
  return static_cast<float>(std::copysign((1.0 - e) / (1.0 + e), static_cast<double>(v)));
}
double act_tanh(double v) { return std::tanh(v); }

// The float32 input rows in the compute type, so every layer's input projection is the same T kernel.
template <class T>
void convert_input(T* dst, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(x[i]);
}

}  // namespace

template <class T>
const T* lstm_forward(const ParamLayout& layout, const T* params, const float* x, int64_t length,
                      LstmCache<T>& cache) {
  const ModelShape& s = layout.shape();
  RT_CHECK(length > 0, "a sequence needs at least one timestep, got " << length);
  const int64_t F = s.input_size, H = s.hidden, G = 4 * H, L = s.layers;
  cache.length = length;
  const size_t nl = static_cast<size_t>(L);
  if (cache.gates.size() != nl) {
    cache.gates.resize(nl);
    cache.c.resize(nl);
    cache.h.resize(nl);
    cache.tanh_c.resize(nl);
  }

  const int64_t in_max = std::max(F, H);
  T* base = grow(cache.scratch, length * F + in_max * G + H * G + G);
  T* xin = base;                       // (T, F) layer-0 input in T
  T* wt_ih = xin + length * F;         // (in, 4H) weight_ih transposed
  T* wt_hh = wt_ih + in_max * G;       // (H, 4H) weight_hh transposed
  T* bias = wt_hh + H * G;             // (4H) b_ih + b_hh
  convert_input(xin, x, length * F);

  for (int64_t l = 0; l < L; ++l) {
    const size_t li = static_cast<size_t>(l);
    const int64_t in = l == 0 ? F : H;
    const T* input = l == 0 ? xin : cache.h[li - 1].data();   // (T, in)
    T* gates = grow(cache.gates[li], length * G);            // (T, 4H) pre- then post-activations
    T* c = grow(cache.c[li], length * H);                    // (T, H)
    T* h = grow(cache.h[li], length * H);                    // (T, H)
    T* tc = grow(cache.tanh_c[li], length * H);              // (T, H)

    transpose(wt_ih, params + layout.w_ih(l).offset, G, in);
    transpose(wt_hh, params + layout.w_hh(l).offset, G, H);
    const T* b_ih = params + layout.b_ih(l).offset;
    const T* b_hh = params + layout.b_hh(l).offset;
    for (int64_t j = 0; j < G; ++j) bias[j] = b_ih[j] + b_hh[j];

    // The input projection does not depend on the recurrence, so all timesteps go first.
    for (int64_t t = 0; t < length; ++t) {
      T* g = gates + t * G;
      std::copy(bias, bias + G, g);
      gemv_rows(g, wt_ih, G, input + t * in, 1, in, G);
    }
    for (int64_t t = 0; t < length; ++t) {
      T* g = gates + t * G;
      if (t > 0) gemv_rows(g, wt_hh, G, h + (t - 1) * H, 1, H, G);   // h_{-1} = 0
      const T* c_prev = t > 0 ? c + (t - 1) * H : nullptr;
      T* ct = c + t * H;
      T* tct = tc + t * H;
      T* ht = h + t * H;
      for (int64_t k = 0; k < H; ++k) {
        const T ig = sigmoid(g[k]);
        const T fg = sigmoid(g[H + k]);
        const T gg = act_tanh(g[2 * H + k]);
        const T og = sigmoid(g[3 * H + k]);
        g[k] = ig;
        g[H + k] = fg;
        g[2 * H + k] = gg;
        g[3 * H + k] = og;
        ct[k] = (c_prev ? fg * c_prev[k] : T(0)) + ig * gg;
        tct[k] = act_tanh(ct[k]);
        ht[k] = og * tct[k];
      }
    }
  }

  const int64_t C = s.outputs;
  T* out = grow(cache.out, C);
  const T* h_last = cache.h[nl - 1].data() + (length - 1) * H;
  const T* fc_w = params + layout.fc_weight().offset;   // (C, H)
  const T* fc_b = params + layout.fc_bias().offset;     // (C)
  for (int64_t o = 0; o < C; ++o) {
    T acc = fc_b[o];
    for (int64_t k = 0; k < H; ++k) acc += fc_w[o * H + k] * h_last[k];
    out[o] = acc;
  }
  return out;
}

template <class T>
void lstm_backward(const ParamLayout& layout, const T* params, const float* x, const LstmCache<T>& cache,
                   const T* d_out, T* grad) {
  const ModelShape& s = layout.shape();
  const int64_t F = s.input_size, H = s.hidden, G = 4 * H, L = s.layers, C = s.outputs;
  const int64_t n = cache.length;
  RT_CHECK(n > 0 && static_cast<int64_t>(cache.gates.size()) == L, "lstm_backward needs a matching forward");

  T* base = grow(cache.work, n * G + n * H + 2 * H + n * F + G + std::max(F, H));
  T* dg = base;                        // (T, 4H) d loss / d gate pre-activations
  T* dh_in = dg + n * G;               // (T, H) d loss / d h from above (the head, or the next layer)
  T* dh_rec = dh_in + n * H;           // (H) d loss / d h_{t-1} through weight_hh
  T* dc = dh_rec + H;                  // (H) d loss / d c_{t-1}
  T* xin = dc + H;                     // (T, F) layer-0 input in T
  T* db = xin + n * F;                 // (4H) bias gradient (the same for b_ih and b_hh)
  T* row = db + G;                     // (max(F, H)) one row of a weight gradient
  convert_input(xin, x, n * F);

  // Head: only the last timestep of the last layer feeds it.
  const T* h_last = cache.h[static_cast<size_t>(L - 1)].data() + (n - 1) * H;
  const T* fc_w = params + layout.fc_weight().offset;
  T* g_fc_w = grad + layout.fc_weight().offset;
  T* g_fc_b = grad + layout.fc_bias().offset;
  for (int64_t o = 0; o < C; ++o) {
    for (int64_t k = 0; k < H; ++k) g_fc_w[o * H + k] += d_out[o] * h_last[k];
    g_fc_b[o] += d_out[o];
  }
  std::fill(dh_in, dh_in + n * H, T(0));
  gemv_rows(dh_in + (n - 1) * H, fc_w, H, d_out, 1, C, H);

  for (int64_t l = L - 1; l >= 0; --l) {
    const size_t li = static_cast<size_t>(l);
    const int64_t in = l == 0 ? F : H;
    const T* input = l == 0 ? xin : cache.h[li - 1].data();   // (T, in)
    const T* gates = cache.gates[li].data();
    const T* c = cache.c[li].data();
    const T* tc = cache.tanh_c[li].data();
    const T* h = cache.h[li].data();
    const T* w_ih = params + layout.w_ih(l).offset;   // (4H, in)
    const T* w_hh = params + layout.w_hh(l).offset;   // (4H, H)

    std::fill(dh_rec, dh_rec + H, T(0));
    std::fill(dc, dc + H, T(0));
    for (int64_t t = n - 1; t >= 0; --t) {
      const T* g = gates + t * G;
      const T* c_prev = t > 0 ? c + (t - 1) * H : nullptr;
      const T* tct = tc + t * H;
      const T* dht = dh_in + t * H;
      T* d = dg + t * G;
      for (int64_t k = 0; k < H; ++k) {
        const T ig = g[k], fg = g[H + k], gg = g[2 * H + k], og = g[3 * H + k];
        const T dh = dht[k] + dh_rec[k];
        const T dct = dc[k] + dh * og * (T(1) - tct[k] * tct[k]);
        d[k] = dct * gg * ig * (T(1) - ig);
        d[H + k] = c_prev ? dct * c_prev[k] * fg * (T(1) - fg) : T(0);
        d[2 * H + k] = dct * ig * (T(1) - gg * gg);
        d[3 * H + k] = dh * tct[k] * og * (T(1) - og);
        dc[k] = dct * fg;
      }
      if (t > 0) {
        std::fill(dh_rec, dh_rec + H, T(0));
        gemv_rows(dh_rec, w_hh, H, d, 1, G, H);
      }
    }

    // Weight gradients as sums of outer products over all timesteps, once per layer rather than per step:
    // row j of dW_ih is sum_t dg[t][j] * input[t], of dW_hh sum_{t>0} dg[t][j] * h[t-1] (h_{-1} = 0).
    // Each row is summed on its own and then added, so grad receives this sequence's gradient as a whole.
    auto add_weight_grad = [&](T* g_w, const T* rows, int64_t width, const T* dg_col, int64_t steps) {
      for (int64_t j = 0; j < G; ++j) {
        std::fill(row, row + width, T(0));
        gemv_rows(row, rows, width, dg_col + j, G, steps, width);
        for (int64_t k = 0; k < width; ++k) g_w[j * width + k] += row[k];
      }
    };
    add_weight_grad(grad + layout.w_ih(l).offset, input, in, dg, n);
    add_weight_grad(grad + layout.w_hh(l).offset, h, H, dg + G, n - 1);
    const T one = 1;   // incx 0: the column sums of dg, exact since every product is by 1
    std::fill(db, db + G, T(0));
    gemv_rows(db, dg, G, &one, 0, n, G);
    T* g_b_ih = grad + layout.b_ih(l).offset;
    T* g_b_hh = grad + layout.b_hh(l).offset;
    for (int64_t j = 0; j < G; ++j) {
      g_b_ih[j] += db[j];
      g_b_hh[j] += db[j];
    }

    // This layer's input gradient is the layer below's dh_in; dh_in is no longer read, so it is reused.
    if (l > 0) {
      std::fill(dh_in, dh_in + n * H, T(0));
      for (int64_t t = 0; t < n; ++t) gemv_rows(dh_in + t * H, w_ih, in, dg + t * G, 1, G, in);
    }
  }
}

template <class T>
T loss_and_grad(Task task, const T* out, int64_t outputs, int32_t label, const float* target, T* d_out) {
  RT_CHECK(outputs > 0, "no outputs");
  if (task == Task::Classification) {
    RT_CHECK(label >= 0 && label < outputs, "label " << label << " outside [0, " << outputs << ")");
    // log-softmax shifted by the max so exp never overflows.
    const T m = *std::max_element(out, out + outputs);
    T sum = 0;
    for (int64_t k = 0; k < outputs; ++k) sum += std::exp(out[k] - m);
    for (int64_t k = 0; k < outputs; ++k) d_out[k] = std::exp(out[k] - m) / sum - (k == label ? T(1) : T(0));
    return m + std::log(sum) - out[label];
  }
  RT_CHECK(target != nullptr, "regression needs a target");
  const T inv_k = T(1) / static_cast<T>(outputs);
  T loss = 0;
  for (int64_t k = 0; k < outputs; ++k) {
    const T diff = out[k] - static_cast<T>(target[k]);
    loss += diff * diff;
    d_out[k] = T(2) * diff * inv_k;
  }
  return loss * inv_k;
}

template <class T>
int32_t argmax(const T* out, int64_t outputs) {
  int64_t best = 0;
  for (int64_t k = 1; k < outputs; ++k)
    if (out[k] > out[best]) best = k;
  return static_cast<int32_t>(best);
}

#define RAGTRAIN_INSTANTIATE(T)                                                                              \
  template const T* lstm_forward<T>(const ParamLayout&, const T*, const float*, int64_t, LstmCache<T>&);     \
  template void lstm_backward<T>(const ParamLayout&, const T*, const float*, const LstmCache<T>&, const T*, \
                                 T*);                                                                       \
  template T loss_and_grad<T>(Task, const T*, int64_t, int32_t, const float*, T*);                          \
  template int32_t argmax<T>(const T*, int64_t);

RAGTRAIN_INSTANTIATE(float)
RAGTRAIN_INSTANTIATE(double)

#undef RAGTRAIN_INSTANTIATE

}  // namespace ragtrain
