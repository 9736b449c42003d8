// NCCL in a one-rank communicator: the in-place sum leaves every element exactly as it was.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "../../src/backend/cuda/cuda_raii.hpp"
#include "../../src/backend/cuda/gpu_binding.hpp"
#include "../../src/backend/cuda/nccl_comm.hpp"
#include "gpu_test_util.hpp"

using namespace ragtrain;

TEST(GpuNccl, OneRankAllreduceLeavesTheSumIntact) {
  RT_SKIP_WITHOUT_GPU();
  bind_gpu(0, MPI_COMM_SELF);
  NcclComm comm(MPI_COMM_SELF);
  ASSERT_EQ(comm.size(), 1);
  Stream s = Stream::create();
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{18113}, int64_t{(1 << 20) + 7}}) {
    std::vector<float> host(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) host[static_cast<size_t>(i)] = 0.25f * static_cast<float>(i % 1013) - 100.0f;
    DeviceBuffer<float> d(static_cast<size_t>(n));
    ASSERT_EQ(cudaMemcpy(d.get(), host.data(), d.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    comm.allreduce_sum(d.get(), n, s.get());
    ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
    std::vector<float> back(static_cast<size_t>(n), -1.0f);
    ASSERT_EQ(cudaMemcpy(back.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(back, host) << n << " elements";
  }
}
