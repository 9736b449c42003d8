// The CUDA backend against the CPU reference: loss and every gradient within 1e-5 relative for lengths 1, 2, 7,
// 130, 2000, layers 1-3, both tasks, one and several sequences per step, every cuDNN algorithm, with and without
// CUDA graphs; 100 SGD steps (parameters within 1e-4) and 100 Adam/AdamW steps (losses within 1e-3); inference; the
// tuning knobs from the environment (no GPU needed).
//
// Tolerances: |gpu - ref| <= atol + 1e-5 |ref| per element, atol = 1e-5 * max|ref| of the tensor (near-zero
// entries are judged against their tensor's scale). cuDNN's persistent kernels (the fast algorithms) are less
// precise than its standard algorithm: against a float64 reference they are off by up to ~3e-5 relative on the
// large entries and ~1e-3 on small, cancelling ones, where the standard algorithm and the CPU stay near 1e-6 and
// 5e-5. The standard algorithm is therefore also checked with a ten times smaller atol (EveryAlgorithm).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "../../src/backend/cuda/cuda_backend.hpp"
#include "agreement.hpp"
#include "gpu_test_util.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/data/synthetic.hpp"

using namespace ragtrain;
using namespace ragtrain::gputest;

namespace {

struct ShapeCase {
  int64_t F, H, L, C;
  Task task;
};

void gradient_grid(const ShapeCase& sc, const std::vector<int64_t>& lengths, const CudaTuning& tuning = {},
                   double atol_scale = kGradAtolScale) {
  const ModelShape shape{sc.F, sc.H, sc.L, sc.C, sc.task};
  GridPair g = grid_pair(shape, lengths, tuning);
  const std::string base = RT_MSG((sc.task == Task::Classification ? "cls" : "reg") << " F" << sc.F << " H" << sc.H
                                                                                     << " L" << sc.L << " "
                                                                                     << rnn_algo_name(g.gpu->algorithm()));
  // Each length twice: the first run uses plain launches, the second captures and replays a CUDA graph.
  check_grid(g, ParamLayout(shape), base, 2, atol_scale);
}

const std::vector<int64_t> kLengths = {1, 2, 7, 130, 2000};

}  // namespace

TEST(GpuAgreement, ClassificationOneLayer) {
  RT_SKIP_WITHOUT_GPU();
  gradient_grid({36, 50, 1, 10, Task::Classification}, kLengths);
}

TEST(GpuAgreement, ClassificationTwoLayers) {
  RT_SKIP_WITHOUT_GPU();
  gradient_grid({36, 50, 2, 10, Task::Classification}, kLengths);
}

TEST(GpuAgreement, ClassificationThreeLayers) {
  RT_SKIP_WITHOUT_GPU();
  gradient_grid({36, 50, 3, 10, Task::Classification}, kLengths);
}

TEST(GpuAgreement, RegressionOneLayer) {
  RT_SKIP_WITHOUT_GPU();
  gradient_grid({5, 19, 1, 3, Task::Regression}, kLengths);
}

TEST(GpuAgreement, RegressionTwoLayers) {
  RT_SKIP_WITHOUT_GPU();
  gradient_grid({5, 19, 2, 3, Task::Regression}, kLengths);
}

TEST(GpuAgreement, RegressionThreeLayers) {
  RT_SKIP_WITHOUT_GPU();
  gradient_grid({7, 33, 3, 2, Task::Regression}, kLengths);
}

TEST(GpuAgreement, LargeHidden) {
  RT_SKIP_WITHOUT_GPU();
  gradient_grid({36, 256, 1, 10, Task::Classification}, {1, 7, 130});
  gradient_grid({36, 256, 2, 10, Task::Classification}, {2, 95});
}

// Every algorithm cuDNN runs for the shape maps the weights the same way (gate order, double bias).
TEST(GpuAgreement, EveryAlgorithm) {
  RT_SKIP_WITHOUT_GPU();
  int ran = 0;
  for (const char* algo : {"standard", "persist_static", "persist_static_small_h", "persist_dynamic"}) {
    CudaTuning t;
    t.algo = algo;
    try {
      const bool standard = std::string(algo) == "standard";
      gradient_grid({36, 50, 2, 10, Task::Classification}, {1, 7, 130, 2000}, t,
                    standard ? kGradAtolScale / 10 : kGradAtolScale);
      ++ran;
    } catch (const std::exception& e) {   // cuDNN refused this algorithm for the shape or for some length
      std::printf("[ agree    ] algorithm %s not usable here: %.300s\n", algo, e.what());
    }
  }
  EXPECT_GE(ran, 2) << "standard and persist_static run every LSTM shape";
}

TEST(GpuAgreement, WithoutGraphs) {
  RT_SKIP_WITHOUT_GPU();
  CudaTuning t;
  t.graphs = false;
  gradient_grid({36, 50, 2, 10, Task::Classification}, {1, 7, 130}, t);
}

namespace {

// Trains both backends for `steps` steps of `per_step` sequences each on the same data and schedule.
struct Trajectory {
  std::vector<double> losses, norms;
  std::vector<float> params;
  std::vector<float> m;
  int64_t steps_taken = 0;
};

Trajectory train(Backend& b, const ModelShape& shape, const Shard& shard, int steps, float lr, int per_step) {
  Trajectory t;
  b.set_params(init_params(ParamLayout(shape), 42));
  b.set_train_shard(shard);
  const int64_t n = shard.size();
  for (int s = 0; s < steps; ++s) {
    std::vector<int64_t> batch;
    for (int k = 0; k < per_step; ++k) batch.push_back((static_cast<int64_t>(per_step) * s + k) % n);
    b.forward_backward(batch);
    b.allreduce();
    const StepTotals tot = b.update(lr);
    t.losses.push_back(tot.loss_sum / tot.count);
    t.norms.push_back(tot.grad_norm);
  }
  t.params = b.params();
  t.m = b.optimizer_state().m;
  t.steps_taken = b.optimizer_state().steps_taken;
  return t;
}

Shard synthetic_shard(const ModelShape& shape, int64_t n, int64_t max_length) {
  SyntheticSpec spec;
  spec.sequences = n;
  spec.features = shape.input_size;
  spec.min_length = 1;
  spec.max_length = max_length;
  spec.classes = shape.outputs;
  spec.task = shape.task;
  spec.outputs = shape.outputs;
  spec.seed = 5;
  const RaggedData d = make_synthetic(spec);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  return ragtrain::make_shard(d, idx);
}

// SGD: parameters within 1e-4 of the CPU's. strict: elementwise |a - b| <= 1e-4 |b| + 1e-6 (the standard
// algorithm); otherwise per tensor, max |a - b| <= 1e-4 max |b| (the persistent kernels' rounding, above).
void compare_training(const ModelShape& shape, const std::string& optimizer, float lr, double clip,
                      const CudaTuning& tuning = {}, bool strict = false, int per_step = 2) {
  BackendOptions g = options("cuda", optimizer, per_step), c = options("cpu", optimizer);
  g.optimizer.clip = c.optimizer.clip = clip;
  g.optimizer.weight_decay = c.optimizer.weight_decay = 1e-3;
  const Shard shard = synthetic_shard(shape, 40, 60);
  CudaBackend gpu(shape, g, tuning);
  auto cpu = make_backend(shape, c);
  const Trajectory tg = train(gpu, shape, shard, 100, lr, per_step);
  const Trajectory tc = train(*cpu, shape, shard, 100, lr, per_step);
  double worst_loss = 0, worst_param = 0;
  for (size_t i = 0; i < tg.losses.size(); ++i) worst_loss = std::max(worst_loss, rel(tg.losses[i], tc.losses[i]));
  for (size_t i = 0; i < tg.params.size(); ++i)
    worst_param = std::max(worst_param, std::fabs(tg.params[i] - tc.params[i]) / (1e-2 + std::fabs(tc.params[i])));
  const ParamLayout layout(shape);
  std::vector<double> ref(tc.params.begin(), tc.params.end());
  const Agreement normwise = compare_params(layout, tg.params, ref, 0.0, 1e-4);
  std::printf("[ agree    ] 100 %s steps of K=%d (%s L%lld H%lld, clip %.1f, %s): loss %.4f -> %.4f, max loss rel %.2e, "
              "max param diff %.2e (rel to 1e-2+|p|), per-tensor max|diff|/max|p| %.2e\n",
              optimizer.c_str(), per_step, task_name(shape.task), static_cast<long long>(shape.layers),
              static_cast<long long>(shape.hidden), clip, rnn_algo_name(gpu.algorithm()), tc.losses.front(),
              tc.losses.back(), worst_loss, worst_param, 1e-4 * normwise.worst_ratio);
  EXPECT_EQ(tg.steps_taken, tc.steps_taken);
  const std::vector<float> init = init_params(ParamLayout(shape), 42);
  double moved = 0;
  for (size_t i = 0; i < init.size(); ++i) moved = std::max(moved, static_cast<double>(std::fabs(tc.params[i] - init[i])));
  EXPECT_GT(moved, 1e-3) << "the parameters should move";
  if (optimizer == "sgd") {
    if (strict) {
      for (size_t i = 0; i < tg.params.size(); ++i)
        ASSERT_LE(std::fabs(tg.params[i] - tc.params[i]), 1e-4 * std::fabs(tc.params[i]) + 1e-6)
            << "parameter " << i << " after 100 SGD steps";
    }
    EXPECT_TRUE(normwise.ok) << "after 100 SGD steps: " << normwise.first_failure;
    for (size_t i = 0; i < tg.losses.size(); ++i) EXPECT_LE(rel(tg.losses[i], tc.losses[i]), 1e-4) << "step " << i;
  } else {
    for (size_t i = 0; i < tg.losses.size(); ++i) EXPECT_LE(rel(tg.losses[i], tc.losses[i]), 1e-3) << "step " << i;
  }
  // Optimizer state in PyTorch layout (checkpoints) comes back from the device in the same order.
  double worst_m = 0, scale_m = 0;
  for (size_t i = 0; i < tg.m.size(); ++i) {
    worst_m = std::max(worst_m, static_cast<double>(std::fabs(tg.m[i] - tc.m[i])));
    scale_m = std::max(scale_m, static_cast<double>(std::fabs(tc.m[i])));
  }
  EXPECT_LE(worst_m, 1e-2 * scale_m) << "optimizer moments";
}

}  // namespace

TEST(GpuTraining, Sgd100StepsClassification) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({36, 50, 2, 10, Task::Classification}, "sgd", 0.05f, 1.0);
}

TEST(GpuTraining, Sgd100StepsClassificationStandardAlgorithmStrict) {
  RT_SKIP_WITHOUT_GPU();
  CudaTuning t;
  t.algo = "standard";
  compare_training({36, 50, 2, 10, Task::Classification}, "sgd", 0.05f, 1.0, t, /*strict=*/true);
}

TEST(GpuTraining, Sgd100StepsRegression) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({5, 19, 1, 3, Task::Regression}, "sgd", 0.05f, 0.0);
}

// K = 16 sequences of lengths 1..60 per step in one cuDNN call (padded layout, graphs per padded length).
TEST(GpuTraining, Sgd100StepsBatch16Classification) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({36, 50, 1, 10, Task::Classification}, "sgd", 0.05f, 1.0, {}, false, 16);
}

TEST(GpuTraining, Adam100StepsClassification) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({36, 50, 1, 10, Task::Classification}, "adam", 3e-3f, 0.0);
}

TEST(GpuTraining, AdamW100StepsRegressionThreeLayers) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({5, 19, 3, 3, Task::Regression}, "adamw", 3e-3f, 0.5);
}

TEST(GpuBackend, InferMatchesCpu) {
  RT_SKIP_WITHOUT_GPU();
  const ModelShape shape{36, 50, 2, 10, Task::Classification};
  CudaBackend gpu(shape, options("cuda", "adam"));
  auto cpu = make_backend(shape, options("cpu", "adam"));
  const std::vector<float> p = init_params(ParamLayout(shape), 3);
  gpu.set_params(p);
  cpu->set_params(p);
  const Shard shard = make_shard(shape, {1, 5, 130, 64, 2}, 8);
  const std::vector<float> a = gpu.infer(shard), b = cpu->infer(shard);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * (1.0 + std::fabs(b[i]))) << i;
  EXPECT_EQ(gpu.params(), p) << "set_params/params round trip through the weight space";
}

TEST(GpuBackend, AutoPicksCudaWhenAGpuIsVisible) {
  RT_SKIP_WITHOUT_GPU();
  auto b = make_backend(ModelShape{4, 8, 1, 3, Task::Classification}, options("auto", "adam"));
  EXPECT_EQ(b->name(), "cuda");
}

TEST(GpuBackend, PhaseTimesAreReported) {
  RT_SKIP_WITHOUT_GPU();
  const ModelShape shape{36, 50, 1, 10, Task::Classification};
  CudaBackend gpu(shape, options("cuda", "adam"));
  gpu.set_params(init_params(ParamLayout(shape), 1));
  const Shard shard = make_shard(shape, {60, 95, 130}, 4);
  gpu.set_train_shard(shard);
  for (int s = 0; s < 6; ++s) {
    gpu.forward_backward({s % 3});
    gpu.allreduce();
    gpu.update(1e-3f);
  }
  gpu.synchronize();
  const auto phases = gpu.take_phase_seconds();
  ASSERT_EQ(phases.size(), 4u);
  EXPECT_GT(phases[0].second, 0.0);   // forward_backward
  std::printf("[ agree    ] %s\n", gpu.describe().c_str());
}

// The CUDA backend's tuning knobs from the environment (doc/cli.md, "Environment"): each takes its documented values
// and refuses any other with a UserError that names the variable and says what to use. No GPU needed.
TEST(CudaTuningEnvironment, TakesTheDocumentedValuesAndRefusesOthers) {
  struct Knob {
    const char* name;
    std::vector<std::string> good;
    std::string bad;
  };
  const std::vector<Knob> knobs = {{"RAGTRAIN_CUDNN_ALGO", {"auto", "standard", "persist_static"}, "fastest"},
                                   {"RAGTRAIN_CUDA_GRAPHS", {"0", "1"}, "yes"},
                                   {"RAGTRAIN_CUDA_BATCH_LAYOUT", {"padded", "ragged"}, "packed"},
                                   {"RAGTRAIN_FUSED_GROUPS", {"0", "1"}, "2"},
                                   {"RAGTRAIN_FUSED_GROUP_PLAN", {"0", "1"}, "on"}};
  for (const Knob& k : knobs) {
    for (const std::string& v : k.good) {
      ASSERT_EQ(setenv(k.name, v.c_str(), 1), 0);
      EXPECT_NO_THROW(CudaTuning::from_environment()) << k.name << "=" << v;
    }
    ASSERT_EQ(setenv(k.name, k.bad.c_str(), 1), 0);
    try {
      CudaTuning::from_environment();
      ADD_FAILURE() << k.name << "=" << k.bad << " was taken";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(k.name), std::string::npos) << e.what();
      EXPECT_FALSE(e.hint().empty()) << k.name;
    }
    unsetenv(k.name);
  }
  ASSERT_EQ(setenv("RAGTRAIN_FUSED_GROUPS", "0", 1), 0);
  EXPECT_FALSE(CudaTuning::from_environment().fused_groups);
  unsetenv("RAGTRAIN_FUSED_GROUPS");
  EXPECT_TRUE(CudaTuning::from_environment().fused_groups);
}
