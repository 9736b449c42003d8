// `inspect`: full validation of a format v1 file and its summary (counts, lengths, histogram).
#pragma once

#include <cstdint>
#include <ostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ragtrain/data/format.hpp"
#include "ragtrain/data/normalization.hpp"

namespace ragtrain {

// Full validation of a file for `inspect`: everything read_dataset_info checks, plus every label and feature.
struct DatasetReport {
  std::string path;
  bool labeled = true;                     // false: a data set without labels (no task, classes or outputs)
  Task task = Task::Classification;
  int64_t num_sequences = 0, num_features = 0, num_outputs = 0, total_timesteps = 0;
  std::vector<int64_t> lengths;            // (N)
  // Classification only: sequences per class id, the classes without any included; keyed, so that a file
  // declaring 2^31 classes is reported in memory and time of the classes it holds.
  std::map<int64_t, int64_t> class_counts;
  std::vector<std::string> class_names;    // optional
  bool has_names = false;                  // /names, all checked; the first and last for the summary
  std::string first_name, last_name;
  FeatureMoments moments;                  // of every feature over all rows, as a one-rank train computes them
  std::optional<StoredStatistics> stored;  // /statistics, when the file has it
  std::optional<std::string> stale;        // how `stored` differs from `moments` (statistics_differ), if it does
};

// Serial; throws UserError when invalid. Reads the values in blocks that fit `budget` (--max-memory). With
// `stored_statistics` false the file's /statistics are neither checked nor reported: inspect --write-statistics
// replaces them, so a damaged or stale group must not stop the check of the data.
DatasetReport inspect_dataset(const std::string& path, const MemoryBudget& budget = MemoryBudget::machine(),
                              bool stored_statistics = true);
void print_report(const DatasetReport& report, std::ostream& out);  // N, F, task, class counts, length stats, histogram

}  // namespace ragtrain
