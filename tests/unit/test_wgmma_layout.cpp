// The swizzled K-major layout of the wgmma GEMM's operands (src/backend/cuda/wgmma_tf32.hpp), on the host: a
// permutation of each row's 32 floats within its own 128 bytes, the 128-byte swizzle's pattern (16-byte group q of
// row r at group q ^ r % 8), and the property the split pass's stores rely on: 8 adjacent rows' groups of one q fall
// on 8 distinct 16-byte bank groups (one conflict-free store phase).
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "../../src/backend/cuda/wgmma_tf32.hpp"

namespace {

using ragtrain::kSwRow;
using ragtrain::sw128_index;

TEST(WgmmaLayout, EachRowIsAPermutationOfItsOwn128Bytes) {
  for (int r = 0; r < 320; ++r) {
    std::set<int> seen;
    for (int k = 0; k < kSwRow; ++k) {
      const int i = sw128_index(r, k);
      ASSERT_GE(i, r * kSwRow) << r << " " << k;
      ASSERT_LT(i, (r + 1) * kSwRow) << r << " " << k;
      seen.insert(i);
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(kSwRow)) << "row " << r;
  }
}

TEST(WgmmaLayout, FollowsThe128ByteSwizzle) {
  // Byte address bits 4-6 (the 16-byte group within a 128-byte row) XOR bits 7-9 (the row within 8), 4-byte
  // elements kept in order within their group.
  for (int r = 0; r < 64; ++r)
    for (int k = 0; k < kSwRow; ++k) {
      const int logical = 4 * (r * kSwRow + k);
      const int swizzled = logical ^ (((logical >> 7) & 7) << 4);
      EXPECT_EQ(4 * sw128_index(r, k), swizzled) << r << " " << k;
    }
}

TEST(WgmmaLayout, EightAdjacentRowsStoreOnDistinctBankGroups) {
  for (int r0 = 0; r0 < 256; ++r0)
    for (int q = 0; q < kSwRow / 4; ++q) {
      std::set<int> groups;
      for (int r = r0; r < r0 + 8; ++r) groups.insert((sw128_index(r, 4 * q) / 4) % 8);
      EXPECT_EQ(groups.size(), 8u) << "rows " << r0 << "+8, group " << q;
    }
}

}  // namespace
