// Standardisation of the input features (--normalize none | feature | series): the statistics, their stable
// computation over all ranks, and their application, the same in train (training and validation), eval and
// predict. The mode and, for `feature`, the statistics are stored with the model.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ragtrain/data/shard.hpp"

namespace ragtrain {

// none:    features as stored.
// feature: x <- (x - mean_f) / std_f with every feature's mean and population std over all timesteps of the
//          training set (all ranks' shards), so validation, eval and predict use the training statistics.
// series:  x <- (x - mean_{s,f}) / std_{s,f} with the mean and population std of feature f over the timesteps of
//          sequence s itself (the usual UCR/UEA practice: each series is put on the same scale whatever its
//          offset and amplitude); needs no statistics, so it acts the same on any data set.
// Both: a standard deviation at most kConstantStd * (1 + |mean|) means a constant feature (up to rounding);
// dividing by it would only amplify rounding noise, so such a feature is only centred (std taken as 1), which
// maps a constant feature, and every feature of a one-step sequence in `series`, to 0.
enum class Normalization { None, Feature, Series };
Normalization parse_normalization(const std::string& name);   // none | feature | series; UserError otherwise
const char* normalization_name(Normalization mode);
inline constexpr double kConstantStd = 1e-8;
inline constexpr int64_t kMomentRows = int64_t{1} << 16;

// The std to divide by for a mean and a population std (see kConstantStd).
double guarded_std(double mean, double std);

// Count, mean and sum of squared deviations (M2) of every feature: the state of Welford's / Chan's method.
struct FeatureMoments {
  double count = 0;
  std::vector<double> mean, m2;   // (F)
  // Two passes in double over each block of kMomentRows timesteps of the shard (mean first, then squared
  // deviations from it: no cancellation, unlike E[x^2] - mean^2, which loses everything once the offset dwarfs the
  // spread), the blocks merged in order. The blocks are fixed by the shard alone, so `threads` (which compute
  // them) changes nothing in the result.
  static FeatureMoments of(const Shard& shard, int threads = 1);
  // The same over `rows` rows of x (rows, F): a whole file's /features, for the statistics a writer stores.
  static FeatureMoments of_rows(const float* x, int64_t rows, int64_t num_features, int threads = 1);
  // Chan et al.'s pairwise update: the moments of the union of two disjoint sets of timesteps.
  void merge(const FeatureMoments& other);
};

// FeatureMoments::of a shard that arrives in pieces (consecutive sequences in the shard's order, as a streamed
// shard is read): the same blocks of kMomentRows rows, merged in the same order, so the same bits as the whole.
class MomentStream {
 public:
  explicit MomentStream(int64_t num_features);
  void add(const Shard& piece, int threads = 1);
  FeatureMoments finish();   // the moments of every row added

 private:
  int64_t F_;
  FeatureMoments total_;
  std::vector<float> carry_;   // (rows, F) of the block begun but not complete
};

struct FeatureScaling {
  std::vector<float> mean;   // (F)
  std::vector<float> std;    // (F) population standard deviation; 1 for a constant feature
  bool empty() const { return mean.empty(); }
};

// Mean and standard deviation of every feature over all timesteps of every rank's shard (collective). Each rank
// computes its moments by two passes; MPI_Allgather hands every rank all of them and every rank merges them in
// rank order, so the result is bitwise the same on every rank and depends on the rank count only by rounding.
FeatureScaling compute_scaling(const Shard& shard, MPI_Comm comm, int threads = 1);
// The same from this rank's moments (a streamed shard's, from MomentStream); collective.
FeatureScaling scaling_across_ranks(const FeatureMoments& mine, int64_t num_features, MPI_Comm comm);
// Every rank's moments merged in rank order (collective): the moments of the whole training set.
FeatureMoments moments_across_ranks(const FeatureMoments& mine, int64_t num_features, MPI_Comm comm);
// The scaling from the moments of the whole training set: the float mean and the guarded population std. One
// rank's moments of the whole file in file order give the same bits as FeatureMoments::of_rows of /features.
FeatureScaling scaling_of(const FeatureMoments& total, int64_t num_features);

// Statistics stored in a data file (doc/data-format.md, "Stored feature statistics") are checked against the data
// as it is read, up to rounding: the moments of a set depend on how its rows were split into blocks and ranks by
// about 1e-15 of the scale, and a change that moves a mean or a std by less than this fraction of (std + |mean|)
// changes the scaled features by less than float rounding would.
inline constexpr double kStatisticsTolerance = 1e-6;
// Where `stored` and `data` (the moments of the same rows) disagree beyond kStatisticsTolerance: the count, or the
// first feature's mean or std, as a sentence; nullopt when they agree.
std::optional<std::string> statistics_differ(const FeatureMoments& stored, const FeatureMoments& data);

// x <- (x - mean) / std for every timestep of the shard. No-op for an empty scaling.
void apply_scaling(const FeatureScaling& scaling, Shard& shard, int threads = 1);

// x <- (x - mean) / std per sequence and feature, over that sequence's own timesteps (Normalization::Series).
void standardize_series(Shard& shard, int threads = 1);

// What a model was trained with: the mode and, for `feature`, the training statistics.
struct Normalizer {
  Normalization mode = Normalization::None;
  FeatureScaling scaling;   // Feature only
  void apply(Shard& shard, int threads = 1) const;   // element by element: `threads` changes nothing
};

}  // namespace ragtrain
