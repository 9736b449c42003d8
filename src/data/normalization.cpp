// Feature standardisation statistics and their application.
#include "ragtrain/data/normalization.hpp"

#include <cmath>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

FeatureScaling compute_scaling(const Shard& shard, MPI_Comm comm) {
  const int64_t F = shard.num_features;
  std::vector<double> sums(static_cast<size_t>(2 * F + 1), 0.0);   // (sum x | sum x^2 | rows)
  const int64_t rows = shard.timesteps();
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t f = 0; f < F; ++f) {
      const double v = shard.features[static_cast<size_t>(t * F + f)];
      sums[static_cast<size_t>(f)] += v;
      sums[static_cast<size_t>(F + f)] += v * v;
    }
  sums.back() = static_cast<double>(rows);
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_DOUBLE, MPI_SUM, comm));
  const double n = sums.back();
  RT_CHECK(n > 0, "no timesteps to compute feature statistics from");
  FeatureScaling s;
  s.mean.resize(static_cast<size_t>(F));
  s.std.resize(static_cast<size_t>(F));
  for (int64_t f = 0; f < F; ++f) {
    const double mean = sums[static_cast<size_t>(f)] / n;
    const double var = std::max(0.0, sums[static_cast<size_t>(F + f)] / n - mean * mean);
    const double sd = std::sqrt(var);
    s.mean[static_cast<size_t>(f)] = static_cast<float>(mean);
    // A constant feature carries no information; dividing by ~0 would only amplify rounding.
    s.std[static_cast<size_t>(f)] = sd > 1e-8 * (1.0 + std::fabs(mean)) ? static_cast<float>(sd) : 1.0f;
  }
  return s;
}

void apply_scaling(const FeatureScaling& s, Shard& shard) {
  // An empty shard has nothing to scale (train without --val passes its empty validation shard).
  if (s.empty() || shard.timesteps() == 0) return;
  const int64_t F = shard.num_features;
  RT_CHECK(static_cast<int64_t>(s.mean.size()) == F, "scaling has " << s.mean.size() << " features, data " << F);
  const int64_t rows = shard.timesteps();
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t f = 0; f < F; ++f) {
      float& v = shard.features[static_cast<size_t>(t * F + f)];
      v = (v - s.mean[static_cast<size_t>(f)]) / s.std[static_cast<size_t>(f)];
    }
}

}  // namespace ragtrain
