// The NCCL communicator of a backend (RAII), bootstrapped over MPI, and the typed in-place sum. Non-blocking
// (ncclConfig_t::blocking = 0), so that no NCCL call ever holds the host: a peer that died or stopped leaves
// NCCL's kernel waiting forever, and only a host that is free to look at the clock can give up on it
// (--comm-timeout, comm/watchdog.hpp), ncclCommAbort the communicator and name the missing rank.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdint>
#include <string>

#include "ragtrain/comm/watchdog.hpp"

namespace ragtrain {

// NCCL's datatype for T, so element counts and types never drift apart.
template <class T> struct NcclType;
template <> struct NcclType<float> { static constexpr ncclDataType_t value = ncclFloat32; };
template <> struct NcclType<double> { static constexpr ncclDataType_t value = ncclFloat64; };
template <> struct NcclType<int32_t> { static constexpr ncclDataType_t value = ncclInt32; };

class NcclComm {
 public:
  // Collective over `comm`: rank 0 makes the unique id, MPI_Bcast shares it, every rank joins with
  // ncclCommInitRankConfig and polls until the set-up is done. The calling thread's current device must
  // already be this rank's GPU. `watchdog` (may be null: tests, bench) bounds the waits of the training loop.
  explicit NcclComm(MPI_Comm comm, CommWatchdog* watchdog = nullptr);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // In-place sum of `count` elements (an element count, not bytes) on `stream`. Returns once it is enqueued
  // (a first call may have to connect to the peers first: that wait has the deadline).
  template <class T>
  void allreduce_sum(T* buf, int64_t count, cudaStream_t stream) {
    allreduce_sum_raw(buf, count, NcclType<T>::value, stream);
  }

  // The deadline of a host wait that starts now (never without an armed watchdog).
  Deadline deadline() const { return watchdog_ ? watchdog_->deadline() : Deadline::never(); }

  // Call now and then while the host waits for GPU work that includes this communicator's collectives: an
  // asynchronous NCCL error, or `deadline` passed, aborts the communicator and ends the job through
  // fail(what); otherwise answers the watchdog's neighbour. About a microsecond.
  void check(const Deadline& deadline, const char* what);

  // ncclCommAbort (NCCL's kernels on the GPU quit), then CommWatchdog::fail: names the missing rank and ends the
  // job. Without a watchdog, throws InternalError instead. `detail` empty: the deadline passed.
  [[noreturn]] void fail(const char* what, const std::string& detail);

  int size() const { return size_; }
  int rank() const { return rank_; }

 private:
  void allreduce_sum_raw(void* buf, int64_t count, ncclDataType_t type, cudaStream_t stream);
  // Polls ncclCommGetAsyncError while it says ncclInProgress (a non-blocking call still working), checking
  // `deadline`; returns the final state.
  ncclResult_t settle(const Deadline& deadline, const char* what);
  ncclComm_t comm_ = nullptr;
  CommWatchdog* watchdog_ = nullptr;
  bool aborted_ = false;
  int rank_ = 0, size_ = 1;
};

}  // namespace ragtrain
