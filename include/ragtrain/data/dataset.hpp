// A whole v1 data set in memory: what gen and convert produce and write, and what inspect reports on.
#pragma once

#include <cstdint>
#include <map>
#include <istream>
#include <string>
#include <vector>

#include "ragtrain/data/format.hpp"
#include "ragtrain/model/model.hpp"

namespace ragtrain {

struct RaggedData {
  Task task = Task::Classification;
  int64_t num_features = 0;             // F
  int64_t num_outputs = 0;              // classes or K
  std::vector<int64_t> offsets{0};      // (N + 1)
  std::vector<float> features;          // (offsets[N], F)
  std::vector<int32_t> labels;          // (N) classification
  std::vector<float> targets;           // (N, K) regression
  std::vector<std::string> class_names; // optional, size == classes when present (e.g. .ts labels)
  std::string source;                   // provenance, stored as root attribute "source"

  int64_t num_sequences() const { return static_cast<int64_t>(offsets.size()) - 1; }
};

// Writes `data` as format v1 from one process (serial HDF5), atomically: a temporary file in the same folder,
// fsync, rename. Throws UserError if the folder is not writable or `data` breaks an invariant.
void write_dataset(const std::string& path, const RaggedData& data);

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
RaggedData make_synthetic(const SyntheticSpec& spec);

// Parses a UEA/sktime .ts file (multivariate, equal or unequal length, class labels). Labels are mapped to
// 0..C-1 in the order of the @classLabel header; class_names keeps the original strings. Throws UserError
// with the file, line number and what was wrong.
RaggedData read_ts_file(const std::string& path);
// The same parser on a stream; `name` stands for the file in messages (the fuzzer feeds it bytes).
RaggedData parse_ts(std::istream& in, const std::string& name);

// How `convert` reads the labels of CSV and .npz inputs (a .ts file declares its own task and classes).
struct ImportOptions {
  bool regression = false;                // the labels are regression targets (numbers), not classes
  std::vector<std::string> class_names;   // fixed class order (--class-names-from); empty: sorted distinct labels
  std::string class_names_source;         // where class_names came from, for messages
};

// What an import read, for `convert --verbose`: one line per file or array used, and what it skipped.
struct ImportLog {
  std::vector<std::string> read;
  std::vector<std::string> ignored;
};

// A folder of CSV files, one sequence each (rows = timesteps, columns = features, an optional header row of
// column names), and a labels CSV (a header row, then FILE,LABEL per sequence, or FILE,Y1,..,YK for regression).
// Sequence i is the file on row i of the labels file; every *.csv file of the folder (except the labels file)
// must have a row. Throws UserError naming the file and line (doc/data-format.md, "Bring your own data").
RaggedData read_csv_folder(const std::string& dir, const std::string& labels_csv, const ImportOptions& opts,
                           ImportLog* log = nullptr);

// A NumPy .npz file (numpy.savez or savez_compressed) holding either seq_0, seq_1, ... (each (T_i, F)) or
// values (total_T, F) + lengths (N), plus labels (N) or (N, K), and optionally class_names (C). Integer or
// string labels are classes, float labels regression targets. Throws UserError naming the file and entry.
RaggedData read_npz_file(const std::string& path, const ImportOptions& opts, ImportLog* log = nullptr);

// Full validation of a file for `inspect`: everything read_dataset_info checks, plus every label and feature.
struct DatasetReport {
  std::string path;
  Task task = Task::Classification;
  int64_t num_sequences = 0, num_features = 0, num_outputs = 0, total_timesteps = 0;
  std::vector<int64_t> lengths;            // (N)
  std::vector<int64_t> class_counts;       // (classes), classification only
  std::vector<std::string> class_names;    // optional
};
// Serial; throws UserError when invalid. Reads the values in blocks that fit `budget` (--max-memory).
DatasetReport inspect_dataset(const std::string& path, const MemoryBudget& budget = MemoryBudget::machine());
void print_report(const DatasetReport& report, std::ostream& out);  // N, F, task, class counts, length stats, histogram

}  // namespace ragtrain

#include "ragtrain/data/shard.hpp"

namespace ragtrain {

// The sequences `indices` of an in-memory data set as a Shard (for benchmarks and tests without files).
Shard make_shard(const RaggedData& data, const std::vector<int64_t>& indices);

}  // namespace ragtrain
