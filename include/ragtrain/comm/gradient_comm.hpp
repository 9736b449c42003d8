// The one collective of a training step: an in-place sum of the fused gradient buffer over all ranks.
#pragma once

#include <mpi.h>

#include <cstdint>

namespace ragtrain {

class CommWatchdog;

// Sums `count` values in place over `comm` (host memory: the CPU backend's path). Deterministic for a fixed rank
// count: Open MPI picks the algorithm from (count, size) alone, and every rank receives the same bits.
// With an armed `watchdog` (train's loop) the sum is MPI_Iallreduce polled under --comm-timeout, so a dead or
// stopped rank ends the job with its name instead of a hang; otherwise it is a plain MPI_Allreduce.
void mpi_allreduce_sum(float* buf, int64_t count, MPI_Comm comm, CommWatchdog* watchdog = nullptr);
void mpi_allreduce_sum(double* buf, int64_t count, MPI_Comm comm, CommWatchdog* watchdog = nullptr);

}  // namespace ragtrain
