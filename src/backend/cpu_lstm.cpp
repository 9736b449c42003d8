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

// Grows the per-layer, per-direction arrays of the cache to the model's shape.
template <class T>
void shape_cache(LstmCache<T>& cache, int64_t L, int64_t D) {
  const size_t nld = static_cast<size_t>(L * D), nl = static_cast<size_t>(L);
  if (cache.gates.size() != nld) {
    cache.gates.resize(nld);
    cache.c.resize(nld);
    cache.tanh_c.resize(nld);
  }
  if (cache.h.size() != nl) {
    cache.h.resize(nl);
    cache.keep.resize(nl);
    cache.dropped.resize(nl);
  }
}

// One direction of one layer over the whole sequence. input (n, in) row stride `in`; writes h into out (n, D*H) at
// column d*H. The forward direction runs t = 0 .. n-1 from h_{-1} = 0, the reverse one t = n-1 .. 0 from h_n = 0.
template <class T>
void direction_forward(const ParamLayout& layout, const T* params, int64_t l, int64_t d, const T* input, int64_t in,
                       int64_t n, T* scratch, LstmCache<T>& cache, T* out) {
  const ModelShape& s = layout.shape();
  const int64_t H = s.hidden, G = 4 * H, DH = s.head_input();
  const size_t ld = static_cast<size_t>(l * s.directions() + d);
  T* wt_ih = scratch;                  // (in, 4H) weight_ih transposed
  T* wt_hh = wt_ih + in * G;           // (H, 4H) weight_hh transposed
  T* bias = wt_hh + H * G;             // (4H) b_ih + b_hh
  T* gates = grow(cache.gates[ld], n * G);     // (T, 4H) pre- then post-activations
  T* c = grow(cache.c[ld], n * H);             // (T, H)
  T* tc = grow(cache.tanh_c[ld], n * H);       // (T, H)

  transpose(wt_ih, params + layout.w_ih(l, d).offset, G, in);
  transpose(wt_hh, params + layout.w_hh(l, d).offset, G, H);
  const T* b_ih = params + layout.b_ih(l, d).offset;
  const T* b_hh = params + layout.b_hh(l, d).offset;
  for (int64_t j = 0; j < G; ++j) bias[j] = b_ih[j] + b_hh[j];

  // The input projection does not depend on the recurrence, so all timesteps go first.
  for (int64_t t = 0; t < n; ++t) {
    T* g = gates + t * G;
    std::copy(bias, bias + G, g);
    gemv_rows(g, wt_ih, G, input + t * in, 1, in, G);
  }
  const int64_t step = d == 0 ? 1 : -1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = d == 0 ? i : n - 1 - i, prev = t - step;   // prev: the state this step reads
    T* g = gates + t * G;
    if (i > 0) gemv_rows(g, wt_hh, G, out + prev * DH + d * H, 1, H, G);
    const T* c_prev = i > 0 ? c + prev * H : nullptr;
    T* ct = c + t * H;
    T* tct = tc + t * H;
    T* ht = out + t * DH + d * H;
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

// Pools the top layer's outputs h (n, D*H) into cache.pooled (D*H), then applies the head's dropout into head_in.
template <class T>
void pool_forward(const ModelShape& s, const T* h, int64_t n, const DropoutDraw& drop, LstmCache<T>& cache) {
  const int64_t H = s.hidden, DH = s.head_input();
  T* p = grow(cache.pooled, DH);
  switch (s.pool) {
    case Pool::Last:
      // h_n: the forward direction ends at t = n-1, the reverse one at t = 0.
      for (int64_t k = 0; k < DH; ++k) p[k] = k < H ? h[(n - 1) * DH + k] : h[k];
      break;
    case Pool::Mean:
      for (int64_t k = 0; k < DH; ++k) {
        T sum = 0;
        for (int64_t t = 0; t < n; ++t) sum += h[t * DH + k];
        p[k] = sum / static_cast<T>(n);
      }
      break;
    case Pool::Max: {
      int64_t* am = grow(cache.argmax, DH);
      for (int64_t k = 0; k < DH; ++k) {
        int64_t best = 0;
        for (int64_t t = 1; t < n; ++t)
          if (h[t * DH + k] > h[best * DH + k]) best = t;   // ties: the first step
        am[k] = best;
        p[k] = h[best * DH + k];
      }
      break;
    }
  }
  T* q = grow(cache.head_in, DH);
  cache.head_dropout = drop.rates.head > 0;
  if (!cache.head_dropout) {
    std::copy(p, p + DH, q);
    return;
  }
  T* keep = grow(cache.head_keep, DH);
  const uint32_t thr = dropout_threshold(drop.rates.head);
  const T scale = static_cast<T>(dropout_scale(drop.rates.head));
  for (int64_t k = 0; k < DH; ++k) {
    keep[k] = dropout_keep(drop.key, kHeadDropoutLayer, 0, k, thr) ? scale : T(0);
    q[k] = p[k] * keep[k];
  }
}

// Backward of the head: ADDS the Linear head's gradients into grad and WRITES d loss / d h of the top layer
// (n, D*H) into dh (pooling's backward: the last steps, every step / n, or each unit's argmax step).
template <class T>
void head_backward(const ParamLayout& layout, const T* params, const LstmCache<T>& cache, const T* d_out, T* grad,
                   T* dq, T* dh) {
  const ModelShape& s = layout.shape();
  const int64_t H = s.hidden, DH = s.head_input(), C = s.outputs, n = cache.length;
  const T* q = cache.head_in.data();
  const T* fc_w = params + layout.fc_weight().offset;
  T* g_fc_w = grad + layout.fc_weight().offset;
  T* g_fc_b = grad + layout.fc_bias().offset;
  for (int64_t o = 0; o < C; ++o) {
    for (int64_t k = 0; k < DH; ++k) g_fc_w[o * DH + k] += d_out[o] * q[k];
    g_fc_b[o] += d_out[o];
  }
  std::fill(dq, dq + DH, T(0));
  gemv_rows(dq, fc_w, DH, d_out, 1, C, DH);
  if (cache.head_dropout)
    for (int64_t k = 0; k < DH; ++k) dq[k] *= cache.head_keep[static_cast<size_t>(k)];
  std::fill(dh, dh + n * DH, T(0));
  switch (s.pool) {
    case Pool::Last:
      for (int64_t k = 0; k < DH; ++k) dh[(k < H ? (n - 1) * DH : 0) + k] = dq[k];
      break;
    case Pool::Mean:
      for (int64_t t = 0; t < n; ++t)
        for (int64_t k = 0; k < DH; ++k) dh[t * DH + k] = dq[k] / static_cast<T>(n);
      break;
    case Pool::Max:
      for (int64_t k = 0; k < DH; ++k) dh[cache.argmax[static_cast<size_t>(k)] * DH + k] = dq[k];
      break;
  }
}

// Temporaries of one backward pass, carved from the cache's work buffer.
template <class T>
struct BackwardWork {
  T* dg;       // (D, T, 4H) d loss / d gate pre-activations, per direction
  T* dh_in;    // (T, D*H) d loss / d this layer's outputs (from the head, or the layer above)
  T* dh_rec;   // (H) d loss / d h of the step read before, through weight_hh
  T* dc;       // (H) d loss / d c of the step read before
  T* db;       // (4H) bias gradient (the same for b_ih and b_hh)
  T* row;      // (max(F, D*H)) one row of a weight gradient
  T* dq;       // (D*H) d loss / d head input
};

// Back-propagation through time of one direction of one layer: fills dg (T, 4H) of that direction from dh_in.
template <class T>
void direction_bptt(const ParamLayout& layout, const T* params, const LstmCache<T>& cache, int64_t l, int64_t d,
                    const BackwardWork<T>& w, T* dg) {
  const ModelShape& s = layout.shape();
  const int64_t H = s.hidden, G = 4 * H, DH = s.head_input(), n = cache.length;
  const size_t ld = static_cast<size_t>(l * s.directions() + d);
  const T* gates = cache.gates[ld].data();
  const T* c = cache.c[ld].data();
  const T* tc = cache.tanh_c[ld].data();
  const T* w_hh = params + layout.w_hh(l, d).offset;   // (4H, H)
  const int64_t step = d == 0 ? 1 : -1;
  std::fill(w.dh_rec, w.dh_rec + H, T(0));
  std::fill(w.dc, w.dc + H, T(0));
  for (int64_t i = n - 1; i >= 0; --i) {   // i: processing order of the forward pass, walked back
    const int64_t t = d == 0 ? i : n - 1 - i, prev = t - step;
    const T* g = gates + t * G;
    const T* c_prev = i > 0 ? c + prev * H : nullptr;
    const T* tct = tc + t * H;
    const T* dht = w.dh_in + t * DH + d * H;
    T* dgt = dg + t * G;
    for (int64_t k = 0; k < H; ++k) {
      const T ig = g[k], fg = g[H + k], gg = g[2 * H + k], og = g[3 * H + k];
      const T dh = dht[k] + w.dh_rec[k];
      const T dct = w.dc[k] + dh * og * (T(1) - tct[k] * tct[k]);
      dgt[k] = dct * gg * ig * (T(1) - ig);
      dgt[H + k] = c_prev ? dct * c_prev[k] * fg * (T(1) - fg) : T(0);
      dgt[2 * H + k] = dct * ig * (T(1) - gg * gg);
      dgt[3 * H + k] = dh * tct[k] * og * (T(1) - og);
      w.dc[k] = dct * fg;
    }
    if (i > 0) {
      std::fill(w.dh_rec, w.dh_rec + H, T(0));
      gemv_rows(w.dh_rec, w_hh, H, dgt, 1, G, H);
    }
  }
}

// Weight and bias gradients of one direction of one layer, ADDED into grad, as sums of outer products over all
// timesteps (once per layer rather than per step): row j of dW_ih is sum_t dg[t][j] * input[t], of dW_hh the sum
// over the steps that read a state of dg[t][j] * h[prev(t)] (the first step reads zeros). Each row is summed on its
// own and then added, so grad receives this sequence's gradient as a whole.
template <class T>
void direction_weight_grad(const ParamLayout& layout, const LstmCache<T>& cache, int64_t l, int64_t d,
                           const T* input, int64_t in, const BackwardWork<T>& w, const T* dg, T* grad) {
  const ModelShape& s = layout.shape();
  const int64_t H = s.hidden, G = 4 * H, DH = s.head_input(), n = cache.length;
  auto add_weight_grad = [&](T* g_w, const T* rows, int64_t lda, int64_t width, const T* dg_col, int64_t steps) {
    for (int64_t j = 0; j < G; ++j) {
      std::fill(w.row, w.row + width, T(0));
      gemv_rows(w.row, rows, lda, dg_col + j, G, steps, width);
      for (int64_t k = 0; k < width; ++k) g_w[j * width + k] += w.row[k];
    }
  };
  add_weight_grad(grad + layout.w_ih(l, d).offset, input, in, in, dg, n);
  const T* h = cache.h[static_cast<size_t>(l)].data() + d * H;   // this direction's h at t = 0, row stride D*H
  if (d == 0)
    add_weight_grad(grad + layout.w_hh(l, d).offset, h, DH, H, dg + G, n - 1);    // step t reads h[t-1]
  else
    add_weight_grad(grad + layout.w_hh(l, d).offset, h + DH, DH, H, dg, n - 1);   // step t reads h[t+1]
  const T one = 1;   // incx 0: the column sums of dg, exact since every product is by 1
  std::fill(w.db, w.db + G, T(0));
  gemv_rows(w.db, dg, G, &one, 0, n, G);
  T* g_b_ih = grad + layout.b_ih(l, d).offset;
  T* g_b_hh = grad + layout.b_hh(l, d).offset;
  for (int64_t j = 0; j < G; ++j) {
    g_b_ih[j] += w.db[j];
    g_b_hh[j] += w.db[j];
  }
}

}  // namespace

template <class T>
const T* lstm_forward(const ParamLayout& layout, const T* params, const float* x, int64_t length,
                      LstmCache<T>& cache, const DropoutDraw& drop) {
  const ModelShape& s = layout.shape();
  RT_CHECK(length > 0, "a sequence needs at least one timestep, got " << length);
  RT_CHECK(drop.rates.between >= 0 && drop.rates.between < 1 && drop.rates.head >= 0 && drop.rates.head < 1,
           "dropout rates " << drop.rates.between << ", " << drop.rates.head);
  const int64_t F = s.input_size, H = s.hidden, G = 4 * H, L = s.layers, D = s.directions(), DH = s.head_input();
  cache.length = length;
  shape_cache(cache, L, D);
  cache.between_dropout = drop.rates.between > 0 && L > 1;

  const int64_t in_max = std::max(F, DH);
  T* base = grow(cache.scratch, length * F + in_max * G + H * G + G);
  T* xin = base;                       // (T, F) layer-0 input in T
  convert_input(xin, x, length * F);

  const uint32_t thr = dropout_threshold(drop.rates.between);
  const T scale = static_cast<T>(dropout_scale(drop.rates.between));
  for (int64_t l = 0; l < L; ++l) {
    const size_t li = static_cast<size_t>(l);
    const int64_t in = l == 0 ? F : DH;
    const T* input = l == 0 ? xin : (cache.between_dropout ? cache.dropped[li - 1] : cache.h[li - 1]).data();
    T* out = grow(cache.h[li], length * DH);   // (T, D*H)
    for (int64_t d = 0; d < D; ++d) direction_forward(layout, params, l, d, input, in, length, xin + length * F, cache, out);
    if (cache.between_dropout && l < L - 1) {
      // nn.LSTM's dropout: on this layer's outputs (both directions), the next layer's input.
      T* keep = grow(cache.keep[li], length * DH);
      T* dropped = grow(cache.dropped[li], length * DH);
      for (int64_t t = 0; t < length; ++t)
        for (int64_t k = 0; k < DH; ++k) {
          const int64_t i = t * DH + k;
          keep[i] = dropout_keep(drop.key, l, t, k, thr) ? scale : T(0);
          dropped[i] = out[i] * keep[i];
        }
    }
  }

  pool_forward(s, cache.h[static_cast<size_t>(L - 1)].data(), length, drop, cache);
  const int64_t C = s.outputs;
  T* out = grow(cache.out, C);
  const T* q = cache.head_in.data();
  const T* fc_w = params + layout.fc_weight().offset;   // (C, D*H)
  const T* fc_b = params + layout.fc_bias().offset;     // (C)
  for (int64_t o = 0; o < C; ++o) {
    T acc = fc_b[o];
    for (int64_t k = 0; k < DH; ++k) acc += fc_w[o * DH + k] * q[k];
    out[o] = acc;
  }
  return out;
}

template <class T>
void lstm_backward(const ParamLayout& layout, const T* params, const float* x, const LstmCache<T>& cache,
                   const T* d_out, T* grad) {
  const ModelShape& s = layout.shape();
  const int64_t F = s.input_size, H = s.hidden, G = 4 * H, L = s.layers, D = s.directions(), DH = s.head_input();
  const int64_t n = cache.length;
  RT_CHECK(n > 0 && static_cast<int64_t>(cache.gates.size()) == L * D, "lstm_backward needs a matching forward");

  T* base = grow(cache.work, D * n * G + n * DH + 2 * H + n * F + G + std::max(F, DH) + DH);
  BackwardWork<T> w;
  w.dg = base;
  w.dh_in = w.dg + D * n * G;
  w.dh_rec = w.dh_in + n * DH;
  w.dc = w.dh_rec + H;
  T* xin = w.dc + H;                   // (T, F) layer-0 input in T
  w.db = xin + n * F;
  w.row = w.db + G;
  w.dq = w.row + std::max(F, DH);
  convert_input(xin, x, n * F);

  head_backward(layout, params, cache, d_out, grad, w.dq, w.dh_in);
  for (int64_t l = L - 1; l >= 0; --l) {
    const size_t li = static_cast<size_t>(l);
    const int64_t in = l == 0 ? F : DH;
    const T* input = l == 0 ? xin : (cache.between_dropout ? cache.dropped[li - 1] : cache.h[li - 1]).data();
    for (int64_t d = 0; d < D; ++d) {
      T* dg = w.dg + d * n * G;
      direction_bptt(layout, params, cache, l, d, w, dg);
      direction_weight_grad(layout, cache, l, d, input, in, w, dg, grad);
    }
    // This layer's input gradient (both directions read the same input) is the layer below's dh_in, through its
    // dropout mask; dh_in is no longer read, so it is reused.
    if (l > 0) {
      std::fill(w.dh_in, w.dh_in + n * DH, T(0));
      for (int64_t d = 0; d < D; ++d) {
        const T* w_ih = params + layout.w_ih(l, d).offset;   // (4H, in)
        for (int64_t t = 0; t < n; ++t) gemv_rows(w.dh_in + t * DH, w_ih, in, w.dg + d * n * G + t * G, 1, G, in);
      }
      if (cache.between_dropout) {
        const T* keep = cache.keep[li - 1].data();
        for (int64_t i = 0; i < n * DH; ++i) w.dh_in[i] *= keep[i];
      }
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
  template const T* lstm_forward<T>(const ParamLayout&, const T*, const float*, int64_t, LstmCache<T>&,        \
                                    const DropoutDraw&);                                                     \
  template void lstm_backward<T>(const ParamLayout&, const T*, const float*, const LstmCache<T>&, const T*, \
                                 T*);                                                                       \
  template T loss_and_grad<T>(Task, const T*, int64_t, int32_t, const float*, T*);                          \
  template int32_t argmax<T>(const T*, int64_t);

RAGTRAIN_INSTANTIATE(float)
RAGTRAIN_INSTANTIATE(double)

#undef RAGTRAIN_INSTANTIATE

}  // namespace ragtrain
