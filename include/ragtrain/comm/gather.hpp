// Gathering a variable number of values per rank to rank 0 with 64-bit counts: MPI's own counts are int, so
// past 2^31 values (e.g. predict's outputs, sequences x classes) MPI_Gatherv cannot say how many.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace ragtrain {

// Collective over `comm`: every rank's `mine`, concatenated in rank order on rank 0 (empty elsewhere). Counts are
// int64_t; the values travel in point-to-point messages of at most `max_message` floats each (tests pass a tiny
// one to exercise the pieces).
std::vector<float> gather_to_root(const std::vector<float>& mine, MPI_Comm comm, int64_t max_message = 1 << 28);

}  // namespace ragtrain
