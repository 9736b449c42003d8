// K > 1 sequences per step in one cuDNN call per direction against the CPU reference (which loops sequences): loss
// and every gradient for batches of different lengths with empty slots (-1, the uneven last step), in the padded
// layout (every sequence zero-padded at the end to the batch's longest length, head on its own last step) for every
// algorithm, in the ragged layout (per-sequence lengths in cuDNN's descriptor), first run, captured graph, and a
// graph replayed on another batch of the same shape (the repointed gather), for K = 32 and 128 of the bench's
// lengths. Same tolerance rules as test_cuda_backend.cpp (agreement.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "../../src/backend/cuda/cuda_backend.hpp"
#include "agreement.hpp"
#include "gpu_test_util.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/rng.hpp"

using namespace ragtrain;
using namespace ragtrain::gputest;

namespace {

// The batches of one run: each is checked in order on the same backend pair.
struct Case {
  ModelShape shape;
  std::vector<int64_t> lengths;                 // the shard
  std::vector<std::vector<int64_t>> batches;    // shard positions per step, -1 = empty slot
};

// Runs every batch of `c` through a fresh GPU backend with `tuning`; returns false when cuDNN refused the
// configuration (the message is printed), true when it ran (the checks themselves are gtest expectations).
bool run_case(const Case& c, const CudaTuning& tuning, const std::string& name, double atol_scale = kGradAtolScale) {
  const ParamLayout layout(c.shape);
  try {
    size_t widest = 1;   // the widest step of the case: the backend is built for it
    for (const std::vector<int64_t>& b : c.batches) widest = std::max(widest, b.size());
    CudaBackend gpu(c.shape, options("cuda", "sgd", static_cast<int64_t>(widest)), tuning);
    auto cpu = make_backend(c.shape, options("cpu", "sgd"));
    const std::vector<float> params = init_params(layout, 4321);
    gpu.set_params(params);
    cpu->set_params(params);
    const Shard shard = make_shard(c.shape, c.lengths, 17);
    gpu.set_train_shard(shard);
    cpu->set_train_shard(shard);
    for (size_t i = 0; i < c.batches.size(); ++i) {
      int64_t K = 0, T = 0;
      for (int64_t p : c.batches[i])
        if (p >= 0) ++K, T = std::max(T, shard.length(p));
      check_batch(gpu, *cpu, layout, params, shard, c.batches[i],
                  RT_MSG(name << " step " << i << " B=" << K << " T=" << T << " (" << batch_layout_name(gpu.batch_layout())
                              << ")"),
                  atol_scale);
    }
    return true;
  } catch (const InternalError& e) {   // cuDNN refused this algorithm / layout for some batch
    std::printf("[ agree    ] %s: not usable here: %.300s\n", name.c_str(), e.what());
    return false;
  } catch (const UserError& e) {   // a forced algorithm cuDNN cannot run is refused when the backend is built
    std::printf("[ agree    ] %s: refused at construction: %.300s\n", name.c_str(), e.what());
    return false;
  }
}

// Mixed lengths (1 .. 130) and the same padded shape twice with different sequences: step 0 runs plainly, step 1
// captures the (B=6, T=130) graph, step 2 replays it on other sequences, step 3 is a smaller uneven step.
Case mixed_case(const ModelShape& shape) {
  Case c{shape, {130, 1, 7, 64, 95, 2, 130, 60, 61, 129, 3, 100}, {}};
  c.batches = {{0, 1, -1, 2, 3, 4, 5},      // B=6, T=130 (first run), an empty slot in the middle
               {5, 4, 3, 2, 1, 0, -1},      // same shape: captured graph
               {6, 7, 8, 9, 10, 11, -1},    // same shape, other sequences: the gather node repointed
               {-1, 8, -1, 7, -1, -1, -1}}; // the uneven last step: B=2, T=61
  return c;
}

// K sequences per step of lengths uniform in [lo, hi], grouped as the balanced schedule groups them (sorted by
// length, consecutive K per step), plus a last step with empty slots.
Case bench_like_case(const ModelShape& shape, int64_t K, int64_t steps, int64_t lo, int64_t hi) {
  Case c{shape, {}, {}};
  Rng rng(7, 3);
  const int64_t n = K * steps - K / 2;
  for (int64_t i = 0; i < n; ++i) c.lengths.push_back(lo + static_cast<int64_t>(rng.below(static_cast<uint64_t>(hi - lo + 1))));
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return c.lengths[a] < c.lengths[b]; });
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<int64_t> b;
    for (int64_t k = 0; k < K; ++k) b.push_back(s * K + k < n ? order[static_cast<size_t>(s * K + k)] : -1);
    c.batches.push_back(b);
  }
  return c;
}

CudaTuning tuning(const std::string& algo, const std::string& layout, bool graphs = true) {
  CudaTuning t;
  t.algo = algo;
  t.layout = layout;
  t.graphs = graphs;
  return t;
}

}  // namespace

// The padded layout is exact for every algorithm: zero padding at the end, each head on its own last step, dy = 0
// elsewhere, so the states past a sequence's end add exact zeros to the gradients.
TEST(GpuBatch, PaddedEveryAlgorithm) {
  RT_SKIP_WITHOUT_GPU();
  int ran = 0;
  for (const char* algo : {"persist_static_small_h", "persist_static", "persist_dynamic", "standard"}) {
    const bool standard = std::string(algo) == "standard";
    ran += run_case(mixed_case({36, 50, 2, 10, Task::Classification}), tuning(algo, "padded"),
                    RT_MSG("cls F36 H50 L2 " << algo), standard ? kGradAtolScale / 10 : kGradAtolScale);
  }
  EXPECT_GE(ran, 3) << "standard, persist_static and persist_static_small_h run H=50 in the padded layout";
}

TEST(GpuBatch, PaddedRegressionThreeLayers) {
  RT_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(run_case(mixed_case({5, 19, 3, 3, Task::Regression}), tuning("auto", "padded"), "reg F5 H19 L3"));
}

TEST(GpuBatch, PaddedLargeHidden) {
  RT_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(run_case(mixed_case({36, 256, 1, 10, Task::Classification}), tuning("auto", "padded"), "cls H256 L1"));
}

TEST(GpuBatch, PaddedWithoutGraphs) {
  RT_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(run_case(mixed_case({36, 50, 1, 10, Task::Classification}), tuning("auto", "padded", false),
                       "cls H50 L1 no graphs"));
}

// Per-sequence lengths in cuDNN's descriptor: the standard algorithm must take them; the persistent ones are tried
// and their verdict printed (the backend falls back when cuDNN refuses).
TEST(GpuBatch, RaggedLayout) {
  RT_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(run_case(mixed_case({36, 50, 2, 10, Task::Classification}), tuning("standard", "ragged"),
                       "cls H50 L2 standard", kGradAtolScale / 10));
  EXPECT_TRUE(run_case(mixed_case({5, 19, 1, 3, Task::Regression}), tuning("standard", "ragged"), "reg H19 L1 standard"));
  for (const char* algo : {"persist_static_small_h", "persist_static", "persist_dynamic"})
    run_case(mixed_case({36, 50, 1, 10, Task::Classification}), tuning(algo, "ragged"), RT_MSG("ragged " << algo));
}

// The bench's shape and lengths at K = 32 (three steps: first run, capture, replay where shapes repeat) and a
// shorter-sequence K = 128 step (the CPU reference stays quick), with the automatic algorithm choice at batch K.
TEST(GpuBatch, BenchShapeK32AndK128) {
  RT_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(run_case(bench_like_case({36, 50, 1, 10, Task::Classification}, 32, 4, 60, 130), tuning("auto", "padded"),
                       "K=32 H50"));
  EXPECT_TRUE(run_case(bench_like_case({36, 50, 1, 10, Task::Classification}, 128, 2, 20, 40),
                       tuning("auto", "padded"), "K=128 H50"));
}
