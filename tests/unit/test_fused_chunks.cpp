// The streaming weight-gradient GEMM's chunks of a sequence's timesteps (src/backend/cuda/fused_chunks.hpp), on the
// host, for every length up to 300: walked as the GEMM walks them (from the top chunk down), they cover [0, len)
// exactly once, each at most kWgL steps and the last one at most kWgLast; and the backward's publications, made as
// backward_recurrence makes them (at each group of 4 steps, steps >= t0 + 2 stored), never claim a step not yet
// stored, are chunk starts, and release each chunk at the first group after its steps are stored.
#include <gtest/gtest.h>

#include <vector>

#include "../../src/backend/cuda/fused_chunks.hpp"

namespace {

using namespace ragtrain;

TEST(FusedChunks, CoverEveryTimestepOnce) {
  for (int len = 1; len <= 300; ++len) {
    std::vector<int> hits(static_cast<size_t>(len), 0);
    int t0 = wg_chunk_floor(len - 1), chunks = 0, last_len = 0;
    for (;; t0 = wg_chunk_below(t0)) {
      const int end = wg_chunk_end(t0, len);
      ASSERT_LT(t0, end) << "len " << len << ": empty chunk at " << t0;
      ASSERT_LE(end - t0, kWgL) << "len " << len;
      EXPECT_EQ(wg_chunk_floor(t0), t0) << "len " << len << ": " << t0 << " is no chunk start";
      for (int t = t0; t < end; ++t) ++hits[static_cast<size_t>(t)];
      last_len = end - t0;
      ++chunks;
      ASSERT_LE(chunks, len) << "len " << len << ": the walk does not end";
      if (t0 == 0) break;
    }
    for (int t = 0; t < len; ++t) EXPECT_EQ(hits[static_cast<size_t>(t)], 1) << "len " << len << " step " << t;
    EXPECT_LE(last_len, kWgLast) << "len " << len << ": the chunk left after the backward";
  }
}

TEST(FusedChunks, PublicationsFollowTheStores) {
  for (int len = 1; len <= 300; ++len) {
    int published = len;   // as backward_recurrence: nothing yet
    std::vector<int> when(static_cast<size_t>(len) + 1, -1);   // the group (its t0) at which each chunk was released
    for (int t0 = len - 1; t0 >= 0; t0 -= 4) {
      const int stored = t0 + 2;   // every step >= t0 + 2 is in the scratch at this group
      const int v = wg_chunk_ceil(stored);
      EXPECT_GE(v, stored < len ? stored : len) << "len " << len << ": publishes an unstored step";
      EXPECT_EQ(wg_chunk_ceil(v), v) << "len " << len << ": " << v << " is no chunk boundary";
      if (v < published) {
        published = v;
        for (int c = v; c < len; ++c)
          if (when[static_cast<size_t>(c)] < 0) when[static_cast<size_t>(c)] = t0;
      }
    }
    // Each chunk start c > 0 is released at the first group whose stored steps include all of c's.
    for (int c = wg_chunk_floor(len - 1); c > 0; c = wg_chunk_below(c)) {
      int first = -1;
      for (int t0 = len - 1; t0 >= 0; t0 -= 4)
        if (t0 + 2 <= c) {
          first = t0;
          break;
        }
      if (first >= 0) {
        EXPECT_EQ(when[static_cast<size_t>(c)], first) << "len " << len << " chunk " << c;
      }
    }
  }
}

}  // namespace
