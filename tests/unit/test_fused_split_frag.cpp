// fused_split_frag.hpp, the split weight-gradient GEMM's lane map, on the host: every lane's fragments are gathered
// with the kernel's own function from a staged chunk, the m16n8k8 products are formed as the tensor cores define
// their fragments (PTX ISA, mma.m16n8k8 .tf32), and the sums are stored where the kernel stores them; the result
// must be the plain GEMM over the chunk, every output of the warp's 64 x 32 written once.
#include <gtest/gtest.h>

#include <vector>

#include "../../src/backend/cuda/fused_split_frag.hpp"

namespace {

using namespace ragtrain;

constexpr int kRows = 64, kCols = 32, kSteps = 16;
constexpr int kPa = kRows + 8, kPb = kCols + 8;   // the kernel's pitches: 8 (mod 32)

// One warp's sums over a chunk of kSteps timesteps, lane by lane as the kernel forms them; out[row][col], and how
// often each was written.
void warp_sums(const std::vector<float>& A, const std::vector<float>& Z, std::vector<float>& out,
               std::vector<int>& writes) {
  float acc[32][kSgMi][kSgNi][4] = {};
  for (int kk = 0; kk < kSteps / 8; ++kk) {
    float a[32][kSgMi][4], b[32][kSgNi][2];
    for (int lane = 0; lane < 32; ++lane) sg_fragments(A.data(), kPa, Z.data(), kPb, lane, kk, a[lane], b[lane]);
    for (int mi = 0; mi < kSgMi; ++mi)
      for (int ni = 0; ni < kSgNi; ++ni) {
        float At[16][8], Bt[8][8];   // the tiles as the fragments define them
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane / 4, t = lane % 4;
          At[g][t] = a[lane][mi][0];
          At[g + 8][t] = a[lane][mi][1];
          At[g][t + 4] = a[lane][mi][2];
          At[g + 8][t + 4] = a[lane][mi][3];
          Bt[t][g] = b[lane][ni][0];
          Bt[t + 4][g] = b[lane][ni][1];
        }
        for (int lane = 0; lane < 32; ++lane)
          for (int e = 0; e < 4; ++e) {
            const int r = lane / 4 + 8 * (e / 2), n = 2 * (lane % 4) + e % 2;
            for (int k = 0; k < 8; ++k) acc[lane][mi][ni][e] += At[r][k] * Bt[k][n];
          }
      }
  }
  out.assign(kRows * kCols, 0.0f);
  writes.assign(kRows * kCols, 0);
  for (int lane = 0; lane < 32; ++lane)
    for (int q = 0; q < 2; ++q)
      for (int ni = 0; ni < kSgNi; ++ni)
        for (int c = 0; c < 2; ++c) {   // the kernel's float4 stores
          const SgVec v = sg_out4(acc[lane], q, ni, c);
          const int col = sg_out_col(lane, ni, c);
          for (int j = 0; j < 4; ++j) {
            const int row = 32 * q + 4 * (lane / 4) + j;
            ASSERT_EQ(row, sg_out_row(lane, 2 * q + j / 2, c + 2 * (j % 2)));
            out[row * kCols + col] = v.v[j];
            ++writes[row * kCols + col];
          }
        }
}

TEST(FusedSplitFrag, AWarpsLaneMapSumsThePlainGemm) {
  // Small integers: every sum exact in float, in any order.
  std::vector<float> A(kSteps * kPa, -99.0f), Z(kSteps * kPb, -99.0f);   // -99 in the pitches' padding
  for (int k = 0; k < kSteps; ++k) {
    for (int m = 0; m < kRows; ++m) A[k * kPa + m] = static_cast<float>((7 * k + 3 * m) % 11 - 5);
    for (int n = 0; n < kCols; ++n) Z[k * kPb + n] = static_cast<float>((5 * k + 2 * n + (k * n) % 3) % 9 - 4);
  }
  std::vector<float> out;
  std::vector<int> writes;
  warp_sums(A, Z, out, writes);
  for (int m = 0; m < kRows; ++m)
    for (int n = 0; n < kCols; ++n) {
      float want = 0.0f;
      for (int k = 0; k < kSteps; ++k) want += A[k * kPa + m] * Z[k * kPb + n];
      ASSERT_EQ(writes[m * kCols + n], 1) << "row " << m << " column " << n;
      ASSERT_EQ(out[m * kCols + n], want) << "row " << m << " column " << n;
    }
}

TEST(FusedSplitFrag, AQuarterWarpsFloat4LoadsFallOnEveryBankOnce) {
  // A float4 load is served a quarter warp (8 lanes) at a time: their 8 x 4 words must be 32 distinct banks.
  for (int kk = 0; kk < 2; ++kk)
    for (int kh = 0; kh < 2; ++kh)
      for (int quarter = 0; quarter < 4; ++quarter)
        for (int q = 0; q < 3; ++q) {   // q 0, 1: A's two row groups; 2: Z
          bool bank[32] = {};
          for (int lane = 8 * quarter; lane < 8 * quarter + 8; ++lane) {
            const int g = lane / 4, t = lane % 4, k = 8 * kk + t + 4 * kh;
            const int word = q < 2 ? k * kPa + 32 * q + 4 * g : k * kPb + 4 * g;
            for (int j = 0; j < 4; ++j) {
              EXPECT_FALSE(bank[(word + j) % 32]) << "quarter " << quarter << " group " << q;
              bank[(word + j) % 32] = true;
            }
          }
        }
}

}  // namespace
