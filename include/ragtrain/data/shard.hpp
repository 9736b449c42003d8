// A rank's own sequences, read from a v1 file with one collective parallel-HDF5 read per dataset.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "ragtrain/data/format.hpp"

namespace ragtrain {

// Sequences held in memory by one rank. Position p (0..size()-1) is global sequence indices[p].
struct Shard {
  bool labeled = true;             // false: read from a data set without labels; labels and targets are empty
  Task task = Task::Classification;
  int64_t num_features = 0;        // F
  int64_t num_outputs = 0;         // classes or K
  std::vector<int64_t> indices;    // (n) global indices, in the order they were requested
  std::vector<int64_t> offsets;    // (n + 1) row offsets into `features`
  std::vector<float> features;     // (offsets[n], F) row-major
  std::vector<int32_t> labels;     // (n) class ids, classification only
  std::vector<float> targets;      // (n, K) row-major, regression only

  int64_t size() const { return static_cast<int64_t>(indices.size()); }
  int64_t length(int64_t p) const { return offsets[static_cast<size_t>(p + 1)] - offsets[static_cast<size_t>(p)]; }
  const float* x(int64_t p) const { return features.data() + offsets[static_cast<size_t>(p)] * num_features; }
  const float* target(int64_t p) const { return targets.data() + p * num_outputs; }
  int64_t timesteps() const { return offsets.empty() ? 0 : offsets.back(); }
};

// Reads exactly the sequences in `indices` (any order, no duplicates, each in [0, N)) — never the whole file.
// Collective over `comm`: every rank calls it, a rank with no indices joins with an empty selection.
// Validates what it reads: labels in [0, classes) for classification, all features and targets finite (a data
// set without labels: features only);
// a violation throws UserError naming the file, dataset and global sequence index (after the collective
// reads, so no rank is left waiting in one). The bytes the shard needs are checked against `budget` before
// anything is allocated or read; if any rank's shard does not fit, every rank throws that rank's UserError.
Shard read_shard(const DatasetInfo& info, const std::vector<int64_t>& indices, MPI_Comm comm,
                 const MemoryBudget& budget = MemoryBudget::machine());

}  // namespace ragtrain
