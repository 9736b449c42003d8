// The one collective of a training step: an in-place sum of the fused gradient buffer over all ranks.
#pragma once

#include <mpi.h>

#include <cstdint>

namespace ragtrain {

// Sums `count` values in place over `comm` with MPI_Allreduce (host memory: the CPU backend's path).
// Deterministic for a fixed rank count: Open MPI picks the algorithm from (count, size) alone.
void mpi_allreduce_sum(float* buf, int64_t count, MPI_Comm comm);
void mpi_allreduce_sum(double* buf, int64_t count, MPI_Comm comm);

}  // namespace ragtrain
