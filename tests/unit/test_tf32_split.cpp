// tf32_split (src/backend/cuda/tf32_split.hpp), the fused kernel's operands for the tensor cores, on the host: the
// parts are tf32 values, they sum to x within 2^-21 |x|, and three products of two splits stay within 2^-19 of the
// product (the bound the GPU's agreement tests with the CPU reference rely on), where the hi products alone do not;
// and the grouped recurrence's mix (a tf32 product and bf16 cross products) within 2^-18.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "../../src/backend/cuda/tf32_split.hpp"

namespace {

using ragtrain::bits_float;
using ragtrain::tf32_split;

double value(uint32_t bits) { return static_cast<double>(bits_float(bits)); }

// Floats over 121 binades, both signs (the GEMMs' operands, d gates, inputs and h, range widely).
std::vector<float> samples() {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-60, 60);
  std::vector<float> v;
  for (int i = 0; i < 100000; ++i) {
    const float x = std::ldexp(mantissa(gen), exponent(gen));
    v.push_back(i % 2 ? -x : x);
  }
  return v;
}

TEST(Tf32Split, PartsAreTf32AndSumToXWithin2ToTheMinus21) {
  for (const float x : samples()) {
    uint32_t hi = 0, lo = 0;
    tf32_split(x, hi, lo);
    ASSERT_EQ(hi & 0x1fffu, 0u) << x;
    ASSERT_EQ(lo & 0x1fffu, 0u) << x;
    const double err = std::fabs(static_cast<double>(x) - (value(hi) + value(lo)));
    ASSERT_LE(err, std::ldexp(std::fabs(static_cast<double>(x)), -21)) << x;
  }
}

TEST(Tf32Split, RoundsHiToNearestTiesAwayFromZero) {
  uint32_t hi = 0, lo = 0;
  tf32_split(1.0f + std::ldexp(1.0f, -11), hi, lo);   // halfway between 1 and 1 + 2^-10
  EXPECT_EQ(value(hi), 1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(value(lo), -std::ldexp(1.0, -11));
  tf32_split(-(1.0f + std::ldexp(1.0f, -11)), hi, lo);
  EXPECT_EQ(value(hi), -(1.0 + std::ldexp(1.0, -10)));
  tf32_split(1.0f + std::ldexp(1.0f, -12), hi, lo);    // below halfway
  EXPECT_EQ(value(hi), 1.0);
  EXPECT_EQ(value(lo), std::ldexp(1.0, -12));
  tf32_split(0.0f, hi, lo);
  EXPECT_EQ(value(hi), 0.0);
  EXPECT_EQ(value(lo), 0.0);
}

TEST(Tf32Split, ThreeProductsWithin2ToTheMinus19WhereTheHiProductIsNot) {
  const std::vector<float> v = samples();
  double worst3 = 0.0, worst1 = 0.0;
  for (size_t i = 0; i + 1 < v.size(); i += 2) {
    uint32_t hx = 0, lx = 0, hy = 0, ly = 0;
    tf32_split(v[i], hx, lx);
    tf32_split(v[i + 1], hy, ly);
    // tf32 x tf32 products are exact in double (and in float: 22 significant bits), as in the tensor cores
    const double xy = static_cast<double>(v[i]) * static_cast<double>(v[i + 1]);
    const double three = value(lx) * value(hy) + value(hx) * value(ly) + value(hx) * value(hy);
    worst3 = std::max(worst3, std::fabs(xy - three) / std::fabs(xy));
    worst1 = std::max(worst1, std::fabs(xy - value(hx) * value(hy)) / std::fabs(xy));
  }
  EXPECT_LE(worst3, std::ldexp(1.0, -19));
  EXPECT_GT(worst1, std::ldexp(1.0, -19));   // one tf32 product is ~2^-11 off: the bound above means something
}

// bf16 of x, rounded to nearest even (what cvt.rn.bf16x2.f32 does; finite x), as a float.
double bf16(float x) {
  uint32_t u = ragtrain::float_bits(x);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  return value(u);
}

// The grouped recurrence's products (fused_group.cu, mma2x4): the tf32 product hi hi and the cross products lo hi +
// hi lo as bf16 (w's lo the exact rest w - hi, h's likewise), each operand rounded to bf16. Within 2^-18 of the float
// product over these 121 binades (what doc/performance.md reports is the worst seen here), where hi hi alone is
// ~2^-11 off.
TEST(Tf32Split, TheGroupsMixedProductsWithin2ToTheMinus18) {
  const std::vector<float> v = samples();
  double worst = 0.0;
  for (size_t i = 0; i + 1 < v.size(); i += 2) {
    const uint32_t hw = ragtrain::tf32_round(v[i]), hh = ragtrain::tf32_round(v[i + 1]);
    const float rw = v[i] - bits_float(hw), rh = v[i + 1] - bits_float(hh);   // exact in float
    const double xy = static_cast<double>(v[i]) * static_cast<double>(v[i + 1]);
    const double mixed = value(hw) * value(hh) + bf16(rw) * bf16(bits_float(hh)) + bf16(bits_float(hw)) * bf16(rh);
    worst = std::max(worst, std::fabs(xy - mixed) / std::fabs(xy));
  }
  std::printf("[ split    ] the groups' mixed products: worst relative error 2^%.2f\n", std::log2(worst));
  EXPECT_LE(worst, std::ldexp(1.0, -18));
}

}  // namespace
