// Schedule properties: coverage, reshuffling, split independence, uneven ends, determinism (no MPI needed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "ragtrain/core/rng.hpp"
#include "ragtrain/schedule/schedule.hpp"
#include "ragtrain/schedule/schedule_stats.hpp"

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

namespace {

// Lengths like JapaneseVowels' 270 training series: integers 7..26, most between 10 and 20.
std::vector<int64_t> vowel_like_lengths() {
  const int64_t counts[] = {0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 10, 18, 22, 21, 22, 41, 28, 27, 22, 13, 8, 14, 5, 11, 2, 2, 1};
  std::vector<int64_t> v;
  for (int64_t len = 0; len < 27; ++len)
    for (int64_t i = 0; i < counts[len]; ++i) v.push_back(len);
  Rng rng(4, 4);
  shuffle(v, rng);
  return v;
}

// The share of global batches met again in the next epoch, by brute force over every step of both epochs.
double repeats_by_hand(const Schedule& s, int64_t e) {
  auto sets = [&](int64_t epoch) {
    std::vector<std::set<int64_t>> out;
    const Schedule::Epoch ep = s.epoch(epoch);
    for (int64_t step = 0; step < s.steps_per_epoch(); ++step) {
      std::set<int64_t> b;
      for (int64_t i : ep.global_batch(step))
        if (i >= 0) b.insert(i);
      if (b.size() >= 2) out.push_back(b);
    }
    return out;
  };
  const auto before = sets(e - 1), now = sets(e);
  int64_t met = 0;
  for (const auto& b : now) met += std::find(before.begin(), before.end(), b) != before.end() ? 1 : 0;
  return static_cast<double>(met) / static_cast<double>(now.size());
}

}  // namespace

TEST(Schedule, BatchRepeatFractionCountsSetsMetAgain) {
  for (ScheduleKind kind : kKinds)
    for (auto [n, p, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{6, 2, 1}, {9, 1, 2}, {40, 2, 2}, {31, 3, 1}}) {
      const Schedule s(uniform_lengths(n, 5, 8, 9), p, k, 2, kind);
      for (int64_t e = 1; e < 6; ++e) {
        EXPECT_DOUBLE_EQ(batch_repeat_fraction(s, e), repeats_by_hand(s, e)) << n << " " << p << "x" << k << " e" << e;
        // From orders the caller holds (the trainer's, built while the GPU runs a step): the same value.
        EXPECT_DOUBLE_EQ(batch_repeat_fraction(s, s.epoch(e - 1), s.epoch(e)), repeats_by_hand(s, e));
      }
      EXPECT_TRUE(std::isnan(batch_repeat_fraction(s, 0)));
    }
  // Two sequences on two ranks: the one global batch is the same every epoch.
  const Schedule two(std::vector<int64_t>{3, 9}, 2, 1, 1, ScheduleKind::Balanced);
  EXPECT_EQ(batch_repeat_fraction(two, 1), 1.0);
  // A global batch of one sequence has no partners to change: undefined.
  const Schedule one(uniform_lengths(10, 1, 9, 1), 1, 1, 1, ScheduleKind::Balanced);
  EXPECT_TRUE(std::isnan(batch_repeat_fraction(one, 1)));
}

// Issue 13 part 4: the length-sorted deal left most global batches the same sequences every epoch (69 of 125 on
// 1,000 `gen` sequences, all on small files). Now at most 5% may repeat, for the splits people use, on uniform
// lengths, on JapaneseVowels-like lengths and where every length is distinct (the hardest case: no ties to mix).
TEST(Schedule, BalancedBatchesRarelyRepeatBetweenEpochs) {
  std::vector<int64_t> distinct(1000);
  for (size_t i = 0; i < distinct.size(); ++i) distinct[i] = 100 + static_cast<int64_t>(i) * 3;
  Rng rng(8, 8);
  shuffle(distinct, rng);
  const std::vector<std::pair<const char*, std::vector<int64_t>>> sets = {
      {"uniform", uniform_lengths(1000, 60, 130, 1)}, {"vowels", vowel_like_lengths()}, {"distinct", distinct}};
  for (const auto& [name, lengths] : sets)
    for (auto [p, k] : std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {1, 2}, {3, 1}, {4, 1}, {2, 2}, {8, 1},
                                                               {2, 4}, {1, 8}, {4, 4}, {16, 1}, {8, 4}, {64, 1}}) {
      const Schedule s(lengths, p, k, 3, ScheduleKind::Balanced);
      double sum = 0;
      const int64_t epochs = 6;
      for (int64_t e = 1; e < epochs; ++e) sum += batch_repeat_fraction(s, e);
      EXPECT_LE(sum / (epochs - 1), 0.05) << name << " " << p << "x" << k;
    }
}

// The short last step was always the N mod G longest sequences; now it is drawn anew every epoch, and over the
// epochs every sequence of the longer columns gets into it about equally often.
TEST(Schedule, BalancedLastStepIsRandom) {
  const std::vector<int64_t> lengths = uniform_lengths(1003, 60, 130, 6);
  const Schedule s(lengths, 4, 2, 5, ScheduleKind::Balanced);   // G = 8: 125 full steps, 3 sequences in the last
  const int64_t last = s.steps_per_epoch() - 1;
  std::set<int64_t> seen;
  int64_t changed = 0, longest = 0;
  std::vector<int64_t> before;
  for (int64_t e = 0; e < 40; ++e) {
    std::vector<int64_t> b = s.epoch(e).global_batch(last);
    b.erase(std::remove(b.begin(), b.end(), int64_t{-1}), b.end());
    ASSERT_EQ(b.size(), 3u);
    for (int64_t i : b) {
      seen.insert(i);
      longest += lengths[static_cast<size_t>(i)] >= 129;
    }
    changed += b != before;
    before = b;
  }
  EXPECT_GE(changed, 38);                              // a new last step (nearly) every epoch
  EXPECT_GE(seen.size(), 90u);                         // 40 draws of 3 among the 3 x 126 sequences of columns 0-2
  EXPECT_LE(longest, 20);                              // not the longest ones (~3% of U[60,130] are >= 129)
}

// K sequences of a rank run as one call padded to the longest: the balanced schedule keeps them within a few
// percent of each other, the random one does not.
TEST(Schedule, BalancedKeepsPaddingSmall) {
  const std::vector<int64_t> lengths = uniform_lengths(25600, 60, 130, 3);
  for (auto [p, k] : std::vector<std::pair<int64_t, int64_t>>{{8, 32}, {1, 32}, {2, 128}}) {
    const Schedule bal(lengths, p, k, 1, ScheduleKind::Balanced), rnd(lengths, p, k, 1, ScheduleKind::Random);
    const ScheduleStats b = measure_schedule(bal, lengths, 2), r = measure_schedule(rnd, lengths, 2);
    EXPECT_LT(b.padding, 0.03) << p << "x" << k;
    EXPECT_GT(r.padding, 0.2) << p << "x" << k;
    EXPECT_LT(b.imbalance, 0.02) << p << "x" << k;
  }
}

// Lengths lognormal(median, sigma), deterministic: the heavy tail where one row of sorted lengths spans 4x-13x.
std::vector<int64_t> lognormal_lengths(int64_t n, double median, double sigma, uint64_t seed) {
  Rng rng(seed, 78);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& x : v) {
    const double u1 = std::max(rng.uniform(), 1e-300), u2 = rng.uniform();
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    x = std::max<int64_t>(1, std::llround(median * std::exp(sigma * z)));
  }
  return v;
}

// Issue 13 part 4 on a heavy tail with few steps (100 per epoch): dealing the rows K neighbouring lengths per rank
// left the rank holding a tail row's longest K far behind (2.04% imbalance at 64 x 32); the widest rows are now
// dealt in golden-ratio order, which keeps both bounds at K > 1 — and keeps them for every split of the same G.
TEST(Schedule, BalancedHeavyTailMeetsBothBoundsAtKAboveOne) {
  for (auto [p, k] : std::vector<std::pair<int64_t, int64_t>>{{8, 4}, {64, 4}, {8, 32}, {64, 32}}) {
    const std::vector<int64_t> lengths = lognormal_lengths(p * k * 100, 100, 0.6, 9);
    const Schedule s(lengths, p, k, 1, ScheduleKind::Balanced);
    const ScheduleStats b = measure_schedule(s, lengths, 2);
    EXPECT_LT(b.imbalance, 0.02) << p << "x" << k;
    EXPECT_LT(b.padding, 0.03) << p << "x" << k;
    EXPECT_LE(b.repeat, 0.05) << p << "x" << k;
  }
  const std::vector<int64_t> lengths = lognormal_lengths(96 * 40 + 17, 100, 0.6, 10);
  const Schedule one(lengths, 1, 96, 4, ScheduleKind::Balanced);
  for (auto [p, k] : std::vector<std::pair<int64_t, int64_t>>{{3, 32}, {12, 8}, {96, 1}}) {
    const Schedule s(lengths, p, k, 4, ScheduleKind::Balanced);
    for (int64_t epoch = 0; epoch < 2; ++epoch)
      for (int64_t step = 0; step < s.steps_per_epoch(); ++step)
        ASSERT_EQ(s.epoch(epoch).global_batch(step), one.epoch(epoch).global_batch(step)) << p << "x" << k;
  }
}

// K = 1 cannot go below the sorted deal: computed by hand for lengths 1..6 on 2 ranks (rows {1,2}, {3,4}, {5,6}:
// 1/4, 1/8, 1/12 idle) and with a partial last step (5 on 2 ranks: {5, idle} counts 1/2).
TEST(Schedule, SortedDealImbalanceByHand) {
  EXPECT_NEAR(sorted_deal_imbalance({6, 1, 4, 3, 2, 5}, 2), (0.25 + 0.125 + 1.0 / 12.0) / 3.0, 1e-12);
  EXPECT_NEAR(sorted_deal_imbalance({5, 1, 2}, 2), (0.25 + 0.5) / 2.0, 1e-12);
  const std::vector<int64_t> lengths = lognormal_lengths(6400, 100, 0.6, 11);
  const Schedule s(lengths, 64, 1, 1, ScheduleKind::Balanced);
  const double floor = sorted_deal_imbalance(lengths, 64), got = mean_imbalance(s, lengths, 2);
  EXPECT_GE(got, floor - 0.002);   // the mixed schedule pays a little for new partners, never much less
  EXPECT_LT(got, floor + 0.005);
}

TEST(Schedule, PaddingOfAStep) {
  // One rank, K = 2, lengths 10 and 30: padded to 30 each, 40 of 60 timesteps real.
  const std::vector<int64_t> lengths = {10, 30};
  const Schedule s(lengths, 1, 2, 1, ScheduleKind::Random);
  const Padding p = step_padding(s.epoch(0), 0, s, lengths);
  EXPECT_EQ(p.padded, 60);
  EXPECT_EQ(p.real, 40);
  EXPECT_NEAR(p.fraction(), 1.0 / 3.0, 1e-12);
}

TEST(Schedule, MixingWindowShrinksWithMoreColumns) {
  EXPECT_NEAR(Schedule::mixing_window(1), 64.32, 1e-6);   // one column must spread over ~64 rows: 1/64
  double before = Schedule::mixing_window(1);
  for (int64_t c : {2, 3, 7, 64, 1023}) {
    const double w = Schedule::mixing_window(c);
    EXPECT_LT(w, before) << c;
    EXPECT_GT(w, 1.0) << c;
    before = w;
  }
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

// Where class is a function of length, the balanced schedule's equal-length steps hold fewer classes than
// random ones; where class is independent of length, both hold about as many (what `simulate` reports).
TEST(Schedule, ClassesPerBatchFollowLengthWhereClassDoes) {
  const std::vector<int64_t> lengths = uniform_lengths(2000, 10, 209, 4);
  std::vector<int32_t> by_length(lengths.size()), independent(lengths.size());
  Rng rng(9, 1);
  for (size_t i = 0; i < lengths.size(); ++i) {
    by_length[i] = static_cast<int32_t>((lengths[i] - 10) / 20);   // 10 classes, 20 lengths each
    independent[i] = static_cast<int32_t>(rng.below(10));
  }
  const Schedule bal(lengths, 4, 4, 1, ScheduleKind::Balanced), rnd(lengths, 4, 4, 1, ScheduleKind::Random);
  const double b = classes_per_batch(bal, by_length, 3), r = classes_per_batch(rnd, by_length, 3);
  EXPECT_LT(b, 2.5);   // 16 sequences of nearly one length: one or two classes
  EXPECT_GT(r, 7.0);   // 16 draws of 10 equally likely classes: 8.1 expected
  EXPECT_NEAR(classes_per_batch(bal, independent, 3), classes_per_batch(rnd, independent, 3), 0.5);
}

TEST(Schedule, ClassesPerBatchCountsByHand) {
  // One rank, K = 2, four sequences of classes 0 0 1 1: each batch holds 1 or 2 classes; the mean over the epoch
  // equals the count made from the batches themselves. One rank with K = 1 has no batch of two: NaN.
  const std::vector<int64_t> lengths = {5, 6, 7, 8};
  const std::vector<int32_t> labels = {0, 0, 1, 1};
  const Schedule s(lengths, 1, 2, 3, ScheduleKind::Random);
  double sum = 0;
  for (int64_t step = 0; step < s.steps_per_epoch(); ++step) {
    std::set<int32_t> c;
    for (int64_t i : s.epoch(0).global_batch(step)) c.insert(labels[static_cast<size_t>(i)]);
    sum += static_cast<double>(c.size());
  }
  EXPECT_DOUBLE_EQ(classes_per_batch(s, labels, 1), sum / static_cast<double>(s.steps_per_epoch()));
  EXPECT_TRUE(std::isnan(classes_per_batch(Schedule(lengths, 1, 1, 3, ScheduleKind::Random), labels, 1)));
}
