// A whole v1 data set in memory (RaggedData): what gen and convert produce and write_dataset writes; and a Shard
// cut from one in memory, for benchmarks and tests without files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ragtrain/data/shard.hpp"
#include "ragtrain/model/model.hpp"

namespace ragtrain {

struct RaggedData {
  bool labeled = true;                  // false: no labels or targets at all (for predict; task is unused then)
  Task task = Task::Classification;
  int64_t num_features = 0;             // F
  int64_t num_outputs = 0;              // classes or K; 0 when unlabeled
  std::vector<int64_t> offsets{0};      // (N + 1)
  std::vector<float> features;          // (offsets[N], F)
  std::vector<int32_t> labels;          // (N) classification
  std::vector<float> targets;           // (N, K) regression
  std::vector<std::string> class_names; // optional, size == classes when present (e.g. .ts labels)
  std::vector<std::string> names;       // optional, (N) when present: what each sequence was (a CSV file name)
  std::string source;                   // provenance, stored as root attribute "source"

  int64_t num_sequences() const { return static_cast<int64_t>(offsets.size()) - 1; }
};

// Writes `data` as format v1 from one process (serial HDF5), atomically: a temporary file in the same folder,
// fsync, rename. Throws UserError if the folder is not writable or `data` breaks an invariant.
void write_dataset(const std::string& path, const RaggedData& data);

// The sequences `indices` of an in-memory data set as a Shard (for benchmarks and tests without files).
Shard make_shard(const RaggedData& data, const std::vector<int64_t>& indices);

// The sequences `indices` of `data`, in that order, as a data set of their own (same task, classes, class names,
// source; the sequence names when present). One copy loop with make_shard.
RaggedData subset(const RaggedData& data, const std::vector<int64_t>& indices);

}  // namespace ragtrain
