// Ragged data format v1 (doc/data-format.md): names, the validated header of a file, and its offsets.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ragtrain/core/error.hpp"
#include "ragtrain/model/model.hpp"

namespace ragtrain {

inline constexpr const char* kFormatName = "ragtrain-ragged";   // root attribute "format"
inline constexpr int64_t kFormatVersion = 1;                     // root attribute "version"

// The optional /statistics group (doc/data-format.md, "Stored feature statistics"): every feature's moments over
// all `rows` timesteps of /features, computed as FeatureMoments::of_rows does (blocks of `block_rows` rows, two
// passes in double, merged in order), so that a run which uses them scales its data to the same bits as one that
// computes them from a one-rank shard.
struct StoredStatistics {
  int64_t rows = 0;            // attribute rows: offsets[N] when written
  std::vector<double> mean;    // (F) dataset feature_mean
  std::vector<double> m2;      // (F) dataset feature_m2: sum of squared deviations from the mean
};

// What a v1 file declares, after validation of attributes, dataset names, dtypes, shapes and offsets.
// Feature values and labels are validated by whoever reads them (read_shard, inspect_dataset).
struct DatasetInfo {
  std::string path;
  bool labeled = true;           // false: no /labels (and no task attributes); for predict and inspect only
  Task task = Task::Classification;   // meaningful only when labeled
  int64_t num_sequences = 0;     // N
  int64_t num_features = 0;      // F
  int64_t num_outputs = 0;       // classes (classification) or K (regression); 0 when not labeled
  int64_t total_timesteps = 0;   // offsets[N]
  std::vector<int64_t> offsets;  // (N + 1); sequence i is rows offsets[i] .. offsets[i+1]-1 of /features
  std::vector<std::string> class_names;  // optional attribute; empty when absent
  bool has_names = false;        // /names: N strings naming the sequences (read them with read_sequence_names)
  std::optional<StoredStatistics> statistics;   // /statistics, checked for shape and rows (not yet against the data)
  // /statistics present but unusable (read_statistics' UserError): thrown by those that would use them (train
  // --normalize feature, inspect), not by eval or predict, which take the checkpoint's.
  std::optional<UserError> statistics_error;

  int64_t length(int64_t i) const { return offsets[static_cast<size_t>(i + 1)] - offsets[static_cast<size_t>(i)]; }
  std::vector<int64_t> lengths() const;
};

// The header fields that DatasetInfo, Shard, RaggedData and inspect's DatasetReport share (what kind of data it is:
// labels or none, the task, F and K), copied from one to another. Every copy between these types goes through
// here, so a field added to all of them cannot be left behind in one of the copies.
template <class To, class From>
void copy_header(To& to, const From& from) {
  to.labeled = from.labeled;
  to.task = from.task;
  to.num_features = from.num_features;
  to.num_outputs = from.num_outputs;
}

// How much one rank may allocate for the data it reads (--max-memory). The readers compare the bytes a file's
// declared sizes would make them allocate against it *before* allocating, so a file that declares 10^12 rows
// (or a damaged header) gets a message naming the dataset instead of std::bad_alloc or the OOM killer.
struct MemoryBudget {
  int64_t bytes = 0;
  std::string max_memory = "auto";   // --max-memory as given, for messages

  // memory_budget(max_memory, ranks_on_node) of core/memory.hpp; UserError if max_memory is not a size.
  static MemoryBudget of(const std::string& max_memory, int ranks_on_node);
  // What this machine has, for one process: the default of callers without a --max-memory option.
  static MemoryBudget machine() { return of("auto", 1); }
};

// Opens `path` on every rank of `comm` (collective; parallel HDF5 over MPI-IO), validates the root attributes,
// the three datasets' dtypes and shapes, and every offset (0 first, strictly increasing, last == rows).
// Reads only the attributes, the dataspace shapes and /offsets, and /offsets only once its size has been
// checked against `budget`. Throws UserError naming the file, the dataset/attribute and the index, with a hint.
// Same result (or same error) on every rank.
DatasetInfo read_dataset_info(const std::string& path, MPI_Comm comm,
                              const MemoryBudget& budget = MemoryBudget::machine());

// For commands that compare with labels (train, eval, bench on a file): UserError on a data set without labels,
// naming `option` (e.g. "--data") and the file and saying that `needed_for` (e.g. "training") needs labels.
// DatasetInfo is the same on every rank, so every rank throws the same error.
void require_labels(const DatasetInfo& info, const std::string& option, const std::string& needed_for);

// The checks of read_dataset_info on a file already open (any driver: the fuzzer opens file images in
// memory). `path` names the file in messages. Serial; throws UserError like read_dataset_info.
DatasetInfo validate_dataset(int64_t file, const std::string& path,
                             const MemoryBudget& budget = MemoryBudget::machine());

// Collective over `comm`: if any rank has a problem (`local` set), every rank throws the UserError of the
// lowest such rank (the others' copy says which rank saw it). For checks whose outcome may differ between
// ranks, made before a collective call that a rank leaving early would leave the others waiting in.
void throw_if_any_rank_failed(MPI_Comm comm, const std::optional<UserError>& local);

}  // namespace ragtrain
