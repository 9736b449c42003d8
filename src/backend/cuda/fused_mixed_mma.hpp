// The recurrent matvecs of the lock-step groups (fused_group.cu, fused_wide.cu) on the tensor cores to float
// accuracy: a weight held as a tf32 part and a bf16 pair, a product as one tf32 mma (hi hi) and one bf16 mma (the two
// cross terms). Included by those kernel files only.
#pragma once

#include <cstdint>

#include "fused_device.hpp"
#include "tf32_split.hpp"

namespace ragtrain {
namespace {

// d += A B, A 16 x 16 and B 16 x 8 bf16 (m16n8k16), float accumulation. Lane (g, t) holds A[g][2t, 2t + 1],
// A[g + 8][2t, 2t + 1], A[g][2t + 8, 2t + 9], A[g + 8][2t + 8, 2t + 9] (a register each, the lower column in the low
// half); B[2t, 2t + 1][g], B[2t + 8, 2t + 9][g]; D as the tf32 mma's.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t bf16x2(float lo_half, float hi_half) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi_half), "f"(lo_half));
  return r;
}

// A weight's two parts: hi, its tf32 rounding (for the tf32 product hi hi), and x, bf16 of (w - hi, hi) (the two cross
// products' weights, element by element of the tf32 fragment: see mma2x4).
__device__ __forceinline__ void weight_parts(float w, uint32_t& hi, uint32_t& x) {
  hi = tf32_round(w);
  x = bf16x2(w - bits_float(hi), bits_float(hi));
}

// d[q] += A[q] B[q] for 4 k tiles q of 8 (B's values b[q][0], b[q][4]) to float accuracy in two mma a tile: the tf32
// product hi hi, and the cross products lo hi + hi lo as one bf16 m16n8k16 whose 16 columns are the tile's 8, each
// twice: lane (g, t)'s bf16 columns 2t, 2t + 1 are tf32 column t's (w_lo, w_hi) against (h_hi, h_lo), and so on, so
// the lane holds the same weights in both forms. (The cross products' operands lose bits to bf16: the three products
// stay within 2^-18 of the float product, against 2^-19 for three tf32 products (the unit tests' worst over 121
// binades: 2^-18.1), at 2/3 of the mma: a bf16 m16n8k16 costs what a tf32 m16n8k8 does. On the H100 that made a
// step 3% faster at K = 128, 0.5% at K = 32: the mma are not what bounds the step.) Issued product by product over
// the 4 tiles, so that no mma waits on the one before (against three tf32 products tile by tile: within 1%).
// An operand of B (h, or d gates) as the mma take it: .x its tf32 rounding hi, .y bf16 of (hi, v - hi) for the cross
// products (the lane's bf16 columns 2t, 2t + 1 against its tf32 column t).
__device__ __forceinline__ uint2 operand_parts(float v) {
  const uint32_t hi = tf32_round(v);
  return make_uint2(hi, bf16x2(bits_float(hi), v - bits_float(hi)));
}

template <class A>
__device__ __forceinline__ void mma2x4(float (*d[4])[4], const A& ah, const A& ax, int kt0,
                                       const float* const (&b)[4]) {
  uint2 bp[4][2];
#pragma unroll
  for (int q = 0; q < 4; ++q)
#pragma unroll
    for (int r = 0; r < 2; ++r) bp[q][r] = operand_parts(b[q][4 * r]);
#pragma unroll
  for (int q = 0; q < 4; ++q) mma_bf16(*d[q], ax[kt0 + q], bp[q][0].y, bp[q][1].y);
#pragma unroll
  for (int q = 0; q < 4; ++q) mma_tf32(*d[q], ah[kt0 + q], bp[q][0].x, bp[q][1].x);
}

// W_hh[q H + j][k] of direction d, zero past H (the padding of the kernels' tiles).
__device__ __forceinline__ float w_hh(const Args& a, const FusedLayout& lay, int j, int q, int k) {
  return (j < a.H && k < a.H) ? __ldcg(a.params + lay.w_hh[q] + static_cast<int64_t>(j) * a.H + k) : 0.0f;
}

}  // namespace
}  // namespace ragtrain
