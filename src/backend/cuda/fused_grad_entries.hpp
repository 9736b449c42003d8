// Where a weight-gradient element (gate row m, column n of z = [x, h_{t-1}, 1]) goes in the fused buffer, and its
// read-add-write there: the weight-gradient GEMM (fused_weight_grad.cu) and the sums (fused_sums.cu) share them.
#pragma once

#include <cstdint>

#include "fused_device.hpp"
#include "fused_kernels.hpp"

namespace ragtrain {
namespace {

// The fused-buffer entries of direction d's gradient element (m, n): dW_ih (n < F), dW_hh (n < F + H), else both
// biases (second entry, else -1).
__device__ __forceinline__ void wg_entries(const Args& a, int d, int m, int n, int64_t* e1, int64_t* e2) {
  const int j = m >> 2, q = m & 3;
  const FusedLayout& lay = lay_of(a, d);
  *e2 = -1;
  if (n < a.F) {
    *e1 = lay.w_ih[q] + static_cast<int64_t>(j) * a.F + n;
  } else if (n < a.F + a.H) {
    *e1 = lay.w_hh[q] + static_cast<int64_t>(j) * a.H + (n - a.F);
  } else {
    *e1 = lay.b_ih[q] + j;
    *e2 = lay.b_hh[q] + j;
  }
}

// grads[entries of (m[u], n[u])] += v[u] for the U elements with ok[u]: every old value loaded first (one memory
// latency for all of them; a load after each store would wait one round trip per element, as they may alias).
// wg_load takes the entries and their old values, wg_store adds and stores: the streaming GEMM loads before its
// chunks, so no round trip is left after its last one.
template <int U>
struct WgOld {
  int64_t e1[U], e2[U];
  float o1[U], o2[U];
};
template <int U>
__device__ __forceinline__ void wg_load(const Args& a, int d, const int (&m)[U], const int (&n)[U],
                                        const bool (&ok)[U], WgOld<U>& w) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    w.e1[u] = w.e2[u] = -1;
    if (ok[u]) wg_entries(a, d, m[u], n[u], &w.e1[u], &w.e2[u]);
    w.o1[u] = w.e1[u] >= 0 ? a.grads[w.e1[u]] : 0.0f;
    w.o2[u] = w.e2[u] >= 0 ? a.grads[w.e2[u]] : 0.0f;
  }
}
template <int U>
__device__ __forceinline__ void wg_store(const Args& a, const WgOld<U>& w, const float (&v)[U]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (w.e1[u] >= 0) a.grads[w.e1[u]] = w.o1[u] + v[u];
    if (w.e2[u] >= 0) a.grads[w.e2[u]] = w.o2[u] + v[u];
  }
}
template <int U>
__device__ __forceinline__ void wg_add(const Args& a, int d, const int (&m)[U], const int (&n)[U],
                                       const bool (&ok)[U], const float (&v)[U]) {
  WgOld<U> w;
  wg_load(a, d, m, n, ok, w);
  wg_store(a, w, v);
}

}  // namespace
}  // namespace ragtrain
