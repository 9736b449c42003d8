// Schedule properties: coverage, reshuffling, split independence, uneven ends, determinism (no MPI needed).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "ragtrain/core/rng.hpp"
#include "ragtrain/schedule/schedule.hpp"

using namespace ragtrain;

namespace {

// Lengths uniform in [lo, hi], deterministic.
std::vector<int64_t> uniform_lengths(int64_t n, int64_t lo, int64_t hi, uint64_t seed) {
  Rng rng(seed, 77);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = lo + static_cast<int64_t>(rng.below(static_cast<uint64_t>(hi - lo + 1)));
  return v;
}

Schedule make(ScheduleKind kind, int64_t n, int64_t p, int64_t k, uint64_t seed) {
  return Schedule(uniform_lengths(n, 1, 200, 5), p, k, seed, kind);
}

const ScheduleKind kKinds[] = {ScheduleKind::Random, ScheduleKind::Balanced};

// Every rank's view of one epoch, built in one process.
std::vector<int64_t> visited(const Schedule& s, int64_t epoch, int64_t world) {
  std::vector<int64_t> seen;
  const Schedule::Epoch e = s.epoch(epoch);
  for (int64_t step = 0; step < s.steps_per_epoch(); ++step)
    for (int64_t r = 0; r < world; ++r)
      for (int64_t i : e.rank_batch(step, r))
        if (i >= 0) seen.push_back(i);
  return seen;
}

}  // namespace

TEST(Schedule, EverySequenceOncePerEpoch) {
  for (ScheduleKind kind : kKinds)
  for (int64_t n : {1, 7, 10, 97, 1000})
    for (int64_t p : {1, 2, 3, 4, 8})
      for (int64_t k : {1, 3}) {
        const Schedule s = make(kind, n, p, k, 42);
        for (int64_t epoch : {0, 1, 5}) {
          std::vector<int64_t> seen = visited(s, epoch, p);
          std::sort(seen.begin(), seen.end());
          ASSERT_EQ(static_cast<int64_t>(seen.size()), n) << "n=" << n << " p=" << p << " k=" << k;
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)], i);
        }
      }
}

TEST(Schedule, RankOnlyTrainsOnItsOwnShard) {
  for (ScheduleKind kind : kKinds) {
  const int64_t n = 103, p = 4, k = 2;
  const Schedule s = make(kind, n, p, k, 3);
  std::set<int64_t> all;
  for (int64_t r = 0; r < p; ++r) {
    const std::vector<int64_t> own = s.rank_sequences(r);
    const std::set<int64_t> mine(own.begin(), own.end());
    ASSERT_EQ(mine.size(), own.size()) << "duplicates in rank " << r;
    for (int64_t i : own) ASSERT_TRUE(all.insert(i).second) << "sequence " << i << " owned twice";
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      const Schedule::Epoch e = s.epoch(epoch);
      for (int64_t step = 0; step < s.steps_per_epoch(); ++step)
        for (int64_t i : e.rank_batch(step, r)) {
          if (i >= 0) {
            ASSERT_TRUE(mine.count(i)) << "rank " << r << " scheduled " << i << " it does not own";
          }
        }
    }
  }
  EXPECT_EQ(static_cast<int64_t>(all.size()), n);
  }
}

TEST(Schedule, ReshuffledEveryEpochAndDeterministic) {
  for (ScheduleKind kind : kKinds) {
    const Schedule a = make(kind, 500, 4, 1, 7), b = make(kind, 500, 4, 1, 7), c = make(kind, 500, 4, 1, 8);
    EXPECT_EQ(visited(a, 0, 4), visited(b, 0, 4));
    EXPECT_EQ(visited(a, 3, 4), visited(b, 3, 4));
    EXPECT_NE(visited(a, 0, 4), visited(a, 1, 4));
    EXPECT_NE(visited(a, 0, 4), visited(c, 0, 4));
  }
}

// Balanced steps also change composition between epochs (shuffles inside length buckets), not only order.
TEST(Schedule, BalancedBatchesChangeBetweenEpochs) {
  const Schedule s(uniform_lengths(4000, 60, 130, 1), 8, 1, 3, ScheduleKind::Balanced);
  auto batches = [&](int64_t e) {
    std::set<std::vector<int64_t>> out;
    const Schedule::Epoch ep = s.epoch(e);
    for (int64_t step = 0; step < s.steps_per_epoch(); ++step) {
      std::vector<int64_t> b = ep.global_batch(step);
      std::sort(b.begin(), b.end());
      out.insert(b);
    }
    return out;
  };
  const auto e0 = batches(0), e1 = batches(1);
  std::vector<std::vector<int64_t>> common;
  std::set_intersection(e0.begin(), e0.end(), e1.begin(), e1.end(), std::back_inserter(common));
  EXPECT_LT(common.size(), e0.size() / 10) << "most global batches repeat across epochs";
}

// The property the balanced schedule exists for: for U[60,130] on 8 ranks the random schedule idles ~21% of
// every step, the balanced one under 2% — while both visit the same sequences.
TEST(Schedule, BalancedRemovesLengthImbalance) {
  const std::vector<int64_t> lengths = uniform_lengths(8000, 60, 130, 2);
  for (int64_t k : {1, 4}) {
    const Schedule bal(lengths, 8, k, 1, ScheduleKind::Balanced), rnd(lengths, 8, k, 1, ScheduleKind::Random);
    const double b = mean_imbalance(bal, lengths, 2), r = mean_imbalance(rnd, lengths, 2);
    EXPECT_LT(b, 0.02) << "K=" << k;
    EXPECT_GT(r, k == 1 ? 0.15 : 0.05) << "K=" << k;
  }
}

TEST(Schedule, ImbalanceOfAStep) {
  // Two ranks, lengths 10 and 30: the average rank works 20 of the slowest's 30 -> 1/3 idle.
  const std::vector<int64_t> lengths = {10, 30};
  const Schedule s(lengths, 2, 1, 1, ScheduleKind::Random);
  EXPECT_NEAR(step_imbalance(s.epoch(0), 0, s, lengths), 1.0 / 3.0, 1e-12);
  const std::vector<int64_t> same = {7, 7};
  const Schedule t(same, 2, 1, 1, ScheduleKind::Balanced);
  EXPECT_EQ(step_imbalance(t.epoch(0), 0, t, same), 0.0);
}

TEST(Schedule, GlobalBatchesDoNotDependOnTheSplit) {
  // G = 12 split as 1x12, 2x6, 3x4, 4x3, 6x2, 12x1: the same sequences in every global step.
  for (ScheduleKind kind : kKinds) {
  const int64_t n = 157;
  const Schedule ref = make(kind, n, 1, 12, 11);
  for (auto [p, k] : std::vector<std::pair<int64_t, int64_t>>{{2, 6}, {3, 4}, {4, 3}, {6, 2}, {12, 1}}) {
    const Schedule s = make(kind, n, p, k, 11);
    ASSERT_EQ(s.steps_per_epoch(), ref.steps_per_epoch());
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      const Schedule::Epoch e = s.epoch(epoch), r = ref.epoch(epoch);
      for (int64_t step = 0; step < s.steps_per_epoch(); ++step) {
        std::vector<int64_t> got;
        for (int64_t rank = 0; rank < p; ++rank)
          for (int64_t i : e.rank_batch(step, rank)) got.push_back(i);
        ASSERT_EQ(got, r.global_batch(step)) << p << "x" << k << " epoch " << epoch << " step " << step;
      }
    }
  }
  }
}

TEST(Schedule, UnevenLastStepHasTheRemainder) {
  for (ScheduleKind kind : kKinds) {
  const int64_t n = 10, p = 4;
  const Schedule s = make(kind, n, p, 1, 5);
  ASSERT_EQ(s.steps_per_epoch(), 3);
  const Schedule::Epoch e = s.epoch(0);
  for (int64_t step = 0; step < 3; ++step) {
    int64_t count = 0;
    for (int64_t i : e.global_batch(step)) count += i >= 0;
    EXPECT_EQ(count, step < 2 ? 4 : 2) << "step " << step;
  }
  // The last step's empty slots belong to the highest ranks: ranks 2 and 3 have nothing.
  EXPECT_GE(e.rank_batch(2, 0)[0], 0);
  EXPECT_GE(e.rank_batch(2, 1)[0], 0);
  EXPECT_EQ(e.rank_batch(2, 2)[0], -1);
  EXPECT_EQ(e.rank_batch(2, 3)[0], -1);
  }
}

TEST(Schedule, FewerSequencesThanSlots) {
  for (ScheduleKind kind : kKinds) {
  const Schedule s = make(kind, 3, 4, 2, 1);
  EXPECT_EQ(s.steps_per_epoch(), 1);
  std::vector<int64_t> seen = visited(s, 0, 4);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(s.rank_sequences(3).empty());
  }
}

TEST(Schedule, BlockRangeCoversInOrder) {
  for (int64_t n : {0, 1, 5, 17})
    for (int64_t p : {1, 2, 3, 8}) {
      int64_t next = 0;
      for (int64_t r = 0; r < p; ++r) {
        const Range b = block_range(n, p, r);
        EXPECT_EQ(b.begin, next);
        EXPECT_LE(b.end - b.begin, n / p + 1);
        next = b.end;
      }
      EXPECT_EQ(next, n);
    }
}
