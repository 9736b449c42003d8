// NCCL bootstrap over MPI, the in-place sum, and the communicator's part of the watchdog.
#include "nccl_comm.hpp"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "ragtrain/core/error_cuda.hpp"

namespace ragtrain {

namespace {

// The longest the failure path waits for ncclCommAbort before it names the missing rank anyway.
constexpr double kAbortWaitSeconds = 3;

std::string nccl_error(ncclComm_t comm, ncclResult_t r) {
  const char* last = ncclGetLastError(comm);
  return RT_MSG("NCCL reported: " << ncclGetErrorString(r) << (last && *last ? RT_MSG(" (" << last << ")") : ""));
}

}  // namespace

NcclComm::NcclComm(MPI_Comm comm, CommWatchdog* watchdog) : watchdog_(watchdog) {
  MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  MPI_CHECK(MPI_Comm_size(comm, &size_));
  // Rank 0 sends a status with the id, so a failure there ends every rank instead of leaving them in MPI_Bcast.
  struct {
    ncclUniqueId id;
    int32_t rc;
  } boot{};
  if (rank_ == 0) boot.rc = static_cast<int32_t>(ncclGetUniqueId(&boot.id));
  MPI_CHECK(MPI_Bcast(&boot, sizeof boot, MPI_BYTE, 0, comm));
  if (boot.rc != ncclSuccess)
    throw InternalError(RT_MSG("ncclGetUniqueId on rank 0: " << ncclGetErrorString(static_cast<ncclResult_t>(boot.rc))));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&comm_, size_, boot.id, rank_, &config);
  if (r != ncclSuccess && r != ncclInProgress) NCCL_CHECK(r);
  // Set-up is not under the deadline (its duration differs legitimately between ranks and machines); a rank
  // that dies meanwhile ends the job through the launcher.
  const ncclResult_t state = settle(Deadline::never(), "the NCCL set-up");
  if (state != ncclSuccess) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
    throw InternalError(RT_MSG("ncclCommInitRankConfig: " << nccl_error(nullptr, state)));
  }
}

NcclComm::~NcclComm() {
  if (!comm_ || aborted_) return;
  // Finalize (flushes outstanding work; non-blocking: poll until it is done), then free. A communicator that
  // does not get there in time (a peer gone while this rank unwinds) is aborted instead of hanging the exit.
  ncclResult_t state = ncclCommFinalize(comm_);
  for (const Deadline limit = Deadline::after(10); state == ncclSuccess || state == ncclInProgress; sched_yield()) {
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) state = ncclInternalError;
    if (state != ncclInProgress || limit.passed()) break;
  }
  if (state == ncclSuccess)
    ncclCommDestroy(comm_);
  else
    ncclCommAbort(comm_);
}

ncclResult_t NcclComm::settle(const Deadline& deadline, const char* what) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
    if (q != ncclSuccess) return q;
    if (state != ncclInProgress) return state;
    if (deadline.passed()) fail(what, "");
    if (watchdog_) watchdog_->keep_alive();
    sched_yield();
  }
}

void NcclComm::allreduce_sum_raw(void* buf, int64_t count, ncclDataType_t type, cudaStream_t stream) {
  RT_CHECK(count >= 0, "negative element count " << count);
  const char* what = "the NCCL gradient all-reduce";
  if (aborted_) fail(what, "the communicator was aborted earlier");
  ncclResult_t r = ncclAllReduce(buf, buf, static_cast<size_t>(count), type, ncclSum, comm_, stream);
  // ncclInProgress: accepted, still being enqueued (e.g. the first call connects to the peers). The next NCCL
  // call may only come once the communicator is ready again.
  if (r == ncclInProgress) r = settle(deadline(), what);
  if (r != ncclSuccess) fail(what, nccl_error(comm_, r));
}

void NcclComm::check(const Deadline& deadline, const char* what) {
  if (aborted_) fail(what, "the communicator was aborted earlier");
  ncclResult_t state = ncclSuccess;
  const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
  if (q != ncclSuccess) fail(what, nccl_error(comm_, q));
  if (state != ncclSuccess && state != ncclInProgress) fail(what, nccl_error(comm_, state));
  if (deadline.passed()) fail(what, "");
  if (watchdog_) watchdog_->keep_alive();
}

void NcclComm::fail(const char* what, const std::string& detail) {
  // First free the GPU: NCCL's kernels see the abort flag and return, so the stream drains and the process can
  // end cleanly (MPI_Abort comes next) instead of leaving a kernel spinning on a peer that will never come.
  // ncclCommAbort also waits for work queued on the device; should that never finish, the naming must still
  // happen, so the abort runs on its own thread and this one goes on after kAbortWait at the latest (the
  // thread is left behind: MPI_Abort ends the process anyway).
  if (comm_ && !aborted_) {
    aborted_ = true;
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread([comm = comm_, done] {
      ncclCommAbort(comm);
      *done = true;
    }).detach();
    for (const Deadline limit = Deadline::after(kAbortWaitSeconds); !*done && !limit.passed();) {
      if (watchdog_) watchdog_->keep_alive();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (watchdog_) watchdog_->fail(what, detail);
  throw InternalError(RT_MSG(what << (detail.empty() ? std::string(" timed out") : ": " + detail)));
}

}  // namespace ragtrain
