// gather_to_root: int64 counts, then each rank's values to rank 0 in pieces an int count can describe.
#include "ragtrain/comm/gather.hpp"

#include <algorithm>
#include <climits>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

std::vector<float> gather_to_root(const std::vector<float>& mine, MPI_Comm comm, int64_t max_message) {
  RT_CHECK(max_message > 0 && max_message <= INT_MAX, "message size " << max_message);
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  const int64_t local = static_cast<int64_t>(mine.size());
  std::vector<int64_t> counts(rank == 0 ? static_cast<size_t>(size) : 0);
  MPI_CHECK(MPI_Gather(&local, 1, MPI_INT64_T, counts.data(), 1, MPI_INT64_T, 0, comm));
  constexpr int kTag = 7411;   // any tag; the messages of one call are ordered per sender
  if (rank != 0) {
    for (int64_t at = 0; at < local; at += max_message)
      MPI_CHECK(MPI_Send(mine.data() + at, static_cast<int>(std::min(max_message, local - at)), MPI_FLOAT, 0, kTag,
                         comm));
    return {};
  }
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  std::vector<float> all(static_cast<size_t>(total));
  std::copy(mine.begin(), mine.end(), all.begin());
  int64_t offset = local;
  for (int r = 1; r < size; ++r) {
    const int64_t n = counts[static_cast<size_t>(r)];
    for (int64_t at = 0; at < n; at += max_message)
      MPI_CHECK(MPI_Recv(all.data() + offset + at, static_cast<int>(std::min(max_message, n - at)), MPI_FLOAT, r, kTag,
                         comm, MPI_STATUS_IGNORE));
    offset += n;
  }
  return all;
}

}  // namespace ragtrain
