// A rank's own sequences, read from a v1 file: straight into place with pread from several threads where a dataset
// is contiguous and needs no conversion, else with one collective parallel-HDF5 read per dataset.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "ragtrain/data/bulk_allocator.hpp"
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
  BulkVector<float> features;      // (offsets[n], F) row-major; resize leaves new values unset
  std::vector<int32_t> labels;     // (n) class ids, classification only
  std::vector<float> targets;      // (n, K) row-major, regression only

  int64_t size() const { return static_cast<int64_t>(indices.size()); }
  int64_t length(int64_t p) const { return offsets[static_cast<size_t>(p + 1)] - offsets[static_cast<size_t>(p)]; }
  const float* x(int64_t p) const { return features.data() + offsets[static_cast<size_t>(p)] * num_features; }
  const float* target(int64_t p) const { return targets.data() + p * num_outputs; }
  int64_t timesteps() const { return offsets.empty() ? 0 : offsets.back(); }
};

// What one or more read_shard calls did, for the run's records.
struct ShardReadStats {
  int64_t bytes = 0;     // values read from the file (features and labels)
  double read_s = 0;     // opening the file and reading
  double check_s = 0;    // checking every value (labels in range, values finite)
  bool direct = false;   // /features was read with pread (else through HDF5)
  int threads = 1;       // reader threads of the last call
  void add(const ShardReadStats& o) {   // another read's bytes and times
    bytes += o.bytes;
    read_s += o.read_s;
    check_s += o.check_s;
  }
};

// Reads exactly the sequences in `indices` (any order, no duplicates, each in [0, N)) — never the whole file.
// Collective over `comm`: every rank calls it, a rank with no indices joins with an empty selection.
// Validates what it reads: labels in [0, classes) for classification, all features and targets finite (a data
// set without labels: features only);
// a violation throws UserError naming the file, dataset and global sequence index (after the collective
// reads, so no rank is left waiting in one). The bytes the shard needs are checked against `budget` before
// anything is allocated or read; if any rank's shard does not fit, every rank throws that rank's UserError.
// Datasets read directly are held once (no file-order copy); the reads and checks use reader_threads(comm)
// threads. The sequences are laid out in the requested order: requesting them in file order (sorted) lets
// neighbours merge into large reads. `stats` (may be null) is added to.
Shard read_shard(const DatasetInfo& info, const std::vector<int64_t>& indices, MPI_Comm comm,
                 const MemoryBudget& budget = MemoryBudget::machine(), ShardReadStats* stats = nullptr);

// Where a file's /features and /labels lie when both can be read directly (see contiguous_offset); the same on
// every rank of `comm` (collective: the file is opened through MPI-IO and closed again). nullopt if either
// cannot be: such a file is read through HDF5 only.
struct DirectSource {
  int64_t features_at = 0;
  int64_t labels_at = -1;   // -1: a data set without labels
};
std::optional<DirectSource> probe_direct(const DatasetInfo& info, MPI_Comm comm);

// Bytes read_shard_direct holds for `indices` (values and bookkeeping).
int64_t shard_bytes(const DatasetInfo& info, const std::vector<int64_t>& indices);

// read_shard without MPI and without HDF5, for a file probe_direct located: safe on any thread while another
// makes HDF5 calls (this build's HDF5 is not thread-safe). `indices` must be valid (in range, distinct). The
// values are checked as read_shard checks them; a short read or a bad value throws UserError naming the file and
// the sequence.
Shard read_shard_direct(const DatasetInfo& info, const DirectSource& source, const std::vector<int64_t>& indices,
                        int threads, ShardReadStats* stats = nullptr);

}  // namespace ragtrain
