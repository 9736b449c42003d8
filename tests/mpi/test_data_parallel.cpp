// Data-parallel properties on the CPU backend under mpirun -np 1..4: P ranks x 1 == 1 rank x P, uneven ends,
// bitwise reproducibility, and every rank stopping together on a user error.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <unordered_map>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/comm/context.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/data/synthetic.hpp"
#include "ragtrain/schedule/schedule.hpp"

using namespace ragtrain;

namespace {

RaggedData data_set(int64_t n, Task task) {
  SyntheticSpec spec;
  spec.sequences = n;
  spec.features = 5;
  spec.min_length = 1;
  spec.max_length = 23;
  spec.classes = 4;
  spec.task = task;
  spec.outputs = 3;
  spec.seed = 99;
  return make_synthetic(spec);
}

ModelShape shape_of(const RaggedData& d, int64_t layers = 2) {
  return ModelShape{d.num_features, 8, layers, d.num_outputs, d.task};
}

// Trains `steps` global steps with world size `world` and `k` per rank on communicator `comm`, playing rank
// `rank`; returns the final parameters (identical on every rank of comm).
std::vector<float> train(const RaggedData& data, MPI_Comm comm, int world, int rank, int64_t k, int64_t epochs,
                         const std::string& optimizer, std::vector<double>* losses = nullptr) {
  const ModelShape shape = shape_of(data);
  BackendOptions opts;
  opts.optimizer.kind = *parse_optimizer_kind(optimizer);
  opts.optimizer.clip = 5.0;
  opts.comm = comm;
  auto backend = make_backend(shape, opts);
  backend->set_params(init_params(ParamLayout(shape), 5));
  const Schedule sched(data.num_sequences(), world, k, 13);
  const Shard shard = make_shard(data, sched.rank_sequences(rank));
  backend->set_train_shard(shard);
  std::unordered_map<int64_t, int64_t> pos;
  for (int64_t p = 0; p < shard.size(); ++p) pos[shard.indices[static_cast<size_t>(p)]] = p;
  for (int64_t e = 0; e < epochs; ++e) {
    const Schedule::Epoch order = sched.epoch(e);
    for (int64_t s = 0; s < sched.steps_per_epoch(); ++s) {
      std::vector<int64_t> batch = order.rank_batch(s, rank);
      for (auto& i : batch) i = i < 0 ? -1 : pos.at(i);
      backend->forward_backward(batch);
      backend->allreduce();
      const StepTotals t = backend->update(optimizer == "sgd" ? 0.05f : 0.01f);
      if (losses) losses->push_back(t.loss_sum / t.count);
    }
  }
  return backend->params();
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(a[i] - b[i]) / (1e-3 + std::fabs(b[i])));
  return worst;
}

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

}  // namespace

// P ranks x 1 sequence == one rank x P sequences, over whole epochs including an uneven last step.
TEST(DataParallel, RanksTimesOneEqualsOneRankTimesP) {
  const int P = world_size(), r = world_rank();
  for (Task task : {Task::Classification, Task::Regression}) {
    const RaggedData data = data_set(4 * P + 3, task);   // N not a multiple of P when P > 1
    for (const std::string opt : {"sgd", "adam"}) {
      std::vector<double> dist_losses, single_losses;
      const auto distributed = train(data, MPI_COMM_WORLD, P, r, 1, 3, opt, &dist_losses);
      const auto single = train(data, MPI_COMM_SELF, 1, 0, P, 3, opt, &single_losses);
      ASSERT_EQ(dist_losses.size(), single_losses.size());
      for (size_t i = 0; i < dist_losses.size(); ++i)
        ASSERT_NEAR(dist_losses[i], single_losses[i], 1e-5 * std::fabs(single_losses[i]) + 1e-6) << "step " << i;
      EXPECT_LT(max_rel_diff(distributed, single), 1e-4) << opt << " " << task_name(task);
    }
  }
}

// Every rank ends with the same parameters, bit for bit (they apply identical updates).
TEST(DataParallel, RanksHoldIdenticalParameters) {
  const int P = world_size(), r = world_rank();
  const RaggedData data = data_set(3 * P + 1, Task::Classification);
  const auto params = train(data, MPI_COMM_WORLD, P, r, 2, 2, "adam");
  std::vector<float> root = params;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  EXPECT_EQ(params, root);
}

// Same seed and rank count: the same run, bitwise.
TEST(DataParallel, SameSeedSameBits) {
  const int P = world_size(), r = world_rank();
  const RaggedData data = data_set(5 * P + 2, Task::Classification);
  EXPECT_EQ(train(data, MPI_COMM_WORLD, P, r, 1, 2, "adam"), train(data, MPI_COMM_WORLD, P, r, 1, 2, "adam"));
}

// Fewer sequences than ranks: the ranks without data contribute nothing every step and nobody hangs.
TEST(DataParallel, MoreRanksThanSequences) {
  const int P = world_size(), r = world_rank();
  const RaggedData data = data_set(1, Task::Classification);
  const auto distributed = train(data, MPI_COMM_WORLD, P, r, 1, 2, "sgd");
  const auto single = train(data, MPI_COMM_SELF, 1, 0, 1, 2, "sgd");
  EXPECT_LT(max_rel_diff(distributed, single), 1e-6);
}

// A user error on one rank stops every rank with exit code 2, none left waiting.
TEST(DataParallel, UserErrorOnOneRankStopsAll) {
  const Context ctx = Context::create(MPI_COMM_WORLD);
  const int bad = ctx.size - 1;
  int code = 0;
  try {
    collective_phase(ctx, [&] {
      if (ctx.rank == bad) throw UserError("deliberate test failure on rank " + std::to_string(bad) + " (expected output)", "none");
    });
  } catch (const RunAborted& a) {
    code = a.code;
  }
  EXPECT_EQ(code, kExitUserError);
  int ok = 0;
  try {
    collective_phase(ctx, [] {});
  } catch (const RunAborted&) {
    ok = 1;
  }
  EXPECT_EQ(ok, 0);
}
