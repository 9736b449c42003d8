// Per-feature standardisation (z-score) with statistics of the training set, computed over all ranks' shards
// and stored with the model so that eval and predict apply exactly the same transform.
#pragma once

#include <mpi.h>

#include <vector>

#include "ragtrain/data/shard.hpp"

namespace ragtrain {

struct FeatureScaling {
  std::vector<float> mean;   // (F)
  std::vector<float> std;    // (F) population standard deviation; 1 for a constant feature
  bool empty() const { return mean.empty(); }
};

// Mean and standard deviation of every feature over all timesteps of every rank's shard (collective).
// Sums in double, reduced with one MPI_Allreduce, so the result is identical on every rank.
FeatureScaling compute_scaling(const Shard& shard, MPI_Comm comm);

// x <- (x - mean) / std for every timestep of the shard. No-op for an empty scaling.
void apply_scaling(const FeatureScaling& scaling, Shard& shard);

}  // namespace ragtrain
