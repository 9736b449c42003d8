// The feature statistics a data file carries (/statistics): written by write_dataset as a one-rank run computes
// them, so that scaling with them gives the same bits; read back with the header; a malformed group is a user
// error until removed; stale ones are told apart from rounding by statistics_differ; inspect reports them.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <cmath>
#include <numeric>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/rng.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/inspect.hpp"
#include "ragtrain/data/normalization.hpp"
#include "ragtrain/data/ragged_data.hpp"
#include "ragtrain/data/shard.hpp"
#include "ragtrain/data/stored_statistics.hpp"
#include "unit_test_util.hpp"

using namespace ragtrain;
using ragtrain::test::TempDir;

namespace {

// F = 2, lengths 1..60: 3,000 sequences hold ~91,500 rows, so the moments span two blocks of kMomentRows.
RaggedData two_block_data() {
  RaggedData d;
  d.num_features = 2;
  d.num_outputs = 2;
  Rng rng(5, 1);
  for (int64_t i = 0; i < 3000; ++i) {
    const int64_t len = 1 + i % 60;
    for (int64_t t = 0; t < len; ++t) {
      d.features.push_back(static_cast<float>(1000.0 + 3.0 * rng.normal()));
      d.features.push_back(static_cast<float>(-2.0 + 0.5 * rng.normal()));
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

}  // namespace

TEST(StoredStatistics, WrittenAsOneRankComputesThem) {
  TempDir tmp;
  const std::string path = tmp.file("d.h5");
  const RaggedData d = two_block_data();
  ASSERT_GT(d.offsets.back(), kMomentRows);
  write_dataset(path, d);
  const DatasetInfo info = read_dataset_info(path, MPI_COMM_SELF);
  ASSERT_TRUE(info.statistics.has_value());
  EXPECT_EQ(info.statistics->rows, info.total_timesteps);
  const Shard s = read_shard(info, all_indices(info.num_sequences), MPI_COMM_SELF);
  const FeatureMoments m = FeatureMoments::of(s, 3);
  EXPECT_EQ(info.statistics->mean, m.mean);   // bitwise
  EXPECT_EQ(info.statistics->m2, m.m2);
  const FeatureScaling stored = scaling_of(from_stored(*info.statistics), info.num_features);
  const FeatureScaling computed = compute_scaling(s, MPI_COMM_SELF, 2);
  EXPECT_EQ(stored.mean, computed.mean);
  EXPECT_EQ(stored.std, computed.std);
  EXPECT_FALSE(statistics_differ(from_stored(*info.statistics), m));
  // inspect computes the same moments, in blocks of its own, and finds them current.
  const DatasetReport r = inspect_dataset(path, MemoryBudget::of("64K", 1));
  EXPECT_EQ(r.moments.mean, m.mean);
  EXPECT_EQ(r.moments.m2, m.m2);
  EXPECT_TRUE(r.stored.has_value());
  EXPECT_FALSE(r.stale.has_value());
}

TEST(StoredStatistics, DifferBeyondRoundingOnly) {
  FeatureMoments a;
  a.count = 1000;
  a.mean = {5.0, -3.0, 7.0};
  a.m2 = {4000.0, 250.0, 0.0};   // std 2, 0.5, 0 (constant)
  FeatureMoments b = a;
  EXPECT_FALSE(statistics_differ(a, b));
  b.mean[1] += 1e-12;   // rounding: another split into blocks or ranks
  b.m2[0] *= 1 + 1e-12;
  EXPECT_FALSE(statistics_differ(a, b));
  b = a;
  b.mean[1] += 1e-3;
  const std::optional<std::string> mean_off = statistics_differ(a, b);
  ASSERT_TRUE(mean_off);
  EXPECT_NE(mean_off->find("feature 1"), std::string::npos) << *mean_off;
  b = a;
  b.m2[2] = 1.0;   // the constant feature varies now
  ASSERT_TRUE(statistics_differ(a, b));
  EXPECT_NE(statistics_differ(a, b)->find("feature 2"), std::string::npos);
  b = a;
  b.count = 1001;
  ASSERT_TRUE(statistics_differ(a, b));
  EXPECT_NE(statistics_differ(a, b)->find("1000"), std::string::npos);
}

// A group the reader cannot use (here: moments of another row count) is a user error for inspect (and train);
// removed, the file reads as one without statistics; stored anew, it has them again.
TEST(StoredStatistics, MalformedGroupIsAUserErrorUntilRewritten) {
  TempDir tmp;
  const std::string path = tmp.file("d.h5");
  write_dataset(path, two_block_data());
  const StoredStatistics good = *read_dataset_info(path, MPI_COMM_SELF).statistics;
  StoredStatistics bad = good;
  bad.rows += 1;
  store_statistics(path, bad);
  // Kept with the header for those that would use them (train, inspect); eval and predict read on.
  const DatasetInfo info = read_dataset_info(path, MPI_COMM_SELF);
  EXPECT_FALSE(info.statistics.has_value());
  ASSERT_TRUE(info.statistics_error.has_value());
  EXPECT_NE(std::string(info.statistics_error->what()).find("/statistics"), std::string::npos)
      << info.statistics_error->what();
  EXPECT_NE(info.statistics_error->hint().find("--write-statistics"), std::string::npos);
  EXPECT_THROW(inspect_dataset(path), UserError);
  remove_statistics(path);
  EXPECT_FALSE(read_dataset_info(path, MPI_COMM_SELF).statistics.has_value());
  EXPECT_FALSE(read_dataset_info(path, MPI_COMM_SELF).statistics_error.has_value());
  store_statistics(path, good);
  const std::optional<StoredStatistics> back = read_dataset_info(path, MPI_COMM_SELF).statistics;
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->mean, good.mean);
  EXPECT_EQ(back->m2, good.m2);
}
