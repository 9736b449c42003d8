// The grouped recurrence's group sizes (src/backend/cuda/group_plan.hpp), on the host: the groups cover the sorted
// slots in order within the limits, and the plan's largest (first length x lock-step cost) is the smallest any cut
// into contiguous groups reaches (an exhaustive dynamic programme over small batches), so never above groups of one
// size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "../../src/backend/cuda/group_plan.hpp"

namespace {

using ragtrain::group_step_cost;
using ragtrain::plan_groups;

int64_t group_cost(const std::vector<int>& len, int first, int end) {
  return len[static_cast<size_t>(first)] * group_step_cost((end - first + 7) / 8);
}

// The largest group cost of a plan (group starts, then the end).
int64_t plan_cost(const std::vector<int>& len, const std::vector<int>& first) {
  int64_t worst = 0;
  for (size_t g = 0; g + 1 < first.size(); ++g) worst = std::max(worst, group_cost(len, first[g], first[g + 1]));
  return worst;
}

// The smallest largest cost over every cut of len into at most groups contiguous groups of at most n_max.
int64_t best_cost(const std::vector<int>& len, int groups, int n_max) {
  const int B = static_cast<int>(len.size());
  const int64_t inf = std::numeric_limits<int64_t>::max();
  // best[g][i]: the first i slots in g groups
  std::vector<std::vector<int64_t>> best(static_cast<size_t>(groups) + 1, std::vector<int64_t>(B + 1, inf));
  best[0][0] = 0;
  for (int g = 1; g <= groups; ++g)
    for (int i = 1; i <= B; ++i)
      for (int s = 1; s <= std::min(n_max, i); ++s) {
        const int64_t before = best[static_cast<size_t>(g - 1)][static_cast<size_t>(i - s)];
        if (before == inf) continue;
        const int64_t c = std::max(before, group_cost(len, i - s, i));
        auto& cell = best[static_cast<size_t>(g)][static_cast<size_t>(i)];
        cell = std::min(cell, c);
      }
  int64_t r = inf;
  for (int g = 1; g <= groups; ++g) r = std::min(r, best[static_cast<size_t>(g)][static_cast<size_t>(B)]);
  return r;
}

void expect_valid(const std::vector<int>& len, const std::vector<int>& first, int groups, int n_max) {
  ASSERT_GE(first.size(), 2u);
  EXPECT_LE(static_cast<int>(first.size()) - 1, groups);
  EXPECT_EQ(first.front(), 0);
  EXPECT_EQ(first.back(), static_cast<int>(len.size()));
  for (size_t g = 0; g + 1 < first.size(); ++g) {
    EXPECT_GT(first[g + 1], first[g]) << "group " << g << " is empty";
    EXPECT_LE(first[g + 1] - first[g], n_max) << "group " << g;
  }
}

std::vector<int> sorted_lengths(std::mt19937& rng, int B, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int> len(static_cast<size_t>(B));
  for (int& l : len) l = d(rng);
  std::sort(len.rbegin(), len.rend());
  return len;
}

TEST(GroupPlan, CoversTheSlotsInOrderAtTheSmallestLargestCost) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int groups = 1 + trial % 8;
    const int B = 1 + static_cast<int>(rng() % static_cast<uint32_t>(24 * groups));
    const std::vector<int> len = sorted_lengths(rng, B, 1 + trial % 5, 1 + trial % 5 + static_cast<int>(rng() % 200));
    const std::vector<int> first = plan_groups(len, groups, 24);
    expect_valid(len, first, groups, 24);
    EXPECT_EQ(plan_cost(len, first), best_cost(len, groups, 24)) << "trial " << trial << ", " << B << " slots";
  }
}

// The bench's batches (K = 128, lengths 60..130) on the 7 clusters an H100 runs at once: the longest group shrinks, so
// the largest cost falls below that of groups of 19 (three tiles each).
TEST(GroupPlan, BeatsGroupsOfOneSizeOnTheBenchBatches) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<int> len = sorted_lengths(rng, 128, 60, 130);
    const std::vector<int> first = plan_groups(len, 7, 24);
    expect_valid(len, first, 7, 24);
    std::vector<int> equal;
    for (int i = 0; i < 128; i += 19) equal.push_back(i);
    equal.push_back(128);
    EXPECT_LT(plan_cost(len, first), plan_cost(len, equal)) << "trial " << trial;
    EXPECT_LE(first[1] - first[0], 16) << "the longest members' group";
  }
}

TEST(GroupPlan, EqualLengthsNeedNoMoreTilesThanEqualGroups) {
  const std::vector<int> len(40, 100);
  const std::vector<int> first = plan_groups(len, 7, 24);
  expect_valid(len, first, 7, 24);
  EXPECT_EQ(plan_cost(len, first), 100 * group_step_cost(1));   // 40 slots in 5 groups of 8
}

TEST(GroupPlan, NoPlanForMoreSlotsThanTheClustersHoldAtOnce) {
  EXPECT_TRUE(plan_groups(std::vector<int>(169, 50), 7, 24).empty());
  EXPECT_TRUE(plan_groups({}, 7, 24).empty());
  EXPECT_TRUE(plan_groups({5, 4}, 0, 24).empty());
  EXPECT_FALSE(plan_groups(std::vector<int>(168, 50), 7, 24).empty());
}

}  // namespace
