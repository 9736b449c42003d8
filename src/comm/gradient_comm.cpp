// MPI sum of the fused gradient buffer.
#include "ragtrain/comm/gradient_comm.hpp"

#include <algorithm>
#include <climits>

#include "ragtrain/comm/watchdog.hpp"
#include "ragtrain/core/error.hpp"

namespace ragtrain {

namespace {

template <class T> MPI_Datatype mpi_type();
template <> MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <> MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }

template <class T>
void allreduce_sum(T* buf, int64_t count, MPI_Comm comm, CommWatchdog* watchdog) {
  const bool watched = watchdog && watchdog->armed();
  // MPI counts are int: split buffers above 2^31-1 elements rather than squeeze an int64 into int.
  for (int64_t done = 0; done < count;) {
    const int n = static_cast<int>(std::min<int64_t>(count - done, INT_MAX));
    if (!watched) {
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf + done, n, mpi_type<T>(), MPI_SUM, comm));
    } else {
      MPI_Request req;
      watchdog->complete(MPI_Iallreduce(MPI_IN_PLACE, buf + done, n, mpi_type<T>(), MPI_SUM, comm, &req), req,
                         "the gradient all-reduce");
    }
    done += n;
  }
}

}  // namespace

void mpi_allreduce_sum(float* buf, int64_t count, MPI_Comm comm, CommWatchdog* watchdog) {
  allreduce_sum(buf, count, comm, watchdog);
}
void mpi_allreduce_sum(double* buf, int64_t count, MPI_Comm comm, CommWatchdog* watchdog) {
  allreduce_sum(buf, count, comm, watchdog);
}

}  // namespace ragtrain
