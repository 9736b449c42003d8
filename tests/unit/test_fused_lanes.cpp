// The one-block fused LSTM recurrence's lane maps (src/backend/cuda/fused_lanes.hpp), on the host: for every padded
// width the kernel instantiates, the four lanes of a quad hold each forward column exactly once and read it with
// aligned float4 / float2 / float loads in the order quad_matvec issues them; the two halves of an octet hold each
// backward row exactly once, in aligned float4 blocks, and whatever they read past the width lies below the pitch;
// the pitch puts the backward's 8 float4 reads of a quarter warp on distinct banks.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "../../src/backend/cuda/fused_lanes.hpp"

namespace {

using ragtrain::BwdHalf;
using ragtrain::FwdSlice;
using ragtrain::one_block_pitch;
using ragtrain::one_block_width;

template <int HR>
void check_forward() {
  using S = FwdSlice<HR>;
  static_assert(S::kS * 4 == HR && S::kTail <= 2, "a quad covers HR columns");
  std::vector<int> hits(HR, 0);
  for (int q = 0; q < 4; ++q) {
    for (int s = 0; s < S::kS; ++s) {
      const int c = S::col(q, s);
      ASSERT_GE(c, 0) << "HR " << HR << " lane " << q << " element " << s;
      ASSERT_LT(c, HR) << "HR " << HR << " lane " << q << " element " << s;
      ++hits[c];
    }
    // quad_matvec loads float4 i at 16 i + 4 q (elements 4 i .. 4 i + 3), then the tail at 16 kF4 + kTail q.
    for (int i = 0; i < S::kF4; ++i)
      for (int e = 0; e < 4; ++e) EXPECT_EQ(S::col(q, 4 * i + e), 16 * i + 4 * q + e) << "HR " << HR;
    for (int e = 0; e < S::kTail; ++e) EXPECT_EQ(S::col(q, 4 * S::kF4 + e), 16 * S::kF4 + S::kTail * q + e);
    if (S::kTail == 2) EXPECT_EQ(S::col(q, 4 * S::kF4) % 2, 0) << "HR " << HR << ": float2 alignment";
  }
  for (int c = 0; c < HR; ++c) EXPECT_EQ(hits[c], 1) << "HR " << HR << " column " << c;
}

template <int HR>
void check_backward() {
  using B = BwdHalf<HR>;
  const int span = 8 * B::kNB;   // rows the two halves read (>= HR; the rest is padding)
  EXPECT_GE(span, HR);
  EXPECT_LT(span - HR, 8) << "HR " << HR << ": at most one padded block a half";
  std::vector<int> hits(span, 0);
  for (int h = 0; h < 2; ++h) {
    for (int b = 0; b < B::kNB; ++b) {
      const int r0 = B::row(h, 4 * b);
      EXPECT_EQ(r0 % 4, 0) << "HR " << HR << ": float4 alignment";
      EXPECT_EQ(r0, 8 * b + 4 * h) << "HR " << HR << ": octet_matvec reads v + 8 b from row 4 h";
      for (int e = 0; e < 4; ++e) {
        EXPECT_EQ(B::row(h, 4 * b + e), r0 + e);
        ++hits[r0 + e];
      }
    }
  }
  for (int r = 0; r < span; ++r) EXPECT_EQ(hits[r], 1) << "HR " << HR << " row " << r;
}

TEST(FusedLanes, ForwardSlicesCoverEveryColumnOnce) {
  check_forward<32>();
  check_forward<48>();
  check_forward<52>();
  check_forward<56>();
  check_forward<64>();
}

TEST(FusedLanes, BackwardHalvesCoverEveryRowOnce) {
  check_backward<32>();
  check_backward<48>();
  check_backward<52>();
  check_backward<56>();
  check_backward<64>();
}

// Every H of the one-block kernel: a width the kernel instantiates, >= H; a pitch >= what the matvecs read (the
// width, and the backward's padded halves), 8 (mod 32), and a quarter warp's 8 float4 reads of the backward — gates
// q = 0..3 (pitch apart) x halves h = 0, 1 (16 bytes apart) — on 8 distinct groups of 4 banks.
TEST(FusedLanes, WidthAndPitchForEveryOneBlockH) {
  const std::set<int> instantiated = {32, 48, 52, 56, 64};
  for (int H = 1; H <= 64; ++H) {
    const int w = one_block_width(H), hp = one_block_pitch(H, w);
    EXPECT_TRUE(instantiated.count(w)) << "H " << H << ": width " << w;
    EXPECT_GE(w, H);
    EXPECT_GE(hp, w) << "H " << H;
    EXPECT_GE(hp, 8 * ((w + 7) / 8)) << "H " << H << ": the backward's padded halves";
    EXPECT_EQ(hp % 32, 8) << "H " << H;
    std::set<int> groups;
    for (int q = 0; q < 4; ++q)
      for (int h = 0; h < 2; ++h) groups.insert(((q * hp + 4 * h) % 32) / 4);
    EXPECT_EQ(groups.size(), 8u) << "H " << H << ": bank conflict in the backward's loads";
  }
  EXPECT_EQ(one_block_width(65), 0);   // the cluster variant
  EXPECT_EQ(one_block_pitch(50, 52), 72);
}

}  // namespace
