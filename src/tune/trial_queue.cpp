// The rung's shared job counter: MPI one-sided fetch-and-add on world rank 0.
#include "ragtrain/tune/trial_queue.hpp"

#include "ragtrain/core/error.hpp"

namespace ragtrain {

TrialQueue::TrialQueue(MPI_Comm world) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  const MPI_Aint bytes = rank == 0 ? static_cast<MPI_Aint>(2 * sizeof(int64_t)) : 0;
  MPI_CHECK(MPI_Win_allocate(bytes, sizeof(int64_t), MPI_INFO_NULL, world, &base_, &win_));
  if (rank == 0) {
    MPI_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win_));
    base_[0] = base_[1] = 0;
    MPI_CHECK(MPI_Win_unlock(0, win_));
  }
  // Nobody takes a job before rank 0 has zeroed the counters.
  MPI_CHECK(MPI_Barrier(world));
}

TrialQueue::~TrialQueue() {
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);   // collective: every rank leaves the rung together
}

int64_t TrialQueue::add(int slot) {
  const int64_t one = 1;
  int64_t before = 0;
  MPI_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win_));
  MPI_CHECK(MPI_Fetch_and_op(&one, &before, MPI_INT64_T, 0, slot, MPI_SUM, win_));
  MPI_CHECK(MPI_Win_unlock(0, win_));
  return before;
}

int64_t TrialQueue::take() { return add(0); }
int64_t TrialQueue::finish() { return add(1); }

}  // namespace ragtrain
