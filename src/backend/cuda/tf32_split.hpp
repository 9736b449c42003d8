// The split of a float into two tf32 values for the tensor cores' products (and the mma itself) of the input projection
// (fused_projection.cu) and the split weight-gradient GEMM (fused_split_grad.cu). The cores multiply tf32 (1 sign,
// 8 exponent and 10 mantissa bits: a float whose low 13 bits are zero); x = hi + lo + e with |e| < 2^-21 |x|, and the
// three products lo hi + hi lo + hi hi of two such splits are within ~2^-20 of the float product (lo lo and the e
// terms are what they leave out), which keeps the fused kernel within the CPU reference's tolerance. Host and device:
// the unit tests check the bounds on the host.
#pragma once

#include <cstdint>
#include <cstring>

#include "host_device.hpp"

namespace ragtrain {

RAGTRAIN_HD uint32_t float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

RAGTRAIN_HD float bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// hi: x rounded to nearest tf32 (ties away from zero: add half of the dropped bits' weight, then mask), lo: x - hi
// (exact in float) truncated to tf32. Integer arithmetic on the bits, 4 instructions: cvt.rna.tf32.f32 is no single
// instruction on sm_90 (ncu's SASS: a test for infinity, a select and the masking around each), and with it the split
// GEMM ran no faster than on the CUDA cores (25.0 / 29.5 us against 25.5 / 30.1 at K = 128, H = 50 on the H200).
// Finite x only: within 2^-12 of FLT_MAX the rounding carries hi to infinity.
RAGTRAIN_HD uint32_t tf32_round(float x) { return (float_bits(x) + 0x1000u) & 0xffffe000u; }   // hi alone
RAGTRAIN_HD void tf32_split(float x, uint32_t& hi, uint32_t& lo) {
  hi = tf32_round(x);
  lo = float_bits(x - bits_float(hi)) & 0xffffe000u;
}

#ifdef __CUDACC__
// d += A (16 x 8) B (8 x 8) on the tensor cores, tf32 operands, float accumulation. Lane (g, t) = (lane / 4, lane % 4)
// holds A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4]; B[t][g], B[t + 4][g]; D[g][2t], D[g][2t + 1],
// D[g + 8][2t], D[g + 8][2t + 1].
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

}  // namespace ragtrain
