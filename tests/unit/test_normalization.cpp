// --normalize: stable feature statistics (a large offset must not cancel the spread), the moments merged across
// parts as across ranks, per-series standardisation and its guard for constant features, the mode names.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <numeric>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/rng.hpp"
#include "ragtrain/data/normalization.hpp"
#include "ragtrain/data/ragged_data.hpp"

using namespace ragtrain;

namespace {

// F = 3: feature 0 is 30000 + N(0, 0.05) (the case), feature 1 is N(5, 2), feature 2 is constant 7.
// Lengths 1..50, so one-step sequences occur.
RaggedData offset_data(int64_t n, uint64_t seed) {
  RaggedData d;
  d.num_features = 3;
  d.num_outputs = 2;
  Rng rng(seed, 3);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = 1 + i % 50;
    for (int64_t t = 0; t < len; ++t) {
      d.features.push_back(static_cast<float>(30000.0 + 0.05 * rng.normal()));
      d.features.push_back(static_cast<float>(5.0 + 2.0 * rng.normal()));
      d.features.push_back(7.0f);
    }
    d.offsets.push_back(d.offsets.back() + len);
    d.labels.push_back(static_cast<int32_t>(i % 2));
  }
  return d;
}

std::vector<int64_t> all_indices(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Mean and population std of feature f over the rows [begin, end) of the shard, in long double, two passes.
std::pair<long double, long double> reference(const Shard& s, int64_t f, int64_t begin, int64_t end) {
  const int64_t F = s.num_features;
  long double sum = 0, sq = 0;
  for (int64_t t = begin; t < end; ++t) sum += s.features[static_cast<size_t>(t * F + f)];
  const long double mean = sum / static_cast<long double>(end - begin);
  for (int64_t t = begin; t < end; ++t) {
    const long double d = s.features[static_cast<size_t>(t * F + f)] - mean;
    sq += d * d;
  }
  return {mean, std::sqrt(sq / static_cast<long double>(end - begin))};
}

}  // namespace

// Issue 13: E[x^2] - mean^2 gave a feature of 30000 + N(0, 0.05) a std of 0.147 instead of 0.050.
TEST(Normalization, LargeOffsetKeepsItsSpread) {
  const Shard s = make_shard(offset_data(8000, 1), all_indices(8000));   // 204,000 timesteps
  const FeatureScaling sc = compute_scaling(s, MPI_COMM_SELF);
  const auto [m0, sd0] = reference(s, 0, 0, s.timesteps());
  EXPECT_NEAR(static_cast<double>(sd0), 0.05, 0.002);   // the data: float steps at 30000 are 0.002 apart
  EXPECT_NEAR(sc.std[0], static_cast<double>(sd0), 1e-6 * static_cast<double>(sd0));
  EXPECT_NEAR(sc.mean[0], static_cast<double>(m0), 30000 * 1e-7);
  const auto [m1, sd1] = reference(s, 1, 0, s.timesteps());
  EXPECT_NEAR(sc.std[1], static_cast<double>(sd1), 1e-6 * static_cast<double>(sd1));
  EXPECT_NEAR(sc.mean[1], static_cast<double>(m1), 1e-6);
  EXPECT_EQ(sc.std[2], 1.0f) << "a constant feature is only centred";
  EXPECT_EQ(sc.mean[2], 7.0f);

  // The formula it replaces fails on the same data (so this test would have caught it).
  double sum = 0, sumsq = 0;
  for (int64_t t = 0; t < s.timesteps(); ++t) {
    const double v = s.features[static_cast<size_t>(t * 3)];
    sum += v;
    sumsq += v * v;
  }
  const double n = static_cast<double>(s.timesteps()), naive = std::sqrt(std::max(0.0, sumsq / n - (sum / n) * (sum / n)));
  EXPECT_GT(std::fabs(naive - static_cast<double>(sd0)), 0.1 * static_cast<double>(sd0)) << naive;
}

// Ranks merge their moments with Chan's formula: any split, empty parts included, gives the whole's moments.
TEST(Normalization, MergedMomentsEqualTheWhole) {
  const RaggedData d = offset_data(300, 2);
  const FeatureMoments whole = FeatureMoments::of(make_shard(d, all_indices(300)));
  for (const std::vector<int64_t>& cuts : std::vector<std::vector<int64_t>>{{0, 300}, {0, 1, 300}, {0, 100, 100, 217, 300},
                                                                            {0, 37, 74, 111, 148, 185, 222, 259, 300}}) {
    FeatureMoments merged;
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      std::vector<int64_t> part;
      for (int64_t i = cuts[k]; i < cuts[k + 1]; ++i) part.push_back(i);
      merged.merge(FeatureMoments::of(make_shard(d, part)));
    }
    ASSERT_EQ(merged.count, whole.count);
    for (size_t f = 0; f < 3; ++f) {
      EXPECT_NEAR(merged.mean[f], whole.mean[f], 1e-13 * (1 + std::fabs(whole.mean[f]))) << f;
      EXPECT_NEAR(merged.m2[f], whole.m2[f], 1e-9 * (1e-12 + whole.m2[f])) << f;
    }
  }
}

TEST(Normalization, SeriesStandardisesEachSequenceByItself) {
  const RaggedData d = offset_data(60, 3);
  Shard s = make_shard(d, all_indices(60));
  const Shard raw = s;
  standardize_series(s);
  for (int64_t p = 0; p < s.size(); ++p) {
    const int64_t b = s.offsets[static_cast<size_t>(p)], e = s.offsets[static_cast<size_t>(p) + 1];
    for (int64_t f = 0; f < 3; ++f) {
      const auto [mean, sd] = reference(s, f, b, e);
      EXPECT_NEAR(static_cast<double>(mean), 0.0, 1e-5) << "sequence " << p << " feature " << f;
      const auto [raw_mean, raw_sd] = reference(raw, f, b, e);
      (void)raw_mean;
      // A constant feature (feature 2; every feature of a one-step sequence) is only centred: all zeros.
      const bool constant = raw_sd <= kConstantStd * (1 + std::fabs(static_cast<double>(raw_mean)));
      EXPECT_NEAR(static_cast<double>(sd), constant ? 0.0 : 1.0, 1e-4) << "sequence " << p << " feature " << f;
    }
  }
  EXPECT_EQ(s.length(0), 1);
  for (int64_t f = 0; f < 3; ++f) EXPECT_EQ(s.features[static_cast<size_t>(f)], 0.0f);
}

// What `series` is for: a sequence shifted and scaled (per feature) looks the same to the model.
TEST(Normalization, SeriesIgnoresEachSequencesOffsetAndScale) {
  RaggedData d = offset_data(20, 4), moved = d;
  for (int64_t i = 0; i < 20; ++i)
    for (int64_t t = d.offsets[static_cast<size_t>(i)]; t < d.offsets[static_cast<size_t>(i) + 1]; ++t)
      for (int64_t f = 0; f < 2; ++f) {
        float& v = moved.features[static_cast<size_t>(t * 3 + f)];
        v = static_cast<float>(v * (0.5 + static_cast<double>(i)) + 100.0 * static_cast<double>(i) - 300.0);
      }
  Shard a = make_shard(d, all_indices(20)), b = make_shard(moved, all_indices(20));
  standardize_series(a);
  standardize_series(b);
  for (size_t k = 0; k < a.features.size(); ++k)
    if (k % 3 != 0) {   // feature 0 is quantised at 30000 (float steps of 0.002)
      EXPECT_NEAR(a.features[k], b.features[k], 2e-3) << k;
    }
}

TEST(Normalization, NormalizerAppliesItsModeAndToleratesAnEmptyShard) {
  const RaggedData d = offset_data(10, 5);
  Shard feature = make_shard(d, all_indices(10)), series = feature, none = feature;
  const FeatureScaling sc{{30000.0f, 5.0f, 7.0f}, {0.05f, 2.0f, 1.0f}};
  Normalizer{Normalization::Feature, sc}.apply(feature);
  Normalizer{Normalization::Series, {}}.apply(series);
  Normalizer{Normalization::None, {}}.apply(none);
  const Shard raw = make_shard(d, all_indices(10));
  EXPECT_EQ(none.features, raw.features);
  for (size_t k = 0; k < raw.features.size(); ++k) {
    const size_t f = k % 3;
    EXPECT_EQ(feature.features[k], (raw.features[k] - sc.mean[f]) / sc.std[f]);
  }
  Shard expected = raw;
  standardize_series(expected);
  EXPECT_EQ(series.features, expected.features);
  // train --normalize without --val applied the statistics to the absent validation shard: an internal error.
  Shard empty;
  EXPECT_NO_THROW(Normalizer({Normalization::Feature, sc}).apply(empty));
  EXPECT_NO_THROW(Normalizer({Normalization::Series, {}}).apply(empty));
}

TEST(Normalization, ModeNames) {
  for (Normalization m : {Normalization::None, Normalization::Feature, Normalization::Series})
    EXPECT_EQ(parse_normalization(normalization_name(m)), m);
  EXPECT_THROW(parse_normalization("true"), UserError);
  EXPECT_EQ(guarded_std(30000.0, 1e-5), 1.0);    // below 1e-8 * (1 + |mean|): constant up to rounding
  EXPECT_EQ(guarded_std(30000.0, 0.05), 0.05);
  EXPECT_EQ(guarded_std(0.0, 0.0), 1.0);
}
