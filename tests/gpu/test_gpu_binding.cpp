// Duplicate-GPU detection (a pure function over (host, uuid) pairs), the device choice per local rank, and the
// collective binding on this machine's GPU.
#include <gtest/gtest.h>
#include <mpi.h>

#include "../../src/backend/cuda/gpu_binding.hpp"
#include "gpu_test_util.hpp"

using namespace ragtrain;

TEST(GpuBinding, NoDuplicatesAcrossHostsOrDevices) {
  EXPECT_FALSE(find_shared_gpu({}).has_value());
  EXPECT_FALSE(find_shared_gpu({{"a", "GPU-1"}}).has_value());
  // The same UUID string on two hosts is two GPUs; two GPUs on one host are fine.
  EXPECT_FALSE(find_shared_gpu({{"a", "GPU-1"}, {"b", "GPU-1"}, {"a", "GPU-2"}, {"b", "GPU-2"}}).has_value());
}

TEST(GpuBinding, FindsTheFirstSharedPair) {
  const auto d = find_shared_gpu({{"n1", "GPU-0"}, {"n1", "GPU-1"}, {"n2", "GPU-0"}, {"n1", "GPU-1"}, {"n1", "GPU-0"}});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->first, 1);    // ranks 1 and 3 share n1's GPU-1: found before ranks 0 and 4
  EXPECT_EQ(d->second, 3);
  const auto two = find_shared_gpu({{"h", "GPU-x"}, {"h", "GPU-x"}});
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(two->first, 0);
  EXPECT_EQ(two->second, 1);
}

TEST(GpuBinding, HostsAreTheHostsNcclSees) {
  EXPECT_EQ(nccl_host_key("node7", nullptr), "node7");
  EXPECT_EQ(nccl_host_key("node7", ""), "");   // set but empty: NCCL takes "" as every such rank's host
  EXPECT_EQ(nccl_host_key("node7", "rank-3"), "rank-3");
  // Two ranks on one GPU of one machine, given different NCCL_HOSTID values: no shared GPU, as NCCL sees it.
  EXPECT_FALSE(find_shared_gpu({{nccl_host_key("vm", "rank-0"), "GPU-1"}, {nccl_host_key("vm", "rank-1"), "GPU-1"}})
                   .has_value());
  EXPECT_TRUE(find_shared_gpu({{nccl_host_key("vm", nullptr), "GPU-1"}, {nccl_host_key("vm", nullptr), "GPU-1"}})
                  .has_value());
}

TEST(GpuBinding, LocalRankModuloVisibleDevices) {
  EXPECT_EQ(device_for_local_rank(0, 1), 0);   // Slurm --gpus-per-task=1: every rank sees its own device 0
  EXPECT_EQ(device_for_local_rank(3, 1), 0);
  EXPECT_EQ(device_for_local_rank(3, 4), 3);
  EXPECT_EQ(device_for_local_rank(5, 4), 1);
}

TEST(GpuBinding, UuidLooksLikeNvidiaSmi) {
  const unsigned char b[16] = {0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xa, 0xb};
  EXPECT_EQ(format_gpu_uuid(b), "GPU-deadbeef-0001-0203-0405-060708090a0b");
}

TEST(GpuBinding, BindsThisRanksGpu) {
  RT_SKIP_WITHOUT_GPU();
  const GpuBinding b = bind_gpu(0, MPI_COMM_SELF);
  EXPECT_EQ(b.device, 0);
  EXPECT_GE(b.visible, 1);
  EXPECT_EQ(b.uuid.rfind("GPU-", 0), 0u) << b.uuid;
  std::printf("[ gpu      ] %s %s (%d visible)\n", b.name.c_str(), b.uuid.c_str(), b.visible);
}
