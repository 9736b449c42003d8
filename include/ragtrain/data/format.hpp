// Ragged data format v1 (doc/data-format.md): names, the validated header of a file, and its offsets.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ragtrain/model/model.hpp"

namespace ragtrain {

inline constexpr const char* kFormatName = "ragtrain-ragged";   // root attribute "format"
inline constexpr int64_t kFormatVersion = 1;                     // root attribute "version"

// What a v1 file declares, after validation of attributes, dataset names, dtypes, shapes and offsets.
// Feature values and labels are validated by whoever reads them (read_shard, inspect_dataset).
struct DatasetInfo {
  std::string path;
  Task task = Task::Classification;
  int64_t num_sequences = 0;     // N
  int64_t num_features = 0;      // F
  int64_t num_outputs = 0;       // classes (classification) or K (regression)
  int64_t total_timesteps = 0;   // offsets[N]
  std::vector<int64_t> offsets;  // (N + 1); sequence i is rows offsets[i] .. offsets[i+1]-1 of /features
  std::vector<std::string> class_names;  // optional attribute; empty when absent

  int64_t length(int64_t i) const { return offsets[static_cast<size_t>(i + 1)] - offsets[static_cast<size_t>(i)]; }
  std::vector<int64_t> lengths() const;
};

// Opens `path` on every rank of `comm` (collective; parallel HDF5 over MPI-IO), validates the root attributes,
// the three datasets' dtypes and shapes, and every offset (0 first, strictly increasing, last == rows).
// Reads only the attributes, the dataspace shapes and /offsets. Throws UserError naming the file, the
// dataset/attribute and the index, with a hint. Same result (or same error) on every rank.
DatasetInfo read_dataset_info(const std::string& path, MPI_Comm comm);

}  // namespace ragtrain
