// Feature standardisation: the modes, stable statistics merged across ranks, and their application.
#include "ragtrain/data/normalization.hpp"

#include <algorithm>
#include <cmath>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/parallel_blocks.hpp"

namespace ragtrain {

Normalization parse_normalization(const std::string& name) {
  if (name == "none") return Normalization::None;
  if (name == "feature") return Normalization::Feature;
  if (name == "series") return Normalization::Series;
  throw UserError("option --normalize: must be none, feature or series, got '" + name + "'",
                  "feature: the training set's statistics per feature (what `--normalize` alone and the former "
                  "`normalize = true` mean); series: each sequence by its own mean and std");
}

const char* normalization_name(Normalization mode) {
  switch (mode) {
    case Normalization::Feature: return "feature";
    case Normalization::Series: return "series";
    case Normalization::None: break;
  }
  return "none";
}

double guarded_std(double mean, double std) { return std > kConstantStd * (1.0 + std::fabs(mean)) ? std : 1.0; }

namespace {

// The moments of rows [begin, end) of `x` (rows, F), two passes in double.
FeatureMoments block_moments(const float* x, int64_t F, int64_t begin, int64_t end) {
  FeatureMoments m;
  m.count = static_cast<double>(end - begin);
  m.mean.assign(static_cast<size_t>(F), 0.0);
  m.m2.assign(static_cast<size_t>(F), 0.0);
  for (int64_t t = begin; t < end; ++t)
    for (int64_t f = 0; f < F; ++f) m.mean[static_cast<size_t>(f)] += x[t * F + f];
  for (double& v : m.mean) v /= m.count;
  for (int64_t t = begin; t < end; ++t)
    for (int64_t f = 0; f < F; ++f) {
      const double d = x[t * F + f] - m.mean[static_cast<size_t>(f)];
      m.m2[static_cast<size_t>(f)] += d * d;
    }
  return m;
}

}  // namespace

FeatureMoments FeatureMoments::of(const Shard& shard, int threads) {
  return of_rows(shard.features.data(), shard.timesteps(), shard.num_features, threads);
}

FeatureMoments FeatureMoments::of_rows(const float* x, int64_t rows, int64_t F, int threads) {
  const int64_t blocks = (rows + kMomentRows - 1) / kMomentRows;
  std::vector<FeatureMoments> parts(static_cast<size_t>(blocks));
  parallel_blocks(blocks, threads, [&](int64_t b) {
    parts[static_cast<size_t>(b)] = block_moments(x, F, b * kMomentRows, std::min(rows, (b + 1) * kMomentRows));
  });
  FeatureMoments m;
  m.mean.assign(static_cast<size_t>(F), 0.0);
  m.m2.assign(static_cast<size_t>(F), 0.0);
  for (const FeatureMoments& part : parts) m.merge(part);   // in block order: the same sums whatever the threads
  return m;
}

void FeatureMoments::merge(const FeatureMoments& o) {
  if (o.count == 0) return;
  if (count == 0) {
    *this = o;
    return;
  }
  const double n = count + o.count;
  for (size_t f = 0; f < mean.size(); ++f) {
    const double delta = o.mean[f] - mean[f];
    mean[f] += delta * (o.count / n);
    m2[f] += o.m2[f] + delta * delta * (count * o.count / n);
  }
  count = n;
}

MomentStream::MomentStream(int64_t num_features) : F_(num_features) {
  total_.mean.assign(static_cast<size_t>(F_), 0.0);
  total_.m2.assign(static_cast<size_t>(F_), 0.0);
}

void MomentStream::add(const Shard& piece, int threads) {
  const float* x = piece.features.data();
  const int64_t rows = piece.timesteps();
  int64_t used = 0;
  if (!carry_.empty()) {   // complete the block begun by the pieces before
    const int64_t have = static_cast<int64_t>(carry_.size()) / F_;
    const int64_t take = std::min(rows, kMomentRows - have);
    carry_.insert(carry_.end(), x, x + take * F_);
    used = take;
    if (have + take < kMomentRows) return;
    total_.merge(block_moments(carry_.data(), F_, 0, kMomentRows));
    carry_.clear();
  }
  const int64_t blocks = (rows - used) / kMomentRows;
  std::vector<FeatureMoments> parts(static_cast<size_t>(blocks));
  parallel_blocks(blocks, threads, [&](int64_t b) {
    const int64_t begin = used + b * kMomentRows;
    parts[static_cast<size_t>(b)] = block_moments(x, F_, begin, begin + kMomentRows);
  });
  for (const FeatureMoments& part : parts) total_.merge(part);
  carry_.assign(x + (used + blocks * kMomentRows) * F_, x + rows * F_);
}

FeatureMoments MomentStream::finish() {
  if (!carry_.empty()) total_.merge(block_moments(carry_.data(), F_, 0, static_cast<int64_t>(carry_.size()) / F_));
  carry_.clear();
  return total_;
}

FeatureScaling compute_scaling(const Shard& shard, MPI_Comm comm, int threads) {
  return scaling_across_ranks(FeatureMoments::of(shard, threads), shard.num_features, comm);
}

FeatureScaling scaling_across_ranks(const FeatureMoments& mine, int64_t F, MPI_Comm comm) {
  return scaling_of(moments_across_ranks(mine, F, comm), F);
}

FeatureMoments moments_across_ranks(const FeatureMoments& mine, int64_t F, MPI_Comm comm) {
  // (count | mean (F) | m2 (F)) per rank. Every rank must pass the same F: the files were checked to agree.
  std::vector<double> packed(static_cast<size_t>(2 * F + 1));
  packed[0] = mine.count;
  std::copy(mine.mean.begin(), mine.mean.end(), packed.begin() + 1);
  std::copy(mine.m2.begin(), mine.m2.end(), packed.begin() + 1 + F);
  int size = 0;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<double> all(packed.size() * static_cast<size_t>(size));
  MPI_CHECK(MPI_Allgather(packed.data(), static_cast<int>(packed.size()), MPI_DOUBLE, all.data(),
                          static_cast<int>(packed.size()), MPI_DOUBLE, comm));
  FeatureMoments total;
  for (int r = 0; r < size; ++r) {
    const double* p = all.data() + static_cast<size_t>(r) * packed.size();
    FeatureMoments part;
    part.count = p[0];
    part.mean.assign(p + 1, p + 1 + F);
    part.m2.assign(p + 1 + F, p + 1 + 2 * F);
    total.merge(part);
  }
  return total;
}

FeatureScaling scaling_of(const FeatureMoments& total, int64_t F) {
  RT_CHECK(total.count > 0, "no timesteps to compute feature statistics from");
  FeatureScaling s;
  s.mean.resize(static_cast<size_t>(F));
  s.std.resize(static_cast<size_t>(F));
  for (size_t f = 0; f < static_cast<size_t>(F); ++f) {
    const double mean = total.mean[f];
    s.mean[f] = static_cast<float>(mean);
    s.std[f] = static_cast<float>(guarded_std(mean, std::sqrt(total.m2[f] / total.count)));
  }
  return s;
}

std::optional<std::string> statistics_differ(const FeatureMoments& stored, const FeatureMoments& data) {
  if (stored.count != data.count)
    return RT_MSG("they cover " << static_cast<int64_t>(stored.count) << " timesteps, the data has "
                                << static_cast<int64_t>(data.count));
  for (size_t f = 0; f < stored.mean.size() && f < data.mean.size(); ++f) {
    const double std_s = std::sqrt(stored.m2[f] / stored.count), std_d = std::sqrt(data.m2[f] / data.count);
    const double scale = kStatisticsTolerance * (std_s + std::fabs(stored.mean[f]));
    if (std::fabs(data.mean[f] - stored.mean[f]) > scale || std::fabs(std_d - std_s) > scale)
      return RT_MSG("feature " << f << " has mean " << stored.mean[f] << " and std " << std_s
                               << " there, but mean " << data.mean[f] << " and std " << std_d << " in the data");
  }
  return std::nullopt;
}

void apply_scaling(const FeatureScaling& s, Shard& shard, int threads) {
  if (s.empty() || shard.size() == 0) return;   // a rank may hold no sequence of a small validation set
  const int64_t F = shard.num_features;
  RT_CHECK(static_cast<int64_t>(s.mean.size()) == F, "scaling has " << s.mean.size() << " features, data " << F);
  const int64_t rows = shard.timesteps();
  parallel_blocks((rows + kMomentRows - 1) / kMomentRows, threads, [&](int64_t b) {
    float* x = shard.features.data();
    for (int64_t t = b * kMomentRows; t < std::min(rows, (b + 1) * kMomentRows); ++t)
      for (int64_t f = 0; f < F; ++f) {
        float& v = x[t * F + f];
        v = (v - s.mean[static_cast<size_t>(f)]) / s.std[static_cast<size_t>(f)];
      }
  });
}

void standardize_series(Shard& shard, int threads) {
  constexpr int64_t kBlock = 1024;   // sequences per task
  const int64_t F = shard.num_features, n = shard.size();
  parallel_blocks((n + kBlock - 1) / kBlock, threads, [&](int64_t b) {
    std::vector<double> mean(static_cast<size_t>(F)), m2(static_cast<size_t>(F));
    for (int64_t p = b * kBlock; p < std::min(n, (b + 1) * kBlock); ++p) {
      const int64_t T = shard.length(p);
      if (T == 0) continue;
      float* x = shard.features.data() + shard.offsets[static_cast<size_t>(p)] * F;   // (T, F)
      std::fill(mean.begin(), mean.end(), 0.0);
      std::fill(m2.begin(), m2.end(), 0.0);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t f = 0; f < F; ++f) mean[static_cast<size_t>(f)] += x[t * F + f];
      for (double& v : mean) v /= static_cast<double>(T);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t f = 0; f < F; ++f) {
          const double d = x[t * F + f] - mean[static_cast<size_t>(f)];
          m2[static_cast<size_t>(f)] += d * d;
        }
      for (int64_t f = 0; f < F; ++f) {
        const double mu = mean[static_cast<size_t>(f)];
        const double sd = guarded_std(mu, std::sqrt(m2[static_cast<size_t>(f)] / static_cast<double>(T)));
        for (int64_t t = 0; t < T; ++t) x[t * F + f] = static_cast<float>((x[t * F + f] - mu) / sd);
      }
    }
  });
}

void Normalizer::apply(Shard& shard, int threads) const {
  switch (mode) {
    case Normalization::Feature: apply_scaling(scaling, shard, threads); break;
    case Normalization::Series: standardize_series(shard, threads); break;
    case Normalization::None: break;
  }
}

}  // namespace ragtrain
