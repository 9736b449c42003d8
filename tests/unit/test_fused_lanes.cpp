// The one-block fused LSTM recurrence's lane maps (src/backend/cuda/fused_lanes.hpp), on the host: for every padded
// width the kernel instantiates, the four slices hold each column (forward) or row (backward) exactly once and are
// read with aligned float4 / float2 / float loads in the order slice_matvec issues them; the pitch covers the width
// and puts the backward's 8 float4 reads of a quarter warp (two units' slices of four gates) on distinct banks, and
// its tail reads (a float or float2 per lane) too.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "../../src/backend/cuda/fused_lanes.hpp"

namespace {

using ragtrain::ClusterMap16;
using ragtrain::ClusterMap4;
using ragtrain::LaneSlice;
using ragtrain::one_block_pitch;
using ragtrain::one_block_width;

template <int HR>
void check_slices() {
  using S = LaneSlice<HR>;
  static_assert(S::kS * 4 == HR && S::kTail <= 2, "a quad covers HR columns");
  std::vector<int> hits(HR, 0);
  for (int q = 0; q < 4; ++q) {
    for (int s = 0; s < S::kS; ++s) {
      const int c = S::col(q, s);
      ASSERT_GE(c, 0) << "HR " << HR << " lane " << q << " element " << s;
      ASSERT_LT(c, HR) << "HR " << HR << " lane " << q << " element " << s;
      ++hits[c];
    }
    // slice_matvec loads float4 i at 16 i + 4 q (elements 4 i .. 4 i + 3), then the tail at 16 kF4 + kTail q.
    for (int i = 0; i < S::kF4; ++i)
      for (int e = 0; e < 4; ++e) EXPECT_EQ(S::col(q, 4 * i + e), 16 * i + 4 * q + e) << "HR " << HR;
    for (int e = 0; e < S::kTail; ++e) EXPECT_EQ(S::col(q, 4 * S::kF4 + e), 16 * S::kF4 + S::kTail * q + e);
    if (S::kTail == 2) {
      EXPECT_EQ(S::col(q, 4 * S::kF4) % 2, 0) << "HR " << HR << ": float2 alignment";
    }
  }
  for (int c = 0; c < HR; ++c) EXPECT_EQ(hits[c], 1) << "HR " << HR << " column " << c;
}

TEST(FusedLanes, SlicesCoverEveryColumnOnce) {
  check_slices<32>();
  check_slices<48>();
  check_slices<52>();
  check_slices<56>();
  check_slices<64>();
}

// Every H of the one-block kernel: a width the kernel instantiates, >= H; a pitch >= the width, 8 (mod 32), with the
// backward's reads of a quarter warp — lanes (k, q) for the slices k of two units (k = 0, 1 or 2, 3) and gates
// q = 0..3 (pitch apart) — on 8 distinct groups of 4 banks for the float4 blocks, and a group of 16 lanes' tail reads
// (float k or float2 k of each gate) on distinct banks.
TEST(FusedLanes, WidthAndPitchForEveryOneBlockH) {
  const std::set<int> instantiated = {32, 48, 52, 56, 64};
  for (int H = 1; H <= 64; ++H) {
    const int w = one_block_width(H), hp = one_block_pitch(H, w);
    EXPECT_TRUE(instantiated.count(w)) << "H " << H << ": width " << w;
    EXPECT_GE(w, H);
    EXPECT_GE(hp, w) << "H " << H;
    EXPECT_EQ(hp % 32, 8) << "H " << H;
    for (int k0 = 0; k0 < 4; k0 += 2) {
      std::set<int> groups;
      for (int q = 0; q < 4; ++q)
        for (int k = k0; k < k0 + 2; ++k) groups.insert(((q * hp + 4 * k) % 32) / 4);
      EXPECT_EQ(groups.size(), 8u) << "H " << H << ": bank conflict in the backward's float4 loads";
    }
    const int tail = (w % 16) / 4;   // floats a slice takes from the tail
    if (tail > 0) {
      std::set<int> banks;
      for (int q = 0; q < 4; ++q)
        for (int k = 0; k < 4; ++k)
          for (int e = 0; e < tail; ++e) banks.insert((q * hp + 16 * (w / 16) + tail * k + e) % 32);
      EXPECT_EQ(banks.size(), static_cast<size_t>(16 * tail)) << "H " << H << ": bank conflict in the tail";
    }
  }
  EXPECT_EQ(one_block_width(65), 0);   // the cluster variant
  EXPECT_EQ(one_block_pitch(50, 52), 72);
}

// The cluster variant's map (both shapes): every unit on 16 lanes of one block; each part's forward columns are the
// units of that part, each once, at the shared-memory slot the senders store it to (so a lane's register k meets
// column k of its part); the two units of a warp are neighbouring slots of one 8-byte store; every block of the
// cluster gets each vector from exactly one lane of a unit; the backward's rows cover every unit once per gate; and
// the four parts' float4 reads of a quarter warp fall on distinct banks.
template <class M, int CL, int HMAX>
void check_cluster_map() {
  std::vector<int> lanes(HMAX, 0);
  for (int rank = 0; rank < CL; ++rank)
    for (int tid = 0; tid < M::kThreads; ++tid) ++lanes[static_cast<size_t>(M::unit(rank, tid))];
  for (int j = 0; j < HMAX; ++j) EXPECT_EQ(lanes[static_cast<size_t>(j)], 16) << "CL " << CL << " unit " << j;
  for (int p = 0; p < 4; ++p) {
    std::vector<int> hits(HMAX, 0);
    for (int k = 0; k < M::kCols; ++k) {
      const int col = M::fwd_col(p, k);
      ASSERT_GE(col, 0);
      ASSERT_LT(col, HMAX);
      EXPECT_EQ(col % 4, p) << "CL " << CL << ": part " << p << " holds column " << col;
      EXPECT_EQ(M::h_slot(col), M::kPart * p + k) << "CL " << CL << ": part " << p << " register " << k;
      ++hits[static_cast<size_t>(col)];
    }
    for (int j = p; j < HMAX; j += 4) EXPECT_EQ(hits[static_cast<size_t>(j)], 1) << "CL " << CL << " column " << j;
  }
  for (int rank = 0; rank < CL; ++rank)
    for (int w = 0; w < M::kThreads / 32; ++w) {
      const int j = M::unit(rank, 32 * w), j2 = M::unit(rank, 32 * w + 16);
      EXPECT_EQ(j2, j + CL);
      EXPECT_EQ(M::h_slot(j) % 2, 0) << "CL " << CL << ": the 8-byte store of units " << j << ", " << j2;
      EXPECT_EQ(M::h_slot(j2), M::h_slot(j) + 1) << "CL " << CL;
    }
  std::vector<int> blocks(CL, 0);
  for (int q = 0; q < 4; ++q)
    for (int p = 0; p < 4; ++p)
      if (M::sender(q, p) < CL) ++blocks[static_cast<size_t>(M::sender(q, p))];
  for (int b = 0; b < CL; ++b) EXPECT_EQ(blocks[static_cast<size_t>(b)], 1) << "CL " << CL << " block " << b;
  std::vector<int> rows(4 * HMAX, 0);
  for (int q = 0; q < 4; ++q)
    for (int p = 0; p < 4; ++p)
      for (int k = 0; k < M::kCols; ++k) {
        const int i = M::bwd_row(q, p, k);
        ASSERT_LT(i, HMAX);
        ++rows[static_cast<size_t>((k & 3) * HMAX + i)];
      }
  for (int r = 0; r < 4 * HMAX; ++r) EXPECT_EQ(rows[static_cast<size_t>(r)], 1) << "CL " << CL << " gate row " << r;
  std::set<int> groups;
  for (int p = 0; p < 4; ++p) groups.insert((M::kPart * p * 4 % 128) / 16);
  EXPECT_EQ(groups.size(), 4u) << "CL " << CL << ": the parts' float4 reads share banks";
  EXPECT_GE(8 * M::kVec, 8 * HMAX) << "CL " << CL << ": d gates (2 x HMAX x 4) within 8 vectors";
}

TEST(FusedLanes, ClusterMapsHoldEveryWeightOnce) {
  check_cluster_map<ClusterMap4, 4, 128>();
  check_cluster_map<ClusterMap16, 16, 256>();
  // The 4-block map is the one the kernel ran before it was parameterised: columns 4 k + p, slots 36 p + j / 4.
  for (int p = 0; p < 4; ++p)
    for (int k = 0; k < 32; ++k) EXPECT_EQ(ClusterMap4::fwd_col(p, k), 4 * k + p);
  for (int j = 0; j < 128; ++j) EXPECT_EQ(ClusterMap4::h_slot(j), 36 * (j & 3) + (j >> 2));
}

}  // namespace


// The grouped variant (fused_group.cu): each block's lanes hold every weight of its 64 gate rows (all 256 columns)
// exactly once in the forward's fragments, and again exactly once in the backward's; the mma tiles' rows are those
// of the m16n8k8 layout (row g or g + 8, column t or t + 4 of the tile); the forward's h sends reach every block with
// each of the four chunks of a block's units once.
TEST(FusedLanes, GroupMapHoldsEveryWeightOncePerPass) {
  using ragtrain::GroupMap;
  constexpr int kRows = GroupMap::kRows, kCols = GroupMap::kHmax;
  std::vector<int> fwd(kRows * kCols, 0), bwd(kRows * kCols, 0);
  for (int w = 0; w < GroupMap::kThreads / 32; ++w)
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i) {
        const int r = GroupMap::fwd_row(w, lane, i);
        EXPECT_EQ(r % 16, (lane >> 2) + 8 * (i & 1));
        for (int kt = 0; kt < GroupMap::kFwdTiles; ++kt) {
          const int k = GroupMap::fwd_col(w, lane, kt, i);
          EXPECT_EQ(k % 8, (lane & 3) + 4 * (i >> 1));
          ASSERT_TRUE(r >= 0 && r < kRows && k >= 0 && k < kCols) << r << " " << k;
          ++fwd[static_cast<size_t>(r * kCols + k)];
        }
        for (int mm = 0; mm < 2; ++mm) {
          const int col = GroupMap::bwd_col(w, lane, mm, i);
          EXPECT_EQ(col / GroupMap::kUnits, 2 * w + mm) << "warp " << w << " sends block 2 w + mm its units";
          for (int kt = 0; kt < GroupMap::kBwdTiles; ++kt) {
            const int r2 = GroupMap::bwd_row(lane, kt, i);
            ASSERT_TRUE(r2 >= 0 && r2 < kRows && col >= 0 && col < kCols) << r2 << " " << col;
            ++bwd[static_cast<size_t>(r2 * kCols + col)];
          }
        }
      }
  for (int e = 0; e < kRows * kCols; ++e) {
    EXPECT_EQ(fwd[static_cast<size_t>(e)], 1) << "forward row " << e / kCols << " column " << e % kCols;
    EXPECT_EQ(bwd[static_cast<size_t>(e)], 1) << "backward row " << e / kCols << " column " << e % kCols;
  }
  std::vector<int> sends(GroupMap::kCl * 4, 0);   // (destination block, chunk)
  for (int u = 0; u < 16; ++u)
    for (int i = 0; i < 4; ++i) ++sends[static_cast<size_t>(GroupMap::h_dest(u, i) * 4 + GroupMap::h_chunk(u))];
  for (int e = 0; e < GroupMap::kCl * 4; ++e) EXPECT_EQ(sends[static_cast<size_t>(e)], 1) << "block " << e / 4;
}

TEST(FusedLanes, WideMapHoldsEveryWeightOncePerPass) {
  using ragtrain::WideMap;
  constexpr int kRows = WideMap::kRows, kCols = WideMap::kHmax;
  std::vector<int> fwd(kRows * kCols, 0), bwd(kRows * kCols, 0);
  for (int w = 0; w < WideMap::kThreads / 32; ++w)
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i) {
        const int r = WideMap::fwd_row(w, lane, i);
        EXPECT_EQ(r % 16, (lane >> 2) + 8 * (i & 1));
        for (int kt = 0; kt < WideMap::kFwdTiles; ++kt) {
          const int k = WideMap::fwd_col(w, lane, kt, i);
          EXPECT_EQ(k % 8, (lane & 3) + 4 * (i >> 1));
          ASSERT_TRUE(r >= 0 && r < kRows && k >= 0 && k < kCols) << r << " " << k;
          ++fwd[static_cast<size_t>(r * kCols + k)];
        }
        for (int mm = 0; mm < WideMap::kBwdM; ++mm) {
          const int col = WideMap::bwd_col(w, lane, mm, i);
          EXPECT_EQ(col % 16, (lane >> 2) + 8 * (i & 1));
          EXPECT_EQ(col / (16 * WideMap::kBwdM), w) << "warp w sums the units 64 w ..";
          for (int kt = 0; kt < WideMap::kBwdTiles; ++kt) {
            const int r2 = WideMap::bwd_row(lane, kt, i);
            EXPECT_EQ(r2 % 8, (lane & 3) + 4 * (i >> 1));
            ASSERT_TRUE(r2 >= 0 && r2 < kRows && col >= 0 && col < kCols) << r2 << " " << col;
            ++bwd[static_cast<size_t>(r2 * kCols + col)];
          }
        }
      }
  for (int e = 0; e < kRows * kCols; ++e) {
    EXPECT_EQ(fwd[static_cast<size_t>(e)], 1) << "forward row " << e / kCols << " column " << e % kCols;
    EXPECT_EQ(bwd[static_cast<size_t>(e)], 1) << "backward row " << e / kCols << " column " << e % kCols;
  }
}
