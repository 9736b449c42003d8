// The GPU side of the watchdog on one GPU: the NCCL communicator is non-blocking and works as before, and a host
// wait on a stream that never finishes (here: blocked by a host function that waits for a flag, as a stream with
// an NCCL kernel waits for a peer that never comes) gives up at the deadline, aborts the communicator and reports
// through the watchdog. Several GPUs with a real stopped rank: tests/e2e/test_faults_e2e.cpp does it on CPUs.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../../src/backend/cuda/cuda_raii.hpp"
#include "../../src/backend/cuda/gpu_binding.hpp"
#include "../../src/backend/cuda/nccl_comm.hpp"
#include "gpu_test_util.hpp"
#include "ragtrain/comm/watchdog.hpp"

using namespace ragtrain;

namespace {

struct Fired {
  int code;
  std::string message;
};

// Runs on CUDA's callback thread and holds the stream until the flag is set (no CUDA calls allowed here).
void CUDART_CB hold_until_released(void* flag) {
  auto* f = static_cast<std::atomic<bool>*>(flag);
  while (!f->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace

TEST(GpuWatchdog, AStreamThatNeverFinishesTimesOutAbortsNcclAndReports) {
  RT_SKIP_WITHOUT_GPU();
  bind_gpu(0, MPI_COMM_SELF);
  const Context ctx = Context::create(MPI_COMM_SELF);
  CommWatchdog wd(ctx, 1.0, 0.2, [](int c, const std::string& m) { throw Fired{c, m}; });
  wd.arm();
  wd.set_step(3);
  NcclComm comm(MPI_COMM_SELF, &wd);
  Stream s = Stream::create();

  // The non-blocking communicator sums as before (one rank: the buffer itself).
  std::vector<float> host(1000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = 0.5f * static_cast<float>(i);
  DeviceBuffer<float> d(host.size());
  ASSERT_EQ(cudaMemcpy(d.get(), host.data(), d.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  comm.allreduce_sum(d.get(), static_cast<int64_t>(host.size()), s.get());
  Event done = Event::create(false);
  ASSERT_EQ(cudaEventRecord(done.get(), s.get()), cudaSuccess);
  for (const Deadline dl = comm.deadline(); cudaEventQuery(done.get()) == cudaErrorNotReady;)
    comm.check(dl, "the test all-reduce");   // completes long before the deadline: no throw
  std::vector<float> back(host.size());
  ASSERT_EQ(cudaMemcpy(back.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);

  // A stream held (like a stream whose NCCL kernel waits for a peer that never comes): the wait gives up after
  // the time-out, not before, aborts the communicator and reports. ncclCommAbort itself waits for the device's
  // queued work, which NCCL's own kernels would end on the abort flag; this test's host function ends by itself
  // 2.5 s in instead. The failure path must report either way (it waits at most 3 s for the abort).
  std::atomic<bool> release{false};
  ASSERT_EQ(cudaLaunchHostFunc(s.get(), hold_until_released, &release), cudaSuccess);
  std::thread releaser([&release] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    release = true;
  });
  ASSERT_EQ(cudaEventRecord(done.get(), s.get()), cudaSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  std::string message;
  int code = 0;
  try {
    for (const Deadline dl = comm.deadline(); cudaEventQuery(done.get()) == cudaErrorNotReady;)
      comm.check(dl, "the test all-reduce");
    message = "the wait ended without a time-out";
  } catch (const Fired& f) {
    message = f.message;
    code = f.code;
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  releaser.join();
  EXPECT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);   // the stream drains once released
  EXPECT_EQ(code, kExitPeerFailure);
  EXPECT_GE(waited, 1.0);
  EXPECT_LT(waited, 10.0);
  EXPECT_NE(message.find("the test all-reduce in step 3 did not complete within 1 s"), std::string::npos) << message;
  // The communicator was aborted: a later call reports instead of touching it.
  try {
    comm.allreduce_sum(d.get(), static_cast<int64_t>(host.size()), s.get());
    ADD_FAILURE() << "an all-reduce on an aborted communicator was accepted";
  } catch (const Fired& f) {
    EXPECT_NE(f.message.find("the communicator was aborted earlier"), std::string::npos) << f.message;
  }
}
