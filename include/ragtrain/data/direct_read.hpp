// Reads of a data set's values without HDF5: where a contiguous, unfiltered dataset lies in the file, and byte
// ranges of a file read with pread from several threads straight into their final place.
#pragma once

#include <hdf5.h>
#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ragtrain {

// The byte offset in the file of element 0 of `dset` when its values can be copied from the file as they are:
// contiguous layout, storage allocated, no external files, and the file's datatype identical to `mem_type`
// (so no conversion, e.g. of byte order, is needed). nullopt otherwise: the caller then reads through HDF5.
// The offset is checked by reading the first and last element both ways, so a layout this code misreads falls
// back instead of returning wrong values.
std::optional<int64_t> contiguous_offset(const std::string& path, hid_t dset, hid_t mem_type);

// `bytes` bytes at `file_offset` go to `dest`. `sequence` is the global index of the first sequence the range
// holds, for messages.
struct ByteRange {
  int64_t file_offset = 0;
  int64_t bytes = 0;
  char* dest = nullptr;
  int64_t sequence = 0;
};

// Appends a range, merging it into the previous one when both its file bytes and its destination follow on.
void append_range(std::vector<ByteRange>& ranges, const ByteRange& r);

// What went wrong with one range: the file was shorter than it (truncated) or the read failed (errno text).
struct ReadFailure {
  int64_t sequence = 0;
  std::string what;
};

// Reads every range of `path` with pread, `threads` threads taking pieces of at most `piece_bytes` in turn (a
// long run is split so that the threads share it, and each request stays large). Independent POSIX reads are
// thread-safe, unlike this build's HDF5. Returns the failure of the earliest range that failed, or nullopt.
std::optional<ReadFailure> read_ranges(const std::string& path, const std::vector<ByteRange>& ranges, int threads,
                                       int64_t piece_bytes = int64_t{8} << 20);

// Threads one rank reads and checks with: the cores of its node shared among the ranks on it (at least 1, at
// most 16: past that a page-cache copy is bound by memory bandwidth). Collective over `comm`.
int reader_threads(MPI_Comm comm);

}  // namespace ragtrain
