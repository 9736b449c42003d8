// The shared queue of a rung's training runs: one counter on world rank 0 that group leaders take the next run
// from with an atomic fetch-and-add (MPI one-sided), so a group that finishes early takes more runs and no rank
// waits for a dispatcher. Which group trains a run never changes its result (each run has its own seed), so the
// queue's order of arrival decides only who is busy, not what the search finds.
#pragma once

#include <mpi.h>

#include <cstdint>

namespace ragtrain {

class TrialQueue {
 public:
  // Collective over `world`: every rank creates it (MPI_Win_allocate); the counters start at 0.
  explicit TrialQueue(MPI_Comm world);
  ~TrialQueue();
  TrialQueue(const TrialQueue&) = delete;
  TrialQueue& operator=(const TrialQueue&) = delete;

  // The next job number (0, 1, 2, ... across all callers); a caller stops when it is past the rung's last job.
  int64_t take();
  // Counts one finished run; returns how many had finished before this one (for progress lines).
  int64_t finish();

 private:
  int64_t add(int slot);   // atomic fetch-and-add of 1 on counter `slot` of rank 0
  MPI_Win win_ = MPI_WIN_NULL;
  int64_t* base_ = nullptr;   // (2) on rank 0: next job, runs finished; unused elsewhere
};

}  // namespace ragtrain
