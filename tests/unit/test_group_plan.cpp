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

// The GEMM beside the backward: the groups of the largest tile count stay on the main stream, every other slot goes
// to the side once, in order, in as few ranges as adjacency allows; the main GEMM keeps every part, the side's takes
// as many as its blocks fit beside the long stage's clusters (two an SM), at least one, at most all.
TEST(GroupPlan, BesideSplitCoversEverySlotOnceAndFitsTheFreeSms) {
  std::mt19937 rng(13);
  int split = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int groups = 2 + trial % 6, parts = 2 + trial % 7, tiles_per_part = 1 + trial % 40;
    const int B = 17 + static_cast<int>(rng() % static_cast<uint32_t>(24 * groups - 16));
    const std::vector<int> len = sorted_lengths(rng, B, 1 + trial % 7, 1 + trial % 7 + static_cast<int>(rng() % 150));
    const std::vector<int> plan = plan_groups(len, groups, 24);
    const ragtrain::BesideSplit s = ragtrain::split_beside(plan, parts, 132, 16, tiles_per_part);
    int nt_max = 0, nt_min = 99, main_groups = 0;
    for (size_t g = 0; g + 1 < plan.size(); ++g) {
      nt_max = std::max(nt_max, (plan[g + 1] - plan[g] + 7) / 8);
      nt_min = std::min(nt_min, (plan[g + 1] - plan[g] + 7) / 8);
    }
    for (size_t g = 0; g + 1 < plan.size(); ++g) main_groups += (plan[g + 1] - plan[g] + 7) / 8 == nt_max;
    if (nt_min == nt_max) {
      EXPECT_EQ(s.main_parts, 0) << "trial " << trial << ": one tile count, nothing beside";
      EXPECT_TRUE(s.main.empty() && s.side.empty());
      continue;
    }
    ++split;
    EXPECT_EQ(s.nt_main, nt_max);
    std::vector<int> where(static_cast<size_t>(B), -1);   // 0 main, 1 side
    for (int side = 0; side < 2; ++side) {
      const auto& ranges = side ? s.side : s.main;
      EXPECT_LE(ranges.size(), 16u);
      for (size_t r = 0; r < ranges.size(); ++r) {
        EXPECT_LT(ranges[r].first, ranges[r].second);
        if (r > 0) {
          EXPECT_LT(ranges[r - 1].second, ranges[r].first) << "adjacent ranges left apart";
        }
        for (int b = ranges[r].first; b < ranges[r].second; ++b) {
          EXPECT_EQ(where[static_cast<size_t>(b)], -1) << "slot " << b << " twice";
          where[static_cast<size_t>(b)] = side;
        }
      }
    }
    for (size_t g = 0; g + 1 < plan.size(); ++g)
      for (int b = plan[g]; b < plan[g + 1]; ++b)
        EXPECT_EQ(where[static_cast<size_t>(b)], (plan[g + 1] - plan[g] + 7) / 8 < nt_max ? 1 : 0)
            << "trial " << trial << ", slot " << b;
    EXPECT_EQ(s.main_parts, parts);
    const int fit = 2 * (132 - 16 * main_groups) / tiles_per_part;
    EXPECT_EQ(s.side_parts, std::clamp(fit, 1, parts)) << "trial " << trial;
  }
  EXPECT_GT(split, 100) << "too few plans with two tile counts to test";
}

TEST(GroupPlan, NoBesideSplitWithoutAPlanOrParts) {
  EXPECT_EQ(ragtrain::split_beside({}, 8, 132, 16, 33).main_parts, 0);
  const std::vector<int> plan = {0, 3, 18};   // a 1-tile and a 2-tile group
  EXPECT_EQ(ragtrain::split_beside(plan, 1, 132, 16, 33).main_parts, 0);
  const ragtrain::BesideSplit s = ragtrain::split_beside(plan, 8, 132, 16, 33);   // H = 256's tiles on an H100
  EXPECT_EQ(s.nt_main, 2);
  ASSERT_EQ(s.side.size(), 1u);
  EXPECT_EQ(s.side[0], std::make_pair(0, 3));
  ASSERT_EQ(s.main.size(), 1u);
  EXPECT_EQ(s.main[0], std::make_pair(3, 18));
  EXPECT_EQ(s.main_parts, 8);
  EXPECT_EQ(s.side_parts, 7);   // 232 blocks fit beside one 16-SM cluster: 7 parts of 33
}

}  // namespace
