// --normalize feature on any rank count: every rank gets the same statistics, equal to one process's over the
// whole training set up to rounding (run under np 1..4 by scripts/run-tests.sh).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "ragtrain/core/rng.hpp"
#include "ragtrain/data/normalization.hpp"
#include "ragtrain/data/ragged_data.hpp"
#include "ragtrain/schedule/schedule.hpp"

using namespace ragtrain;

namespace {

// 30000 + N(0, 0.05) and N(-3, 0.5) with uneven lengths 1..40: the large offset is where E[x^2] - mean^2 fails.
RaggedData offset_data() {
  RaggedData d;
  d.num_features = 2;
  d.num_outputs = 2;
  Rng rng(11, 5);
  for (int64_t i = 0; i < 3001; ++i) {
    const int64_t len = 1 + (i * 7) % 40;
    for (int64_t t = 0; t < len; ++t) {
      d.features.push_back(static_cast<float>(30000.0 + 0.05 * rng.normal()));
      d.features.push_back(static_cast<float>(-3.0 + 0.5 * rng.normal()));
    }
    d.offsets.push_back(d.offsets.back() + len);
    d.labels.push_back(0);
  }
  return d;
}

}  // namespace

TEST(NormalizationMpi, EveryRankCountGivesTheSameStatistics) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const RaggedData data = offset_data();
  const int64_t n = data.num_sequences();
  // As in training: each rank holds the sequences the schedule gives it (uneven lengths and counts).
  const Schedule schedule(n, size, 1, 3);
  const FeatureScaling got = compute_scaling(make_shard(data, schedule.rank_sequences(rank)), MPI_COMM_WORLD);
  const FeatureScaling one = compute_scaling(make_shard(data, block_indices(n, 1, 0)), MPI_COMM_SELF);
  ASSERT_EQ(got.mean.size(), 2u);
  for (size_t f = 0; f < 2; ++f) {
    // The same as one process, up to the last bit of the float the statistics are stored in.
    EXPECT_NEAR(got.mean[f], one.mean[f], 2e-7 * std::fabs(one.mean[f])) << "feature " << f;
    EXPECT_NEAR(got.std[f], one.std[f], 2e-6 * one.std[f]) << "feature " << f;
  }
  EXPECT_NEAR(got.std[0], 0.05, 0.002);
  EXPECT_NEAR(got.std[1], 0.5, 0.02);
  // Bitwise the same on every rank: each merges all ranks' moments in rank order.
  float mine[4] = {got.mean[0], got.mean[1], got.std[0], got.std[1]}, lo[4], hi[4];
  MPI_Allreduce(mine, lo, 4, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(mine, hi, 4, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(lo[k], hi[k]) << k;
}
