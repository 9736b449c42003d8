// The model options on the GPU against the CPU reference: bidirectional x pooling x dropout (between layers and
// before the head), at K = 1 (every step through a CUDA graph once its shape repeats, replayed on other sequences)
// and at K > 1 with unequal lengths and empty slots; then inference (dropout off) against the reference forward.
// Same tolerance rules as test_cuda_backend.cpp (agreement.hpp).
#include <gtest/gtest.h>

#include <algorithm>

#include "../../src/backend/cuda/cuda_backend.hpp"
#include "agreement.hpp"
#include "gpu_test_util.hpp"
#include "ragtrain/core/error.hpp"

using namespace ragtrain;
using namespace ragtrain::gputest;

namespace {

constexpr uint64_t kSeed = 99;

struct OptionCase {
  bool bidirectional;
  Pool pool;
  double dropout;   // between layers and before the head
};

std::string name_of(const OptionCase& c, int64_t L) {
  return RT_MSG((c.bidirectional ? "bidi" : "uni") << " L" << L << " " << pool_name(c.pool) << " dropout " << c.dropout);
}

// Runs the batches through fresh backends; the shard's global indices are not its positions (as on any rank but a
// lone one), so a mask keyed by the wrong index shows.
// lstm: the path (the cuDNN cases pin the algorithm; Fused checks that the fused kernel ran), hidden: H.
void run_option_case(const OptionCase& c, int64_t L, const std::vector<int64_t>& lengths,
                     const std::vector<std::vector<int64_t>>& batches, const std::string& what,
                     LstmPath lstm = LstmPath::Cudnn, int64_t hidden = 16) {
  ModelShape shape{5, hidden, L, 4, Task::Classification, c.bidirectional, c.pool};
  const ParamLayout layout(shape);
  const DropoutRates rates{c.dropout, c.dropout};
  size_t widest = 1;   // the widest step: the backend is built for it
  for (const std::vector<int64_t>& b : batches) widest = std::max(widest, b.size());
  BackendOptions g = options("cuda", "sgd", static_cast<int64_t>(widest)), h = options("cpu", "sgd");
  g.dropout = h.dropout = rates;
  g.seed = h.seed = kSeed;
  CudaTuning tuning;
  tuning.algo = "standard";
  tuning.lstm = lstm;
  CudaBackend gpu(shape, g, tuning);
  auto cpu = make_backend(shape, h);
  const std::vector<float> params = init_params(layout, 4321);
  gpu.set_params(params);
  cpu->set_params(params);
  Shard shard = make_shard(shape, lengths, 17);
  for (size_t i = 0; i < shard.indices.size(); ++i) shard.indices[i] = 1000 + 7 * static_cast<int64_t>(i);
  gpu.set_train_shard(shard);
  cpu->set_train_shard(shard);
  for (size_t i = 0; i < batches.size(); ++i) {
    int64_t K = 0, T = 0;
    for (int64_t p : batches[i])
      if (p >= 0) ++K, T = std::max(T, shard.length(p));
    if (lstm == LstmPath::Fused) {
      ASSERT_TRUE(gpu.fused_active()) << name_of(c, L) << " H=" << hidden;
    }
    check_batch(gpu, *cpu, layout, params, shard, batches[i],
                RT_MSG(name_of(c, L) << " " << what << " step " << i << " B=" << K << " T=" << T), kGradAtolScale,
                rates, kSeed, 40 + static_cast<int64_t>(i));
  }
  // Inference: no dropout, the pooled head of every sequence.
  const std::vector<float> out = gpu.infer(shard);
  LstmCache<double> cache;
  const std::vector<double> p(params.begin(), params.end());
  for (int64_t s = 0; s < shard.size(); ++s) {
    const double* ref = lstm_forward(layout, p.data(), shard.x(s), shard.length(s), cache);
    for (int64_t k = 0; k < shape.outputs; ++k)
      EXPECT_NEAR(out[static_cast<size_t>(s * shape.outputs + k)], ref[k], 3e-5 + 1e-5 * std::fabs(ref[k]))
          << name_of(c, L) << " infer sequence " << s << " output " << k;
  }
  std::printf("[ options  ] %s %s: %s\n", name_of(c, L).c_str(), what.c_str(), gpu.describe().c_str());
}

const std::vector<int64_t> kLengths = {130, 1, 7, 64, 95, 2, 130, 60, 61, 129, 3, 100};
// Max pooling sends each unit's gradient to one step: on long sequences two steps within float rounding of each
// other would let the GPU and the CPU pick different ones, so its cases use short ones (same batch structure).
const std::vector<int64_t> kShortLengths = {10, 1, 7, 4, 9, 2, 10, 6, 6, 9, 3, 8};

// K = 1: lengths 130, 1, 130 (graph captured), 130 on another sequence (replayed), 7, 7.
const std::vector<std::vector<int64_t>> kSingle = {{0}, {1}, {6}, {0}, {2}, {2}};

// kSingle without the sequence of length 1.
const std::vector<std::vector<int64_t>> kSingleLonger = {{0}, {6}, {0}, {2}, {2}};

// K = 7 with empty slots, mixed lengths (1 .. 130), the same shape twice (capture, replay), an uneven last step.
const std::vector<std::vector<int64_t>> kBatched = {
    {0, 1, -1, 2, 3, 4, 5}, {5, 4, 3, 2, 1, 0, -1}, {6, 7, 8, 9, 10, 11, -1}, {-1, 8, -1, 7, -1, -1, -1}};

std::vector<OptionCase> every_option() {
  std::vector<OptionCase> out;
  for (bool bidi : {false, true})
    for (Pool pool : {Pool::Last, Pool::Mean, Pool::Max})
      for (double p : {0.0, 0.3}) out.push_back({bidi, pool, p});
  return out;
}

}  // namespace

TEST(GpuModelOptions, EveryOptionAtBatchOneWithGraphs) {
  RT_SKIP_WITHOUT_GPU();
  for (const OptionCase& c : every_option())
    run_option_case(c, 2, c.pool == Pool::Max ? kShortLengths : kLengths, kSingle, "K=1");
}

TEST(GpuModelOptions, EveryOptionAtBatchSevenRagged) {
  RT_SKIP_WITHOUT_GPU();
  for (const OptionCase& c : every_option())
    run_option_case(c, 2, c.pool == Pool::Max ? kShortLengths : kLengths, kBatched, "K=7");
}

// One layer (no dropout between layers exists) and three (two masks between), bidirectional with mean pooling.
TEST(GpuModelOptions, OneAndThreeLayers) {
  RT_SKIP_WITHOUT_GPU();
  for (int64_t L : {1, 3}) {
    run_option_case({true, Pool::Mean, 0.3}, L, kLengths, kBatched, "K=7");
    run_option_case({false, Pool::Max, 0.3}, L, kShortLengths, kSingle, "K=1");
  }
}

// The fused kernel's head dropout (one layer): every pooling, one direction (the one-block kernel at H = 16, the
// cluster at H = 96) and both (H = 16), at K = 1 and K = 7, the masks of the global indices against the reference.
TEST(GpuModelOptions, FusedHeadDropout) {
  RT_SKIP_WITHOUT_GPU();
  for (Pool pool : {Pool::Last, Pool::Mean, Pool::Max}) {
    const std::vector<int64_t>& lengths = pool == Pool::Max ? kShortLengths : kLengths;
    for (int64_t hidden : {16, 96}) {
      // At H = 96 W_hh is most of the parameters: a step of one sequence of length 1 (all its gradients zero)
      // would leave too few nonzero gradients for the check's guard against a trivially passing case.
      run_option_case({false, pool, 0.3}, 1, lengths, hidden == 16 ? kSingle : kSingleLonger, "fused K=1",
                      LstmPath::Fused, hidden);
      run_option_case({false, pool, 0.3}, 1, lengths, kBatched, "fused K=7", LstmPath::Fused, hidden);
    }
    run_option_case({true, pool, 0.3}, 1, lengths, kSingle, "fused K=1", LstmPath::Fused, 16);
    run_option_case({true, pool, 0.3}, 1, lengths, kBatched, "fused K=7", LstmPath::Fused, 16);
  }
}

// The fused kernel's stacked layers with dropout between them and before the head: every pooling, 2 and 3 layers,
// the one-block kernel (H = 16) and the cluster (H = 96), at K = 1 and K = 7.
TEST(GpuModelOptions, FusedStackedDropout) {
  RT_SKIP_WITHOUT_GPU();
  for (Pool pool : {Pool::Last, Pool::Mean, Pool::Max}) {
    const std::vector<int64_t>& lengths = pool == Pool::Max ? kShortLengths : kLengths;
    for (int64_t L : {2, 3})
      for (int64_t hidden : {16, 96}) {
        run_option_case({false, pool, 0.3}, L, lengths, hidden == 16 ? kSingle : kSingleLonger, "fused K=1",
                        LstmPath::Fused, hidden);
        run_option_case({false, pool, 0.3}, L, lengths, kBatched, "fused K=7", LstmPath::Fused, hidden);
      }
  }
}

// Bidirectional models whose directions run apart (H > 64, or stacked): head dropout and dropout between layers (both
// directions' outputs, 2 H wide), every pooling, one layer at H = 96 and two at H = 16 (one block a direction) and
// 96 (a cluster a direction), at K = 1 and K = 7.
TEST(GpuModelOptions, FusedBidirectionalApartDropout) {
  RT_SKIP_WITHOUT_GPU();
  for (Pool pool : {Pool::Last, Pool::Mean, Pool::Max}) {
    const std::vector<int64_t>& lengths = pool == Pool::Max ? kShortLengths : kLengths;
    for (const auto& [L, hidden] : std::vector<std::pair<int64_t, int64_t>>{{1, 96}, {2, 16}, {2, 96}}) {
      run_option_case({true, pool, 0.3}, L, lengths, hidden == 16 ? kSingle : kSingleLonger, "fused K=1",
                      LstmPath::Fused, hidden);
      run_option_case({true, pool, 0.3}, L, lengths, kBatched, "fused K=7", LstmPath::Fused, hidden);
    }
  }
}
