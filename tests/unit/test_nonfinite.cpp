// The CPU backend's non-finite step: a sequence whose squared error overflows (target 3e38, finite) makes the
// summed loss and gradient non-finite; update() then applies nothing (parameters, moments and step count stay
// as they were) and says so, and first_nonfinite finds that sequence. A good step afterwards trains as if the
// bad one had never been there.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/model/model.hpp"

using namespace ragtrain;

namespace {

// Three regression sequences of lengths 4, 6, 5 (F=3, K=2); sequence 1's first target is 3e38 when `poison`.
Shard shard(bool poison) {
  Shard s;
  s.task = Task::Regression;
  s.num_features = 3;
  s.num_outputs = 2;
  s.indices = {10, 11, 12};   // global indices differ from positions on purpose
  s.offsets = {0, 4, 10, 15};
  for (int64_t i = 0; i < 15 * 3; ++i) s.features.push_back(0.1f * static_cast<float>(i % 7) - 0.3f);
  s.targets = {0.5f, -0.5f, poison ? 3e38f : 0.25f, 0.75f, -1.0f, 1.0f};
  return s;
}

std::unique_ptr<Backend> backend(const ModelShape& shape) {
  BackendOptions o;
  o.comm = MPI_COMM_SELF;
  o.optimizer.kind = OptimizerKind::Adam;
  auto b = make_backend(shape, o);
  b->set_params(init_params(ParamLayout(shape), 5));
  return b;
}

StepTotals step(Backend& b, const std::vector<int64_t>& positions) {
  b.forward_backward(positions);
  b.allreduce();
  return b.update(0.01f);
}

}  // namespace

TEST(Nonfinite, CpuUpdateSkipsANonFiniteStepAndFindsTheSequence) {
  const ModelShape shape{3, 4, 1, 2, Task::Regression};
  const Shard bad = shard(true), good = shard(false);
  auto b = backend(shape);
  b->set_train_shard(bad);
  const std::vector<float> before = b->params();

  const StepTotals t = step(*b, {0, 1});
  EXPECT_FALSE(t.finite);
  EXPECT_FALSE(std::isfinite(t.loss_sum));
  EXPECT_EQ(b->params(), before) << "a non-finite step must not touch the parameters";
  EXPECT_EQ(b->optimizer_state().steps_taken, 0) << "nor the optimizer's step count";
  for (float m : b->optimizer_state().m) ASSERT_EQ(m, 0.0f) << "nor its moments";

  const LocalNonfinite where = b->first_nonfinite({2, 0, 1});
  EXPECT_EQ(where.slot, 2) << "position 1 is the third slot";
  EXPECT_TRUE(where.loss);
  EXPECT_EQ(b->first_nonfinite({0, -1, 2}).slot, -1) << "finite sequences alone are finite";

  // After the skipped step, a good one gives exactly what a fresh backend gives: nothing of the bad step stayed.
  const StepTotals next = step(*b, {0, 2});
  EXPECT_TRUE(next.finite);
  auto fresh = backend(shape);
  fresh->set_train_shard(good);
  const StepTotals ref = step(*fresh, {0, 2});
  EXPECT_EQ(next.loss_sum, ref.loss_sum);
  EXPECT_EQ(b->params(), fresh->params());
  EXPECT_EQ(b->optimizer_state().steps_taken, 1);
}
