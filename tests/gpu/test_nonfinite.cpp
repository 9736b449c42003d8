// The CUDA backend handles a non-finite step like the CPU reference: a regression target of 3e38 (finite) makes
// the squared error Inf; the fused optimizer kernel then applies nothing (parameters, moments, step count stay),
// zeroes the gradient buffer, and the host learns it from the totals it reads anyway; first_nonfinite names the
// same slot; the next good step continues exactly as if the bad one had not been there. With SGD and Adam.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "../../src/backend/cuda/cuda_backend.hpp"
#include "agreement.hpp"
#include "gpu_test_util.hpp"

using namespace ragtrain;
using namespace ragtrain::gputest;

namespace {

StepTotals step(Backend& b, const std::vector<int64_t>& positions, float lr) {
  b.forward_backward(positions);
  b.allreduce();
  return b.update(lr);
}

void skips_like_the_cpu(const std::string& optimizer) {
  const ModelShape shape{4, 16, 1, 2, Task::Regression};
  const ParamLayout layout(shape);
  Shard shard = make_shard(shape, {5, 9, 7}, 11);
  shard.targets[1 * 2 + 0] = 3e38f;   // sequence 1: finite in the file, Inf once squared
  CudaTuning standard;
  standard.algo = "standard";   // both GPU backends compute with the same algorithm
  CudaBackend gpu(shape, options("cuda", optimizer, 2), standard);   // steps of two sequences
  auto cpu = make_backend(shape, options("cpu", optimizer));
  const std::vector<float> init = init_params(layout, 8);
  gpu.set_params(init);
  cpu->set_params(init);
  gpu.set_train_shard(shard);
  cpu->set_train_shard(shard);

  // Two good steps first, so that a skipped update would have moments to spoil.
  for (int k = 0; k < 2; ++k) {
    EXPECT_TRUE(step(gpu, {0, 2}, 0.01f).finite);
    EXPECT_TRUE(step(*cpu, {0, 2}, 0.01f).finite);
  }
  const std::vector<float> before = gpu.params();
  const std::vector<float> m_before = gpu.optimizer_state().m;

  const StepTotals g = step(gpu, {1, 0}, 0.01f), c = step(*cpu, {1, 0}, 0.01f);
  EXPECT_FALSE(g.finite) << "loss " << g.loss_sum << " norm " << g.grad_norm;
  EXPECT_FALSE(c.finite);
  EXPECT_EQ(gpu.params(), before) << "the kernel must not update on a non-finite step";
  EXPECT_EQ(gpu.optimizer_state().m, m_before) << "nor touch the moments";
  EXPECT_EQ(gpu.optimizer_state().steps_taken, 2);
  EXPECT_EQ(cpu->optimizer_state().steps_taken, 2);

  const LocalNonfinite wg = gpu.first_nonfinite({0, -1, 1}), wc = cpu->first_nonfinite({0, -1, 1});
  EXPECT_EQ(wg.slot, 2);
  EXPECT_EQ(wc.slot, 2);
  EXPECT_TRUE(wg.loss);
  EXPECT_EQ(gpu.first_nonfinite({0, 2}).slot, -1);

  // Good steps after it: the same as a GPU backend that never saw the bad step, and close to the CPU.
  CudaBackend fresh(shape, options("cuda", optimizer, 2), standard);
  fresh.set_params(init);
  fresh.set_train_shard(shard);
  for (int k = 0; k < 2; ++k) step(fresh, {0, 2}, 0.01f);
  for (int k = 0; k < 3; ++k) {
    const StepTotals a = step(gpu, {0, 2}, 0.01f), b = step(fresh, {0, 2}, 0.01f);
    step(*cpu, {0, 2}, 0.01f);
    ASSERT_TRUE(a.finite);
    EXPECT_NEAR(a.loss_sum, b.loss_sum, 1e-6 * std::fabs(b.loss_sum)) << "step " << k;
  }
  const std::vector<float> pg = gpu.params(), pf = fresh.params(), pc = cpu->params();
  for (size_t i = 0; i < pg.size(); ++i) {
    ASSERT_NEAR(pg[i], pf[i], 1e-6f * (1.0f + std::fabs(pf[i]))) << "parameter " << i << " vs the fresh GPU run";
    ASSERT_NEAR(pg[i], pc[i], 1e-4f * (1.0f + std::fabs(pc[i]))) << "parameter " << i << " vs the CPU";
  }
  EXPECT_EQ(gpu.optimizer_state().steps_taken, fresh.optimizer_state().steps_taken);
}

}  // namespace

TEST(GpuNonfinite, SgdSkipsTheStepLikeTheCpu) {
  RT_SKIP_WITHOUT_GPU();
  skips_like_the_cpu("sgd");
}

TEST(GpuNonfinite, AdamSkipsTheStepLikeTheCpu) {
  RT_SKIP_WITHOUT_GPU();
  skips_like_the_cpu("adam");
}
