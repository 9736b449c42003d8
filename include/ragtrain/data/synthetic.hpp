// Synthetic, learnable ragged data: the `gen` subcommand, and bench's data in memory.
#pragma once

#include <cstdint>

#include "ragtrain/data/ragged_data.hpp"

namespace ragtrain {

// Synthetic, learnable ragged data (the `gen` subcommand). Deterministic for a seed.
struct SyntheticSpec {
  int64_t sequences = 1000;
  int64_t features = 36;
  int64_t min_length = 60;
  int64_t max_length = 130;
  int64_t classes = 10;        // classification
  Task task = Task::Classification;
  int64_t outputs = 1;         // K targets for regression
  uint64_t seed = 1;
};
// threads: the sequences are generated on that many (the data do not depend on it).
RaggedData make_synthetic(const SyntheticSpec& spec, int threads = 1);

}  // namespace ragtrain
