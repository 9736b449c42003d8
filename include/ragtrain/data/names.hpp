// Sequence names (/names, optional in format v1): the rules a name follows, and reading and writing them.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ragtrain/data/format.hpp"

namespace ragtrain {

// The longest name, in UTF-8 bytes: a file name fits many times over; a name is not a place for data.
inline constexpr size_t kMaxNameBytes = 1024;

// `names` are N valid names (doc/data-format.md, "Sequence names"): 1..kMaxNameBytes bytes of UTF-8 without
// control characters, all distinct, since a name stands for one sequence. Throws UserError starting with `where`
// (e.g. "data.h5: dataset /names") and naming the first bad index, with a hint.
void check_sequence_names(const std::string& where, const std::vector<std::string>& names, int64_t n);

// "0", "1", ..., "n-1": the names of sequences known only by their position in the input (.ts, .npz).
std::vector<std::string> index_names(int64_t n);

// Reads and checks all of /names of a file whose header read_dataset_info accepted with has_names. Serial (this
// process alone, MPI_COMM_SELF); the bytes it allocates are checked against `budget` first.
std::vector<std::string> read_sequence_names(const DatasetInfo& info, const MemoryBudget& budget);

// Writes `names` as /names into an open file: fixed-length UTF-8 strings, NUL-padded, as wide as the longest.
void write_sequence_names(hid_t file, const std::vector<std::string>& names);

}  // namespace ragtrain
