// The fused LSTM kernel (--lstm fused) against the CPU reference: loss and every gradient for lengths 1 to 130 (and one
// long sequence), each alone and several per step with an empty slot, both tasks, both kernel variants (one block for H
// <= 64: H = 19, 40, 50, 55, 64; a 4-block cluster above: H = 65, its smallest, 77, 96, 100, 128, and 40 sequences of H
// = 128 in one step; a 16-block cluster above: H = 129, 200, 256, and 41 sequences of H = 256 one a cluster; above 16
// sequences the groups in lock step on the tensor cores: K = 17-201, H = 136, 200, 256, two directions, 2-3 layers;
// 256 < H <= 512 the groups on 64 blocks each: K = 2-71, H = 257-512, two directions, 2 layers, every pool);
// 100 SGD and Adam steps against the CPU backend at K = 1 and K = 4 (H = 96 and 128: SGD; K = 20 at H = 200 grouped;
// K = 8 at H = 384 wide);
// bidirectional at H <= 64 (both directions in a 2-block cluster: every pool, K = 1, 9, 20, 70, training, reruns);
// 2 to 4 stacked layers (every variant, K = 1, 9, 17, 20, 24; training; reruns);
// bitwise-identical reruns; the fallback to cuDNN for models it does not cover; the per-timestep cycle budget and the
// whole step at H = 50, K = 1 (printed for doc/performance.md and the A/B of builds); and, without a GPU, the
// gate-block layout taken from the index map. Pooling over time (--pool mean, max) gets the same checks as the last
// step: loss and gradients, 100 steps, reruns; max pooling's cases first check (without a GPU too) that no unit's max
// is within float rounding of another step's value, where the GPU and the CPU may pick either step. Tolerances are the
// cuDNN tests' (agreement.hpp): |gpu - ref| <= 1e-5 max|ref| of the tensor + 1e-5 |ref|.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <tuple>
#include <utility>
#include <vector>

#include "../../src/backend/cuda/cuda_backend.hpp"
#include "agreement.hpp"
#include "gpu_test_util.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/data/synthetic.hpp"

using namespace ragtrain;
using namespace ragtrain::gputest;

namespace {

CudaTuning fused_tuning() {
  CudaTuning t;
  t.lstm = LstmPath::Fused;
  return t;
}

void fused_grid(const ModelShape& shape, const std::vector<int64_t>& lengths) {
  GridPair g = grid_pair(shape, lengths, fused_tuning());
  ASSERT_TRUE(g.gpu->fused_active()) << g.gpu->describe();
  const std::string base = RT_MSG("fused " << (shape.task == Task::Classification ? "cls" : "reg") << " F"
                                           << shape.input_size << " H" << shape.hidden << " C" << shape.outputs
                                           << (shape.bidirectional ? " bidirectional" : "") << " "
                                           << pool_name(shape.pool) << " pool");
  check_grid(g, ParamLayout(shape), base, 1, kGradAtolScale);
}

const std::vector<int64_t> kMixed = {1, 2, 3, 7, 31, 64, 97, 130};

ModelShape with_pool(ModelShape s, Pool pool) {
  s.pool = pool;
  return s;
}

// The smallest gap, over every unit of the sequences at `positions` (length >= 2), between its max over the steps
// and the largest value at any other step (float64 reference). Max pooling's gradient goes to the argmax step, so
// a gap within float rounding (~2e-7 here) would let the GPU and the CPU choose different steps: the data, not the
// kernel, would decide such a test.
double min_argmax_gap(const ModelShape& shape, const std::vector<float>& params, const Shard& shard,
                      const std::vector<int64_t>& positions) {
  const ParamLayout layout(shape);
  const std::vector<double> p(params.begin(), params.end());
  const int64_t H = shape.head_input();   // the pooled units: both directions' when bidirectional
  LstmCache<double> cache;
  double gap = INFINITY;
  for (int64_t pos : positions) {
    if (pos < 0 || shard.length(pos) < 2) continue;
    const int64_t n = shard.length(pos);
    lstm_forward(layout, p.data(), shard.x(pos), n, cache);
    const std::vector<double>& h = cache.h.back();
    for (int64_t k = 0; k < H; ++k) {
      const int64_t best = cache.argmax[static_cast<size_t>(k)];
      double second = -INFINITY;
      for (int64_t t = 0; t < n; ++t)
        if (t != best) second = std::max(second, h[static_cast<size_t>(t * H + k)]);
      gap = std::min(gap, h[static_cast<size_t>(best * H + k)] - second);
    }
  }
  return gap;
}

// 50 times how far the float CPU reference's h is from float64's on these data (at most 2e-7 at the initial
// parameters, measured once on the CPU); the fused kernel's float h is taken to be as close (its gradients are:
// doc/performance.md).
constexpr double kMinArgmaxGap = 1e-5;

std::vector<int64_t> all_positions(const Shard& shard) {
  std::vector<int64_t> all;
  for (int64_t p = 0; p < shard.size(); ++p) all.push_back(p);
  return all;
}

// fused_grid's data (its parameter and shard seeds) for a max-pooling shape: no near-tie.
void expect_grid_argmax_separated(const ModelShape& shape, const std::vector<int64_t>& lengths) {
  const Shard shard = make_shard(shape, lengths, 99);
  const double gap = min_argmax_gap(shape, init_params(ParamLayout(shape), 1234), shard, all_positions(shard));
  std::printf("[ pool     ] max pool F%lld H%lld: smallest gap between a unit's max and its next step %.2e\n",
              static_cast<long long>(shape.input_size), static_cast<long long>(shape.hidden), gap);
  EXPECT_GT(gap, kMinArgmaxGap) << "max pool H" << shape.hidden << ": test data with a near-tie";
}

const ModelShape kMaxH50{36, 50, 1, 10, Task::Classification, false, Pool::Max};
const ModelShape kMaxH19{5, 19, 1, 3, Task::Regression, false, Pool::Max};
const ModelShape kMaxH100{36, 100, 1, 10, Task::Classification, false, Pool::Max};
const ModelShape kMaxBidirH50{36, 50, 1, 10, Task::Classification, true, Pool::Max};
const ModelShape kMaxBidirH96{36, 96, 1, 10, Task::Classification, true, Pool::Max};
const ModelShape kMaxH320{36, 320, 1, 10, Task::Classification, false, Pool::Max};
// Two layers at H = 96: at H = 100 (and 72, 80, 112, 128) these data hold a unit whose max is within 6e-6 of another
// step's value (measured on the CPU; 3.1e-6 at H = 100 on the H100 first).
const ModelShape kMaxStackedH96{36, 96, 2, 10, Task::Classification, false, Pool::Max};

}  // namespace

TEST(FusedAgreement, ClassificationRegistersH50) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({36, 50, 1, 10, Task::Classification}, kMixed);
}

// H = 55, padded to 56: the float2 tail of the forward's column slices and the backward's row slices (slice_matvec),
// and a group of four units whose last is past H (its lanes still hold the other units' backward weights).
TEST(FusedAgreement, ClassificationRegistersH55) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({36, 55, 1, 7, Task::Classification}, kMixed);
}

TEST(FusedAgreement, RegressionRegistersH19) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({5, 19, 1, 3, Task::Regression}, kMixed);
}

TEST(FusedAgreement, ClassificationRegistersH64LongSequence) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({70, 64, 1, 5, Task::Classification}, {1, 130, 700});   // F > 64: two feature chunks
}

TEST(FusedAgreement, ClassificationClusterH100) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({36, 100, 1, 10, Task::Classification}, kMixed);
}

TEST(FusedAgreement, ClassificationClusterH128) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({36, 128, 1, 10, Task::Classification}, kMixed);
}

TEST(FusedAgreement, RegressionClusterH77) {
  RT_SKIP_WITHOUT_GPU();
  // No T = 1 here: with F = 3 the gradient is then almost all (zero) weight_hh, which check_batch rejects as trivial.
  fused_grid({3, 77, 1, 2, Task::Regression}, {2, 50, 130});
}

TEST(FusedAgreement, ClassificationClusterH96) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({36, 96, 1, 10, Task::Classification}, kMixed);
}

// The 16-block cluster (128 < H <= 256): its largest H, its smallest (block 0 owns 9 units, the others 8; the
// projection's second row tile holds 4 gate rows), one in between with mean pooling (regression), and 20 sequences in
// one step (the split weight-gradient GEMM; 320 blocks in waves of clusters).
TEST(FusedAgreement, ClassificationCluster16H256) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({36, 256, 1, 10, Task::Classification}, kMixed);
}
TEST(FusedAgreement, ClassificationCluster16H129) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({36, 129, 1, 10, Task::Classification}, kMixed);
}
TEST(FusedPoolAgreement, MeanRegressionCluster16H200) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(with_pool({20, 200, 1, 3, Task::Regression}, Pool::Mean), kMixed);
}

// The cluster's smallest H: block 0 owns 17 units, the others 16; warps and column parts only partly filled.
TEST(FusedAgreement, RegressionClusterH65) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({12, 65, 1, 3, Task::Regression}, kMixed);
}

TEST(FusedAgreement, RegressionRegistersH40ThreeFeatureChunks) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({130, 40, 1, 4, Task::Regression}, {1, 9, 64, 130});   // H = 40: padded to 48; F = 130: 64 + 64 + 2
}

namespace {

// n sequences (and an empty slot) in one step, lengths 1 .. 130. groups: CudaTuning::fused_groups (above 16
// sequences at 128 < H <= 256, lock-step groups on the tensor cores; else one sequence a cluster).
// beside: the step must run its weight-gradient GEMM beside the backward (FusedLstm::gemm_beside).
void many_sequences(const ModelShape& shape, int64_t n, bool groups = true, bool beside = false) {
  const ParamLayout layout(shape);
  CudaTuning tuning = fused_tuning();
  tuning.fused_groups = groups;
  CudaBackend gpu(shape, options("cuda", "sgd", n + 1), tuning);
  ASSERT_TRUE(gpu.fused_active()) << gpu.describe();
  auto cpu = make_backend(shape, options("cpu", "sgd"));
  const std::vector<float> params = init_params(layout, 77);
  gpu.set_params(params);
  cpu->set_params(params);
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < n; ++i) lengths.push_back(1 + (i * 37) % 130);
  const Shard shard = make_shard(shape, lengths, 17);
  gpu.set_train_shard(shard);
  cpu->set_train_shard(shard);
  std::vector<int64_t> all = {-1};
  for (int64_t p = 0; p < shard.size(); ++p) all.push_back(p);
  check_batch(gpu, *cpu, layout, params, shard, all,
              RT_MSG("fused " << (shape.task == Task::Classification ? "cls" : "reg") << " F" << shape.input_size
                              << " H" << shape.hidden << (shape.bidirectional ? " bidirectional " : " ")
                              << pool_name(shape.pool) << " pool K=" << n + 1),
              kGradAtolScale);
  if (beside) {
    EXPECT_TRUE(gpu.fused_lstm()->gemm_beside()) << "K=" << n + 1 << ": the GEMM did not run beside";
  }
}

}  // namespace

// Stacked layers (each layer's kernels in turn: the layers below the top forward only, then, from the top down, the
// input gradient of the layer above and the backward of the layer below seeded by it): every variant of the recurrence
// (one block: H = 19, 50; a 4-block cluster: H = 96, 128; 16 blocks: H = 200, 256), 2 to 4 layers, both tasks,
// every pool, one sequence a step and many (the device slot tables and the split GEMM over the layers' inputs).
TEST(FusedStackedAgreement, ClassificationTwoLayersH50) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({36, 50, 2, 10, Task::Classification}, kMixed);
}

TEST(FusedStackedAgreement, RegressionThreeLayersH19) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({5, 19, 3, 3, Task::Regression}, kMixed);
}

TEST(FusedStackedAgreement, ClassificationTwoLayersH128) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({36, 128, 2, 10, Task::Classification}, kMixed);
}

TEST(FusedStackedAgreement, MeanRegressionFourLayersH96) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({20, 96, 4, 3, Task::Regression, false, Pool::Mean}, kMixed);
}

TEST(FusedStackedAgreement, ClassificationTwoLayersH256) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({36, 256, 2, 10, Task::Classification}, kMixed);
}

TEST(FusedStackedAgreement, MaxClassificationTwoLayersH96) {
  RT_SKIP_WITHOUT_GPU();
  expect_grid_argmax_separated(kMaxStackedH96, kMixed);
  fused_grid(kMaxStackedH96, kMixed);
}

TEST(FusedStackedAgreement, ClassificationTwoLayersH50TwentySequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 50, 2, 10, Task::Classification}, 20);
}

TEST(FusedStackedAgreement, MeanClassificationThreeLayersH200SeventeenSequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 200, 3, 10, Task::Classification, false, Pool::Mean}, 17);
}

TEST(FusedStackedAgreement, RegressionTwoLayersH128NineSequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 128, 2, 4, Task::Regression}, 9);
}

// 70 sequences in one step: more than the kernel's inline slots (the slot table is read from the device); the split
// weight-gradient GEMM's parts then cross sequence boundaries.
TEST(FusedAgreement, ClassificationH50SeventySequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 50, 1, 10, Task::Classification}, 70);
}

// More than 16 sequences in the one-block kernel (the weight gradients by the GEMM split over all timesteps, after the
// whole recurrence) at other shapes: H = 19 (76 gate rows: a block of 19 x 4 threads), F = 70 (two feature chunks, 135
// columns: two column tiles).
TEST(FusedAgreement, RegressionRegistersH19TwentySequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({5, 19, 1, 3, Task::Regression}, 20);
}
TEST(FusedAgreement, ClassificationRegistersH64F70TwentySequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({70, 64, 1, 5, Task::Classification}, 20);
}

// The 16-block cluster with 20 sequences (the split weight-gradient GEMM at 4H = 1024 rows).
TEST(FusedAgreement, ClassificationCluster16H256TwentySequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 256, 1, 10, Task::Classification}, 20);
}

// The 16-block cluster with more sequences than the GPU runs clusters at once (8 on 132 SMs: 41 sequences take 6
// waves), ragged lengths 1-130, the split weight-gradient GEMM. Every pooling, both tasks. (Above 16 sequences the
// step runs in lock-step groups by default: FusedGroupAgreement below; this one runs a sequence a cluster.)
TEST(FusedAgreement, ClassificationCluster16H256FortyOneSequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 256, 1, 10, Task::Classification}, 41, false);
}

// Above 16 sequences at 128 < H <= 256: the slots sorted by length in groups of up to 24 in lock step a 16-block
// cluster, the recurrent matvecs on the tensor cores (a tf32 and a bf16 product), the head between the forward and the
// backward stage. On the 7 clusters of 16 blocks an H100 runs at once: groups of 3-5 (one tile of 8 sequences), 12
// (two tiles), 18 (three), more groups than clusters (waves: 200 sequences in groups of 24), H not a multiple of 16 (a
// block's units partly past H), both tasks, every pool, two directions, 2 layers.
TEST(FusedGroupAgreement, ClassificationH256ThirtyThreeSequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 256, 1, 10, Task::Classification}, 33);
}
TEST(FusedGroupAgreement, ClassificationH256EightyFourSequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 256, 1, 10, Task::Classification}, 84, true, true);
}
TEST(FusedGroupAgreement, MeanRegressionH200OneHundredTwentySequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences(with_pool({20, 200, 1, 3, Task::Regression}, Pool::Mean), 120, true, true);
}
TEST(FusedGroupAgreement, ClassificationH136TwoHundredSequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 136, 1, 10, Task::Classification}, 200);
}
TEST(FusedGroupAgreement, MeanClassificationBidirectionalH200TwentySequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences(with_pool({36, 200, 1, 10, Task::Classification, true}, Pool::Mean), 20);
}
TEST(FusedGroupAgreement, RegressionTwoLayersH256TwentyFourSequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 256, 2, 4, Task::Regression}, 24);
}

// 256 < H <= 512: every step in lock-step groups on 64 blocks each, exchanging through L2 (fused_wide.cu). One
// sequence (K = 1 with an empty slot: one group of 1 on one cohort), a few (K = 6: every block's flags, ragged), more
// than the cohorts hold at once (K = 71 on the 2 cohorts of an H100 or H200: groups of 24 in two rounds, the last
// ragged and short), H not a multiple of 8 (a block's units partly past H), both tasks, every pool, two directions
// (a cohort a direction), 2 layers, and one sequence of each length 1 .. 130 alone (fused_grid).
TEST(FusedWideAgreement, ClassificationH512OneSequence) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 512, 1, 10, Task::Classification}, 1);
}
TEST(FusedWideAgreement, ClassificationH512ThirtyThreeSequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 512, 1, 10, Task::Classification}, 33);
}
TEST(FusedWideAgreement, MeanRegressionH300FiveSequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences(with_pool({20, 300, 1, 3, Task::Regression}, Pool::Mean), 5);
}
TEST(FusedWideAgreement, MaxClassificationH320) {
  expect_grid_argmax_separated(kMaxH320, kMixed);
  RT_SKIP_WITHOUT_GPU();
  fused_grid(kMaxH320, kMixed);
}
TEST(FusedWideAgreement, ClassificationH257SeventySequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 257, 1, 10, Task::Classification}, 70);
}
TEST(FusedWideAgreement, MeanClassificationBidirectionalH384SevenSequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences(with_pool({36, 384, 1, 10, Task::Classification, true}, Pool::Mean), 7);
}
TEST(FusedWideAgreement, RegressionTwoLayersH320TwentySequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 320, 2, 4, Task::Regression}, 20);
}
TEST(FusedWideAgreement, ClassificationH509EachLengthAlone) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid({36, 509, 1, 10, Task::Classification}, kMixed);
}

TEST(FusedPoolAgreement, MaxRegressionCluster16H200ThirtyThreeSequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences(with_pool({20, 200, 1, 3, Task::Regression}, Pool::Max), 33);
}
TEST(FusedPoolAgreement, MeanClassificationCluster16H129SeventeenSequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences(with_pool({36, 129, 1, 10, Task::Classification}, Pool::Mean), 17);
}

// The cluster variant with 40 sequences: 160 blocks, more than the SMs hold at once (clusters run in waves).
TEST(FusedAgreement, ClassificationClusterH128FortySequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences({36, 128, 1, 10, Task::Classification}, 40);
}

TEST(FusedPoolAgreement, MeanClassificationRegistersH50) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(with_pool({36, 50, 1, 10, Task::Classification}, Pool::Mean), kMixed);
}

TEST(FusedPoolAgreement, MeanRegressionRegistersH19) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(with_pool({5, 19, 1, 3, Task::Regression}, Pool::Mean), kMixed);
}

TEST(FusedPoolAgreement, MeanClassificationClusterH128) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(with_pool({36, 128, 1, 10, Task::Classification}, Pool::Mean), kMixed);
}

TEST(FusedPoolAgreement, MeanRegressionClusterH96) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(with_pool({36, 96, 1, 3, Task::Regression}, Pool::Mean), kMixed);
}

TEST(FusedPoolAgreement, MeanClassificationRegistersH64LongSequence) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(with_pool({70, 64, 1, 5, Task::Classification}, Pool::Mean), {1, 130, 700});
}

TEST(FusedPoolAgreement, MaxClassificationRegistersH50) {
  RT_SKIP_WITHOUT_GPU();
  expect_grid_argmax_separated(kMaxH50, kMixed);
  fused_grid(kMaxH50, kMixed);
}

TEST(FusedPoolAgreement, MaxRegressionRegistersH19) {
  RT_SKIP_WITHOUT_GPU();
  expect_grid_argmax_separated(kMaxH19, kMixed);
  fused_grid(kMaxH19, kMixed);
}

TEST(FusedPoolAgreement, MaxClassificationClusterH100) {
  RT_SKIP_WITHOUT_GPU();
  expect_grid_argmax_separated(kMaxH100, kMixed);
  fused_grid(kMaxH100, kMixed);
}

// Bidirectional (H <= 64: a cluster of 2 blocks a sequence, one per direction): loss and every gradient of both
// directions and of the 2 H-wide head, every pool, lengths 1 .. 130 alone and together (one step of 9 with an empty
// slot: the streaming weight gradients, the sums over groups), and 20 sequences a step (the split weight-gradient GEMM,
// the device slot table).
ModelShape bidir(ModelShape s, Pool pool = Pool::Last) {
  s.bidirectional = true;
  s.pool = pool;
  return s;
}

TEST(FusedBidirAgreement, ClassificationH50) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(bidir({36, 50, 1, 10, Task::Classification}), kMixed);
}

TEST(FusedBidirAgreement, RegressionH19) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(bidir({5, 19, 1, 3, Task::Regression}), kMixed);
}

TEST(FusedBidirAgreement, ClassificationH64F70LongSequence) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(bidir({70, 64, 1, 5, Task::Classification}), {1, 130, 700});
}

TEST(FusedBidirAgreement, MeanClassificationH50) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(bidir({36, 50, 1, 10, Task::Classification}, Pool::Mean), kMixed);
}

TEST(FusedBidirAgreement, MeanRegressionH55) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(bidir({12, 55, 1, 3, Task::Regression}, Pool::Mean), kMixed);
}

TEST(FusedBidirAgreement, MaxClassificationH50) {
  RT_SKIP_WITHOUT_GPU();
  expect_grid_argmax_separated(kMaxBidirH50, kMixed);
  fused_grid(kMaxBidirH50, kMixed);
}

TEST(FusedBidirAgreement, ClassificationH50TwentySequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences(bidir({36, 50, 1, 10, Task::Classification}), 20);
}

TEST(FusedBidirAgreement, MeanRegressionH19SeventySequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences(bidir({5, 19, 1, 3, Task::Regression}, Pool::Mean), 70);
}

// Bidirectional above H = 64 or stacked: the directions run apart (each its own 4- or 16-block cluster or block, in
// stages: forward, the head kernel on both pooled vectors, backward seeded by it), every pool, one sequence a step and
// many (streaming weight gradients at 9, the split GEMM and device slot table at 20), 1 to 3 layers.
TEST(FusedBidirAgreement, ClassificationClusterH65) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(bidir({36, 65, 1, 10, Task::Classification}), kMixed);
}

TEST(FusedBidirAgreement, MeanRegressionClusterH128) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(bidir({20, 128, 1, 3, Task::Regression}, Pool::Mean), kMixed);
}

TEST(FusedBidirAgreement, MaxClassificationClusterH96) {
  RT_SKIP_WITHOUT_GPU();
  expect_grid_argmax_separated(kMaxBidirH96, kMixed);
  fused_grid(kMaxBidirH96, kMixed);
}

TEST(FusedBidirAgreement, ClassificationCluster16H200) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(bidir({36, 200, 1, 10, Task::Classification}), kMixed);
}

TEST(FusedBidirAgreement, MeanClassificationCluster16H256) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(bidir({36, 256, 1, 10, Task::Classification}, Pool::Mean), kMixed);
}

TEST(FusedBidirAgreement, ClassificationClusterH100NineSequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences(bidir({36, 100, 1, 10, Task::Classification}), 8);
}

TEST(FusedBidirAgreement, MeanRegressionClusterH128TwentySequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences(bidir({36, 128, 1, 4, Task::Regression}, Pool::Mean), 20);
}

TEST(FusedBidirStackedAgreement, ClassificationTwoLayersH50) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(bidir({36, 50, 2, 10, Task::Classification}), kMixed);
}

TEST(FusedBidirStackedAgreement, MeanRegressionThreeLayersH19) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(bidir({5, 19, 3, 3, Task::Regression}, Pool::Mean), kMixed);
}

TEST(FusedBidirStackedAgreement, ClassificationTwoLayersH128) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(bidir({36, 128, 2, 10, Task::Classification}), kMixed);
}

TEST(FusedBidirStackedAgreement, MeanClassificationTwoLayersH200) {
  RT_SKIP_WITHOUT_GPU();
  fused_grid(bidir({36, 200, 2, 10, Task::Classification}, Pool::Mean), kMixed);
}

TEST(FusedBidirStackedAgreement, ClassificationTwoLayersH50TwentySequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences(bidir({36, 50, 2, 10, Task::Classification}), 20);
}

TEST(FusedBidirStackedAgreement, RegressionTwoLayersH96NineSequences) {
  RT_SKIP_WITHOUT_GPU();
  many_sequences(bidir({36, 96, 2, 4, Task::Regression}), 8);
}

namespace {

Shard training_shard(const ModelShape& shape, uint64_t seed) {
  SyntheticSpec spec;
  spec.sequences = 40;
  spec.features = shape.input_size;
  spec.min_length = 1;
  spec.max_length = 130;
  spec.classes = shape.outputs;
  spec.task = shape.task;
  spec.outputs = shape.outputs;
  spec.seed = seed;
  const RaggedData d = make_synthetic(spec);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < spec.sequences; ++i) idx.push_back(i);
  return ragtrain::make_shard(d, idx);
}

struct Run {
  std::vector<double> losses;
  std::vector<float> params;
};

// before_step(batch): called with each step's batch before it runs (max pooling's near-tie check).
Run train(Backend& b, const ModelShape& shape, const Shard& shard, int per_step, float lr,
          const std::function<void(const std::vector<int64_t>&)>& before_step = {}) {
  Run r;
  b.set_params(init_params(ParamLayout(shape), 42));
  b.set_train_shard(shard);
  auto batch_of = [&](int s) {
    std::vector<int64_t> batch;
    for (int k = 0; k < per_step; ++k) batch.push_back((static_cast<int64_t>(per_step) * s + k) % shard.size());
    if (per_step > 1 && s % 7 == 3) batch.back() = -1;   // now and then an empty slot
    return batch;
  };
  for (int s = 0; s < 100; ++s) {
    const std::vector<int64_t> batch = batch_of(s);
    if (before_step) before_step(batch);
    b.forward_backward(batch);
    b.prepare_next(batch_of(s + 1));   // as the trainer does: the GPU runs each next step launched ahead
    b.allreduce();
    const StepTotals t = b.update(lr);
    r.losses.push_back(t.loss_sum / t.count);
  }
  r.params = b.params();
  return r;
}

BackendOptions training_options(const std::string& device, const std::string& optimizer, int64_t per_step = 1) {
  BackendOptions o = options(device, optimizer, per_step);
  o.optimizer.clip = 1.0;
  return o;
}

// The CPU run of compare_training: the smallest argmax gap over every step's batch, at that step's parameters.
double training_argmax_gap(const ModelShape& shape, const std::string& optimizer, float lr, int per_step,
                           uint64_t seed) {
  const Shard shard = training_shard(shape, seed);
  auto cpu = make_backend(shape, training_options("cpu", optimizer));
  double gap = INFINITY;
  train(*cpu, shape, shard, per_step, lr, [&](const std::vector<int64_t>& batch) {
    gap = std::min(gap, min_argmax_gap(shape, cpu->params(), shard, batch));
  });
  return gap;
}

void compare_training(const ModelShape& shape, const std::string& optimizer, float lr, int per_step,
                      uint64_t data_seed = 5) {
  const BackendOptions g = training_options("cuda", optimizer, per_step), c = training_options("cpu", optimizer);
  const Shard shard = training_shard(shape, data_seed);
  CudaBackend gpu(shape, g, fused_tuning());
  ASSERT_TRUE(gpu.fused_active());
  auto cpu = make_backend(shape, c);
  const Run a = train(gpu, shape, shard, per_step, lr), b = train(*cpu, shape, shard, per_step, lr);
  double worst_loss = 0;
  for (size_t i = 0; i < a.losses.size(); ++i) worst_loss = std::max(worst_loss, rel(a.losses[i], b.losses[i]));
  const std::vector<double> ref(b.params.begin(), b.params.end());
  const Agreement normwise = compare_params(ParamLayout(shape), a.params, ref, 0.0, 1e-4);
  std::printf("[ fused    ] 100 %s steps of K=%d (H%lld, %s pool): loss %.4f -> %.4f, max loss rel %.2e, per-tensor "
              "max|diff|/max|p| %.2e\n",
              optimizer.c_str(), per_step, static_cast<long long>(shape.hidden), pool_name(shape.pool),
              b.losses.front(), b.losses.back(),
              worst_loss, 1e-4 * normwise.worst_ratio);
  EXPECT_LT(b.losses.back(), b.losses.front()) << "training should make progress";
  if (optimizer == "sgd") {
    EXPECT_TRUE(normwise.ok) << "after 100 SGD steps: " << normwise.first_failure;
    for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_LE(rel(a.losses[i], b.losses[i]), 1e-4) << "step " << i;
  } else {
    for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_LE(rel(a.losses[i], b.losses[i]), 1e-3) << "step " << i;
  }
}

// Max pooling's training runs: over 100 steps x K sequences x H units the closest pair of steps of some unit is
// typically within 1e-6 (measured on the CPU run for data seeds 5 to 16; the float reference's h is 2e-7 from
// float64's), so these are data seeds whose CPU run keeps every gap above kMinArgmaxGap (FusedPoolData checks it).
// No Adam run at K > 1: none of those seeds kept its gaps above 1e-5 (best 7.8e-6).
struct MaxTrainingCase {
  ModelShape shape;
  const char* optimizer;
  float lr;
  int per_step;
  uint64_t data_seed;
};
const MaxTrainingCase kMaxSgdK1{kMaxH50, "sgd", 0.05f, 1, 16};
const MaxTrainingCase kMaxAdamK1{kMaxH50, "adam", 3e-3f, 1, 16};
const MaxTrainingCase kMaxSgdK4{kMaxH19, "sgd", 0.05f, 4, 12};

double training_argmax_gap(const MaxTrainingCase& c) {
  return training_argmax_gap(c.shape, c.optimizer, c.lr, c.per_step, c.data_seed);
}

void compare_max_training(const MaxTrainingCase& c) {
  ASSERT_GT(training_argmax_gap(c), kMinArgmaxGap) << "test data with a near-tie";
  compare_training(c.shape, c.optimizer, c.lr, c.per_step, c.data_seed);
}

}  // namespace

TEST(FusedTraining, Sgd100StepsK1) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({36, 50, 1, 10, Task::Classification}, "sgd", 0.05f, 1);
}

TEST(FusedTraining, Sgd100StepsK4Regression) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({5, 19, 1, 3, Task::Regression}, "sgd", 0.05f, 4);
}

TEST(FusedTraining, Adam100StepsK1) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({36, 50, 1, 10, Task::Classification}, "adam", 3e-3f, 1);
}

TEST(FusedTraining, Adam100StepsK4) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({36, 50, 1, 10, Task::Classification}, "adam", 3e-3f, 4);
}

// K = 24: the split weight-gradient GEMM (K > 16) in every step of a training run.
TEST(FusedTraining, Sgd100StepsK24) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({36, 50, 1, 10, Task::Classification}, "sgd", 0.05f, 24);
}

// K = 20 at H = 200: the grouped recurrence (above 16 sequences) in every step.
TEST(FusedTraining, Sgd100StepsK20H200Grouped) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({36, 200, 1, 10, Task::Classification}, "sgd", 0.05f, 20);
}

// K = 8 at H = 384: the wide recurrence (fused_wide.cu) in every step.
TEST(FusedTraining, Sgd100StepsK8H384Wide) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({36, 384, 1, 10, Task::Classification}, "sgd", 0.05f, 8);
}

// SGD, not Adam, at H = 128: Adam divides by sqrt(v), which turns float rounding in tiny gradients into visible
// parameter differences once the loss is near zero (seen: loss 0.02 after 100 steps, 1.2e-3 relative apart).
TEST(FusedTraining, Sgd100StepsK4H128) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({36, 128, 1, 10, Task::Classification}, "sgd", 0.05f, 4);
}

TEST(FusedStackedTraining, Sgd100StepsK4TwoLayers) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({36, 50, 2, 10, Task::Classification}, "sgd", 0.05f, 4);
}

TEST(FusedStackedTraining, Sgd100StepsK1TwoLayersH128) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({36, 128, 2, 10, Task::Classification}, "sgd", 0.05f, 1);
}

// SGD: with Adam (lr 3e-3) three layers fit these 40 sequences to a loss of 0.014 within 100 steps, and from step 31
// on Adam's division by sqrt(v) turned float rounding in the tiny gradients into loss differences of 1e-3 and more
// against the CPU run (seen on the H100; the first 30 steps agreed), as at H = 128 above.
TEST(FusedStackedTraining, Sgd100StepsK24ThreeLayers) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({36, 50, 3, 10, Task::Classification}, "sgd", 0.05f, 24);
}

TEST(FusedTraining, Sgd100StepsK1H96) {
  RT_SKIP_WITHOUT_GPU();
  compare_training({36, 96, 1, 10, Task::Classification}, "sgd", 0.05f, 1);
}

TEST(FusedPoolTraining, MeanSgd100StepsK1) {
  RT_SKIP_WITHOUT_GPU();
  compare_training(with_pool({36, 50, 1, 10, Task::Classification}, Pool::Mean), "sgd", 0.05f, 1);
}

TEST(FusedPoolTraining, MeanAdam100StepsK4) {
  RT_SKIP_WITHOUT_GPU();
  compare_training(with_pool({36, 50, 1, 10, Task::Classification}, Pool::Mean), "adam", 3e-3f, 4);
}

TEST(FusedPoolTraining, MeanSgd100StepsK4RegressionH19) {
  RT_SKIP_WITHOUT_GPU();
  compare_training(with_pool({5, 19, 1, 3, Task::Regression}, Pool::Mean), "sgd", 0.05f, 4);
}

TEST(FusedPoolTraining, MaxSgd100StepsK1) {
  RT_SKIP_WITHOUT_GPU();
  compare_max_training(kMaxSgdK1);
}

TEST(FusedPoolTraining, MaxAdam100StepsK1) {
  RT_SKIP_WITHOUT_GPU();
  compare_max_training(kMaxAdamK1);
}

TEST(FusedPoolTraining, MaxSgd100StepsK4RegressionH19) {
  RT_SKIP_WITHOUT_GPU();
  compare_max_training(kMaxSgdK4);
}

TEST(FusedBidirTraining, Sgd100StepsK1) {
  RT_SKIP_WITHOUT_GPU();
  compare_training(bidir({36, 50, 1, 10, Task::Classification}), "sgd", 0.05f, 1);
}

TEST(FusedBidirTraining, MeanAdam100StepsK4) {
  RT_SKIP_WITHOUT_GPU();
  compare_training(bidir({36, 50, 1, 10, Task::Classification}, Pool::Mean), "adam", 3e-3f, 4);
}

TEST(FusedBidirTraining, Sgd100StepsK24) {
  RT_SKIP_WITHOUT_GPU();
  compare_training(bidir({36, 50, 1, 10, Task::Classification}), "sgd", 0.05f, 24);
}

// The directions apart: a cluster each (H = 96), and two layers of one block each (H = 50).
TEST(FusedBidirTraining, Sgd100StepsK4ClusterH96) {
  RT_SKIP_WITHOUT_GPU();
  compare_training(bidir({36, 96, 1, 10, Task::Classification}), "sgd", 0.05f, 4);
}

TEST(FusedBidirTraining, MeanSgd100StepsK1TwoLayers) {
  RT_SKIP_WITHOUT_GPU();
  compare_training(bidir({36, 50, 2, 10, Task::Classification}, Pool::Mean), "sgd", 0.05f, 1);
}

// Without a GPU: the max-pooling cases' data has no near-tie (see min_argmax_gap), in the agreement grids and at
// every step of the CPU side of the training runs, so a failure of the GPU cases above is the kernel's.
TEST(FusedPoolData, MaxPoolCasesHaveNoNearTies) {
  for (const ModelShape& shape : {kMaxH50, kMaxH19, kMaxH100, kMaxBidirH50, kMaxBidirH96, kMaxStackedH96})
    expect_grid_argmax_separated(shape, kMixed);
  expect_grid_argmax_separated(kMaxStackedH96, kMixed);
  for (const MaxTrainingCase& c : {kMaxSgdK1, kMaxAdamK1, kMaxSgdK4}) {
    const double gap = training_argmax_gap(c);
    std::printf("[ pool     ] max pool training, %s K=%d H%lld data seed %llu: smallest gap %.2e\n", c.optimizer,
                c.per_step, static_cast<long long>(c.shape.hidden), static_cast<unsigned long long>(c.data_seed), gap);
    EXPECT_GT(gap, kMinArgmaxGap) << c.optimizer << " K=" << c.per_step;
  }
}

namespace {

// Two identical runs on fresh backends of the given batches (each forward_backward, then the update, so a later batch
// runs on updated parameters): each run's fused buffer after every batch and its final parameters, compared bit for
// bit between the runs.
// n sequences of lengths 1 + 53 i (mod 130), and the batch of all of them.
std::pair<std::vector<int64_t>, std::vector<int64_t>> ragged_batch(int64_t n) {
  std::vector<int64_t> lengths, batch;
  for (int64_t i = 0; i < n; ++i) {
    lengths.push_back(1 + (i * 53) % 130);
    batch.push_back(i);
  }
  return {lengths, batch};
}

// What the second run changes: nothing; its stacked layers run one after another (FusedLstm::set_overlap(false)), the
// first's overlap; its groups are of one size (FusedLstm::set_group_plan(false)), the first's of their own sizes (both
// with the weight-gradient GEMM after the whole backward stage, whose parts then are the same); nothing, both running
// the GEMM beside the backward (checked).
enum class SecondRun { Same, LayersInTurn, EqualGroups, SameGemmBeside };
void expect_identical_reruns(const ModelShape& shape, const Shard& shard, int64_t K,
                             const std::vector<std::vector<int64_t>>& batches, uint64_t param_seed,
                             const std::string& what, SecondRun second_run = SecondRun::Same) {
  const std::vector<float> params = init_params(ParamLayout(shape), param_seed);
  std::vector<std::vector<float>> got[2];
  for (auto& run : got) {
    CudaBackend gpu(shape, options("cuda", "adam", K), fused_tuning());
    ASSERT_TRUE(gpu.fused_active());
    const bool second = &run == &got[1];
    if (second && second_run == SecondRun::EqualGroups) gpu.fused_lstm()->set_group_plan(false);
    if (second_run == SecondRun::EqualGroups) gpu.fused_lstm()->set_gemm_beside(false);
    if (second_run == SecondRun::LayersInTurn) {
      if (second) gpu.fused_lstm()->set_overlap(false);
      EXPECT_NE(gpu.fused_lstm()->describe().find(second ? "in turn" : "overlapped"), std::string::npos)
          << gpu.fused_lstm()->describe();
    }
    gpu.set_params(params);
    gpu.set_train_shard(shard);
    for (const std::vector<int64_t>& batch : batches) {
      gpu.forward_backward(batch);
      if (second_run == SecondRun::EqualGroups) {   // the comparison is void unless the first run cut several groups
        EXPECT_EQ(gpu.fused_lstm()->planned_groups() > 1, !second) << what;
      }
      if (second_run == SecondRun::SameGemmBeside) {
        EXPECT_TRUE(gpu.fused_lstm()->gemm_beside()) << what;
      }
      run.push_back(gpu.fused_buffer());
      gpu.allreduce();
      gpu.update(1e-3f);
    }
    run.push_back(gpu.params());
  }
  ASSERT_EQ(got[0].size(), batches.size() + 1);
  for (size_t i = 0; i < got[0].size(); ++i) {
    ASSERT_EQ(got[0][i].size(), got[1][i].size());
    EXPECT_EQ(0, std::memcmp(got[0][i].data(), got[1][i].data(), got[0][i].size() * sizeof(float)))
        << what << ": " << (i < batches.size() ? RT_MSG("the gradients of batch " << i) : std::string("the parameters"))
        << " differ between two identical runs";
  }
}

}  // namespace

// What a step launched ahead (Backend::prepare_next) computes is what the plain step computes, bit for bit, and what
// is prepared but then not run as prepared is discarded: other positions next, new parameters in between, an unused
// last one. Run A steps plainly; run B prepares every next step, at step 3 the wrong one, and at step 5 both runs get
// new parameters after the update (B's launched step must then be recomputed). The fused buffer after every step,
// the totals and the final parameters must match bit for bit (K = 1, K = 4 with an empty slot, K = 24 with the
// device slot table and the split GEMM; H = 128 runs the cluster kernel).
TEST(FusedAhead, PreparedStepsMatchPlainSteps) {
  RT_SKIP_WITHOUT_GPU();
  // The last case with the head's dropout: a step launched ahead draws the masks of the next global step.
  struct Case {
    int64_t H, K;
    double head_dropout;
  };
  for (const auto& [H, K, head_dropout] :
       std::vector<Case>{{50, 1, 0.0}, {50, 4, 0.0}, {50, 24, 0.0}, {128, 4, 0.0}, {50, 4, 0.3}}) {
    const ModelShape shape{36, H, 1, 10, Task::Classification};
    std::vector<int64_t> lengths;
    for (int64_t i = 0; i < 3 * K + 2; ++i) lengths.push_back(1 + (i * 37) % 120);
    const Shard shard = make_shard(shape, lengths, 7);
    auto batch_of = [&](int s) {
      std::vector<int64_t> b;
      for (int64_t k = 0; k < K; ++k) b.push_back((s * K + k) % shard.size());
      if (K > 1 && s % 3 == 1) b.back() = -1;
      return b;
    };
    const std::vector<float> p0 = init_params(ParamLayout(shape), 3), p1 = init_params(ParamLayout(shape), 4);
    std::vector<std::vector<float>> got[2];
    std::vector<double> losses[2];
    for (int run = 0; run < 2; ++run) {
      BackendOptions o = options("cuda", "adam", K);
      o.dropout.head = head_dropout;
      o.seed = 5;
      CudaBackend gpu(shape, o, fused_tuning());
      ASSERT_TRUE(gpu.fused_active());
      gpu.set_params(p0);
      gpu.set_train_shard(shard);
      for (int s = 0; s < 8; ++s) {
        gpu.set_global_step(s);   // as the trainer does: a step launched ahead is taken when it is the next one
        gpu.forward_backward(batch_of(s));
        got[run].push_back(gpu.fused_buffer());
        if (run == 1) gpu.prepare_next(batch_of(s == 3 ? s + 2 : s + 1));
        gpu.allreduce();
        const StepTotals t = gpu.update(1e-3f);
        losses[run].push_back(t.loss_sum);
        if (s == 5) gpu.set_params(p1);
      }
      got[run].push_back(gpu.params());
    }
    const std::string what = RT_MSG("H=" << H << " K=" << K << " head dropout " << head_dropout);
    ASSERT_EQ(got[0].size(), got[1].size()) << what;
    for (size_t i = 0; i < got[0].size(); ++i)
      EXPECT_EQ(0, std::memcmp(got[0][i].data(), got[1][i].data(), got[0][i].size() * sizeof(float)))
          << what << ": " << (i + 1 < got[0].size() ? RT_MSG("the gradients of step " << i) : "the parameters")
          << " differ with steps launched ahead";
    EXPECT_EQ(losses[0], losses[1]) << what;
  }
}

// Two backends, the same batches: the fused buffers are identical bit for bit (fixed summation orders, no atomics),
// at K = 1 and with the K-block reduction, for each pooling.
TEST(FusedDeterminism, BitwiseIdenticalReruns) {
  RT_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<int64_t, Pool>> cases = {{50, Pool::Last}, {128, Pool::Last}, {50, Pool::Mean},
                                                       {128, Pool::Mean}, {50, Pool::Max},  {128, Pool::Max}};
  for (const auto& [H, pool] : cases) {
    const ModelShape shape{36, H, 1, 10, Task::Classification, false, pool};
    const Shard shard = make_shard(shape, {130, 1, 64, 97, 5, 120, 2, 77}, 3);
    expect_identical_reruns(shape, shard, 9, {{0}, {0, 1, 2, 3, 4, 5, 6, 7, -1}}, 9,
                            RT_MSG("H=" << H << " " << pool_name(pool) << " pool"));
  }
}

// The same with 24 sequences a step: no streaming; the weight gradients by the GEMM split over the timesteps of all
// sequences, its clusters' sums added in order.
TEST(FusedDeterminism, BitwiseIdenticalRerunsManySequences) {
  RT_SKIP_WITHOUT_GPU();
  for (Pool pool : {Pool::Last, Pool::Mean}) {
    const ModelShape shape{36, 50, 1, 10, Task::Classification, false, pool};
    const auto [lengths, batch] = ragged_batch(24);
    expect_identical_reruns(shape, make_shard(shape, lengths, 5), 24, {batch, batch}, 11,
                            RT_MSG(pool_name(pool) << " pool, 24 sequences"));
  }
}

// The 16-block cluster with more sequences than clusters run at once (K > 16 at H > 128), each pool.
TEST(FusedDeterminism, BitwiseIdenticalRerunsManySequencesCluster16) {
  RT_SKIP_WITHOUT_GPU();
  for (Pool pool : {Pool::Last, Pool::Mean, Pool::Max}) {
    const ModelShape shape{36, 256, 1, 10, Task::Classification, false, pool};
    const auto [lengths, batch] = ragged_batch(26);
    expect_identical_reruns(shape, make_shard(shape, lengths, 5), 26, {batch, batch}, 11,
                            RT_MSG("H=256 " << pool_name(pool) << " pool, 26 sequences"));
  }
}

// Groups of their own sizes (group_plan.hpp) compute what groups of one size compute, bit for bit: a sequence is one
// column of the tensor cores' products, whichever group and tile hold it. H = 256 with 100 sequences (lengths 1..130:
// groups of 8 to 24 on the clusters of an H100) for each pool, 2 layers with 40, two directions with 30.
TEST(FusedDeterminism, GroupsOfTheirOwnSizesAsGroupsOfOneSize) {
  RT_SKIP_WITHOUT_GPU();
  const auto [lengths, batch] = ragged_batch(100);
  for (Pool pool : {Pool::Last, Pool::Mean, Pool::Max}) {
    const ModelShape shape{36, 256, 1, 10, Task::Classification, false, pool};
    expect_identical_reruns(shape, make_shard(shape, lengths, 5), 100, {batch, batch}, 11,
                            RT_MSG("H=256 " << pool_name(pool) << " pool, 100 sequences, planned vs equal groups"),
                            SecondRun::EqualGroups);
  }
  for (const auto& [L, bi, K] : std::vector<std::tuple<int64_t, bool, int64_t>>{{2, false, 40}, {1, true, 30}}) {
    const ModelShape shape{36, 200, L, 10, Task::Classification, bi, Pool::Mean};
    const auto [len, b] = ragged_batch(K);
    expect_identical_reruns(shape, make_shard(shape, len, 5), K, {b, b}, 11,
                            RT_MSG("H=200 L=" << L << (bi ? " bidirectional" : "") << ", " << K
                                              << " sequences, planned vs equal groups"),
                            SecondRun::EqualGroups);
  }
}

// The weight-gradient GEMM beside the backward (a second stream; FusedLstm::backward_beside) reruns bit for bit: H = 256
// and 200 with 100 sequences of lengths 1..130 (groups of 1 to 3 tiles), each pool.
TEST(FusedDeterminism, BitwiseIdenticalRerunsGemmBeside) {
  RT_SKIP_WITHOUT_GPU();
  const auto [lengths, batch] = ragged_batch(100);
  for (int64_t H : {256, 200})
    for (Pool pool : {Pool::Last, Pool::Mean, Pool::Max}) {
      const ModelShape shape{36, H, 1, 10, Task::Classification, false, pool};
      expect_identical_reruns(shape, make_shard(shape, lengths, 5), 100, {batch, batch}, 11,
                              RT_MSG("H=" << H << " " << pool_name(pool) << " pool, 100 sequences, GEMM beside"),
                              SecondRun::SameGemmBeside);
    }
}

// 256 < H <= 512 (fused_wide.cu): K = 1, 9 and 40 (two groups of 20 on the two cohorts of an H100), bidirectional
// K = 9.
TEST(FusedDeterminism, BitwiseIdenticalRerunsWide) {
  RT_SKIP_WITHOUT_GPU();
  for (bool bi : {false, true}) {
    const ModelShape shape{36, 400, 1, 10, Task::Classification, bi, Pool::Mean};
    const Shard shard = make_shard(shape, {130, 1, 64, 97, 5, 120, 2, 77}, 3);
    const std::string what = RT_MSG("H=400" << (bi ? " bidirectional" : ""));
    expect_identical_reruns(shape, shard, 9, {{0}, {0, 1, 2, 3, 4, 5, 6, 7, -1}}, 9, what);
    if (bi) continue;
    const auto [lengths, batch] = ragged_batch(40);
    expect_identical_reruns(shape, make_shard(shape, lengths, 5), 40, {batch, batch}, 11, what + ", 40 sequences");
  }
}

// Stacked: 2 layers at H = 50 and 3 at H = 128, K = 1, 9 (streaming) and 24 (split GEMM).
TEST(FusedDeterminism, BitwiseIdenticalRerunsStacked) {
  RT_SKIP_WITHOUT_GPU();
  for (const auto& [H, L] : std::vector<std::pair<int64_t, int64_t>>{{50, 2}, {128, 3}}) {
    const ModelShape shape{36, H, L, 10, Task::Classification, false, Pool::Mean};
    const Shard shard = make_shard(shape, {130, 1, 64, 97, 5, 120, 2, 77}, 3);
    expect_identical_reruns(shape, shard, 9, {{0}, {0, 1, 2, 3, 4, 5, 6, 7, -1}}, 9,
                            RT_MSG("H=" << H << " L=" << L));
    const auto [lengths, batch] = ragged_batch(24);
    expect_identical_reruns(shape, make_shard(shape, lengths, 5), 24, {batch, batch}, 11,
                            RT_MSG("H=" << H << " L=" << L << ", 24 sequences"));
  }
}

// Stacked layers overlapped (each kernel polling the flags of the ones before: up to 16 sequences, one direction, the
// cluster variant) compute what the layers one after another compute, bit for bit: 2 layers at H = 128 (4-block
// clusters), 3 at H = 200 (16 blocks, two tiles of gate rows), K = 1 and 9 with an empty slot, every pool.
TEST(FusedStackedOverlap, SameBitsAsLayersInTurn) {
  RT_SKIP_WITHOUT_GPU();
  for (const auto& [H, L, pool] : std::vector<std::tuple<int64_t, int64_t, Pool>>{
           {128, 2, Pool::Last}, {128, 2, Pool::Max}, {200, 3, Pool::Mean}, {96, 4, Pool::Last}}) {
    const ModelShape shape{36, H, L, 10, Task::Classification, false, pool};
    const Shard shard = make_shard(shape, {130, 1, 64, 97, 5, 120, 2, 77}, 3);
    expect_identical_reruns(shape, shard, 9, {{0}, {0, 1, 2, 3, 4, 5, 6, 7, -1}, {3}}, 9,
                            RT_MSG("H=" << H << " L=" << L << " " << pool_name(pool) << " pool, overlapped vs in turn"),
                            SecondRun::LayersInTurn);
  }
}

// Bidirectional: both directions' clusters, K = 1, 9 (streaming) and 24 (split GEMM), each pool; the directions
// apart (H = 128; two layers at H = 50) too.
TEST(FusedDeterminism, BitwiseIdenticalRerunsBidirectional) {
  RT_SKIP_WITHOUT_GPU();
  for (const auto& [H, L, pool] : std::vector<std::tuple<int64_t, int64_t, Pool>>{
           {50, 1, Pool::Last}, {50, 1, Pool::Mean}, {50, 1, Pool::Max}, {128, 1, Pool::Max}, {50, 2, Pool::Mean}}) {
    const ModelShape shape = bidir({36, H, L, 10, Task::Classification}, pool);
    const Shard shard = make_shard(shape, {130, 1, 64, 97, 5, 120, 2, 77}, 3);
    const std::string what = RT_MSG("bidirectional H=" << H << " L=" << L << " " << pool_name(pool) << " pool");
    expect_identical_reruns(shape, shard, 9, {{0}, {0, 1, 2, 3, 4, 5, 6, 7, -1}}, 9, what);
    const auto [lengths, batch] = ragged_batch(24);
    expect_identical_reruns(shape, make_shard(shape, lengths, 5), 24, {batch, batch}, 11, what + ", 24 sequences");
  }
}

TEST(FusedFallback, UncoveredModelsUseCudnn) {
  RT_SKIP_WITHOUT_GPU();
  for (const ModelShape& shape : {ModelShape{36, 50, 5, 10, Task::Classification},
                                  ModelShape{36, 513, 1, 10, Task::Classification},
                                  ModelShape{36, 513, 1, 10, Task::Classification, true},
                                  ModelShape{36, 100, 5, 10, Task::Classification, true}}) {
    CudaBackend gpu(shape, options("cuda", "adam"), fused_tuning());
    EXPECT_FALSE(gpu.fused_active());
    EXPECT_NE(gpu.describe().find("fused kernel not used"), std::string::npos) << gpu.describe();
  }
  // Head dropout: the fused kernel draws the mask itself (GpuModelOptions.FusedHeadDropout checks it).
  BackendOptions dropped = options("cuda", "adam");
  dropped.dropout.head = 0.3;
  CudaBackend with_dropout(ModelShape{36, 50, 1, 10, Task::Classification, false, Pool::Mean}, dropped,
                           fused_tuning());
  EXPECT_TRUE(with_dropout.fused_active()) << with_dropout.describe();
  CudaTuning cudnn;
  cudnn.lstm = LstmPath::Cudnn;
  CudaBackend gpu(ModelShape{36, 50, 1, 10, Task::Classification}, options("cuda", "adam"), cudnn);
  EXPECT_FALSE(gpu.fused_active());
}

TEST(FusedAuto, PicksAPathAndSaysWhy) {
  RT_SKIP_WITHOUT_GPU();
  CudaTuning t;
  t.lstm = LstmPath::Auto;
  CudaBackend gpu(ModelShape{36, 50, 1, 10, Task::Classification}, options("cuda", "adam"), t);
  std::printf("[ fused    ] %s\n", gpu.describe().c_str());
  EXPECT_NE(gpu.describe().find("auto at T=100"), std::string::npos);
}

// Cycles per forward and backward timestep of block 0 (clock64 at the phase boundaries), for the latency budget;
// H = 50 also with mean and max pooling (what the pooling adds to the recurrence); H = 96 and 128: the cluster variant.
TEST(FusedBudget, CyclesPerTimestep) {
  RT_SKIP_WITHOUT_GPU();
  for (int64_t H : {50, 96, 128}) {
    for (int64_t K : {1, 16, 128}) {
      for (Pool pool : {Pool::Last, Pool::Mean, Pool::Max}) {
        if ((H != 50 && pool != Pool::Last) || (H == 96 && K != 1) || (K == 16 && (H != 50 || pool != Pool::Last)))
          continue;
        const ModelShape shape{36, H, 1, 10, Task::Classification, false, pool};
        CudaBackend gpu(shape, options("cuda", "adam", K), fused_tuning());
        ASSERT_TRUE(gpu.fused_active());
        gpu.set_params(init_params(ParamLayout(shape), 1));
        const Shard shard = make_shard(shape, std::vector<int64_t>(static_cast<size_t>(K), 96), 4);
        gpu.set_train_shard(shard);
        std::vector<int64_t> batch;
        for (int64_t k = 0; k < K; ++k) batch.push_back(k);
        gpu.forward_backward(batch);   // warm-up
        gpu.synchronize();
        gpu.fused_lstm()->record_cycles(true);
        gpu.forward_backward(batch);
        gpu.synchronize();
        const FusedCycles c = gpu.fused_lstm()->last_cycles(nullptr);
        gpu.fused_lstm()->record_cycles(false);
        int clock_khz = 0;
        cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
        std::printf("[ budget   ] H=%lld K=%lld T=96 %s pool: projection kernel %.1f us, recurrence kernel %.1f us "
                    "(block 0: staging W_hh %lld, forward %lld (%.0f/step), head %lld, backward %lld (%.0f/step), "
                    "total %lld cycles = %.1f us at %.2f GHz), weight-gradient GEMM %.1f us, sums over groups and "
                    "sequences %.1f us\n",
                    static_cast<long long>(H), static_cast<long long>(K), pool_name(pool), c.projection_us,
                    c.recurrence_us, static_cast<long long>(c.stage), static_cast<long long>(c.forward),
                    c.forward / 96.0, static_cast<long long>(c.head), static_cast<long long>(c.backward),
                    c.backward / 96.0, static_cast<long long>(c.total), c.total / (clock_khz * 1e-3),
                    clock_khz * 1e-6, c.weight_grads_us, c.sums_us);
        // The kernels as training launches them (programmatic dependent launch, no event between them), median of
        // 20 runs: the weight-gradient GEMM streaming beside the backward, and waiting for the recurrence kernel.
        FusedLstm& f = *gpu.fused_lstm();
        const double streamed = f.time_us(K, 96, nullptr);
        f.set_streaming(false);
        const double waiting = f.time_us(K, 96, nullptr);
        f.set_streaming(true);
        std::printf("[ budget   ] H=%lld K=%lld T=96 %s pool: whole run %.1f us streaming, %.1f us waiting\n",
                    static_cast<long long>(H), static_cast<long long>(K), pool_name(pool), streamed, waiting);
        EXPECT_GT(c.forward, 0);
        EXPECT_GT(c.backward, 0);
        EXPECT_GT(c.projection_us, 0.0);
        EXPECT_GT(c.weight_grads_us, 0.0);
      }
    }
  }
}

// The whole training step at H = 50, K = 1 as the trainer drives the backend (each next step launched ahead, the
// optimizer after each), timed on the host over 3,000 steps after 300: for comparing builds of the recurrence kernel
// by what a step costs, with one binary (`ragtrain bench` A/Bs need the other). Lengths 60..130 in a fixed mixed order
// (the benchmark's range), Adam; printed, not checked (speed targets belong to the benchmarks).
TEST(FusedBudget, WholeStepK1) {
  RT_SKIP_WITHOUT_GPU();
  const ModelShape shape{36, 50, 1, 10, Task::Classification, false, Pool::Last};
  CudaBackend gpu(shape, options("cuda", "adam", 1), fused_tuning());
  ASSERT_TRUE(gpu.fused_active());
  gpu.set_params(init_params(ParamLayout(shape), 1));
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < 200; ++i) lengths.push_back(60 + (i * 37) % 71);   // every length of 60..130
  const Shard shard = make_shard(shape, lengths, 5);
  gpu.set_train_shard(shard);
  const int warmup = 300, steps = 3000;
  std::chrono::steady_clock::time_point start;
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup) {
      gpu.synchronize();
      start = std::chrono::steady_clock::now();
    }
    gpu.forward_backward({s % shard.size()});
    gpu.prepare_next({(s + 1) % shard.size()});
    gpu.allreduce();
    const StepTotals t = gpu.update(1e-3f);
    ASSERT_TRUE(t.finite) << "step " << s;
  }
  gpu.synchronize();
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ budget   ] H=50 K=1 whole training step (launched ahead, Adam, lengths 60..130): %.2f us a step\n",
              us / steps);
}

// Host logic only (runs without a GPU): the gate-block offsets come from the PyTorch -> device index map, and a map
// that splits a gate block is refused (the backend then falls back to cuDNN) rather than read wrongly.
TEST(FusedLayout, GateBlocksFromTheIndexMap) {
  const ModelShape shape{3, 4, 1, 2, Task::Classification};
  const ParamLayout layout(shape);
  const int64_t P = layout.total(), shift = 7;   // the device layout: PyTorch's, 7 floats further on
  std::vector<int64_t> index(static_cast<size_t>(P));
  for (int64_t i = 0; i < P; ++i) index[static_cast<size_t>(i)] = i + shift;
  const FusedLayoutResult ok = fused_layout_from_index(shape, index, 100, 200);
  ASSERT_TRUE(ok.ok) << ok.why;
  for (int q = 0; q < 4; ++q) {
    EXPECT_EQ(ok.layout.w_ih[q], layout.w_ih(0).offset + shift + q * 4 * 3);
    EXPECT_EQ(ok.layout.w_hh[q], layout.w_hh(0).offset + shift + q * 4 * 4);
    EXPECT_EQ(ok.layout.b_ih[q], layout.b_ih(0).offset + shift + q * 4);
    EXPECT_EQ(ok.layout.b_hh[q], layout.b_hh(0).offset + shift + q * 4);
  }
  EXPECT_EQ(ok.layout.fc_w, 100);
  EXPECT_EQ(ok.layout.fc_b, 100 + 2 * 4);
  EXPECT_EQ(ok.layout.extras, 200);
  const size_t hh = static_cast<size_t>(layout.w_hh(0).offset);
  std::swap(index[hh + 1], index[hh + 2]);
  const FusedLayoutResult split = fused_layout_from_index(shape, index, 100, 200);
  EXPECT_FALSE(split.ok);
  EXPECT_NE(split.why.find("non-contiguously"), std::string::npos) << split.why;
  EXPECT_EQ(fused_lstm_unsupported(ModelShape{3, 4, 2, 2, Task::Classification}), "");
  EXPECT_EQ(fused_lstm_unsupported(ModelShape{3, 4, 4, 2, Task::Classification}), "");
  EXPECT_NE(fused_lstm_unsupported(ModelShape{3, 4, 5, 2, Task::Classification}), "");
  EXPECT_EQ(fused_lstm_unsupported(ModelShape{3, 4, 2, 2, Task::Classification, true}), "");
  EXPECT_NE(fused_lstm_unsupported(ModelShape{3, 4, 5, 2, Task::Classification, true}), "");
  EXPECT_NE(fused_lstm_unsupported(ModelShape{3, 513, 1, 2, Task::Classification}), "");
  EXPECT_EQ(fused_lstm_unsupported(ModelShape{3, 512, 1, 2, Task::Classification}), "");
  EXPECT_EQ(fused_lstm_unsupported(ModelShape{3, 257, 1, 2, Task::Classification}), "");
  EXPECT_EQ(fused_lstm_unsupported(ModelShape{3, 256, 1, 2, Task::Classification}), "");
  EXPECT_EQ(fused_lstm_unsupported(ModelShape{3, 129, 1, 2, Task::Classification}), "");
  for (Pool pool : {Pool::Mean, Pool::Max})
    EXPECT_EQ(fused_lstm_unsupported(ModelShape{3, 50, 1, 2, Task::Classification, false, pool}), "")
        << pool_name(pool);
  // Bidirectional: both directions' gate blocks (the reverse's after the forward's in PyTorch's order), the head's
  // input 2 H wide; up to H = 256 (above 64 the directions run apart).
  ModelShape bi = shape;
  bi.bidirectional = true;
  EXPECT_EQ(fused_lstm_unsupported(bi), "");
  const ParamLayout bl(bi);
  std::vector<int64_t> bindex(static_cast<size_t>(bl.total()));
  for (int64_t i = 0; i < bl.total(); ++i) bindex[static_cast<size_t>(i)] = i + shift;
  const FusedLayoutResult both = fused_layout_from_index(bi, bindex, 300, 400);
  ASSERT_TRUE(both.ok) << both.why;
  for (int q = 0; q < 4; ++q) {
    EXPECT_EQ(both.layout.w_ih[q], bl.w_ih(0, 0).offset + shift + q * 4 * 3);
    EXPECT_EQ(both.reverse.w_ih[q], bl.w_ih(0, 1).offset + shift + q * 4 * 3);
    EXPECT_EQ(both.reverse.w_hh[q], bl.w_hh(0, 1).offset + shift + q * 4 * 4);
    EXPECT_EQ(both.reverse.b_ih[q], bl.b_ih(0, 1).offset + shift + q * 4);
    EXPECT_EQ(both.reverse.b_hh[q], bl.b_hh(0, 1).offset + shift + q * 4);
  }
  EXPECT_NE(both.layout.w_ih[0], both.reverse.w_ih[0]);
  EXPECT_EQ(both.layout.fc_b, 300 + 2 * 2 * 4);   // fc.weight is (C, 2 H)
  EXPECT_EQ(both.reverse.fc_b, both.layout.fc_b);
  bi.hidden = 64;
  EXPECT_EQ(fused_lstm_unsupported(bi), "");
  bi.hidden = 256;
  EXPECT_EQ(fused_lstm_unsupported(bi), "");
  bi.hidden = 512;
  EXPECT_EQ(fused_lstm_unsupported(bi), "");
  bi.hidden = 513;
  EXPECT_NE(fused_lstm_unsupported(bi), "");
  // Stacked: each upper layer's gate blocks, its W_ih H columns wide.
  const ModelShape st{3, 4, 3, 2, Task::Classification};
  const ParamLayout sl(st);
  std::vector<int64_t> sindex(static_cast<size_t>(sl.total()));
  for (int64_t i = 0; i < sl.total(); ++i) sindex[static_cast<size_t>(i)] = i + shift;
  const FusedLayoutResult three = fused_layout_from_index(st, sindex, 500, 600);
  ASSERT_TRUE(three.ok) << three.why;
  ASSERT_EQ(three.upper.size(), 2u);
  for (int64_t l = 1; l < 3; ++l)
    for (int q = 0; q < 4; ++q) {
      const FusedLayout& u = three.upper[static_cast<size_t>(l - 1)];
      EXPECT_EQ(u.w_ih[q], sl.w_ih(l, 0).offset + shift + q * 4 * 4);
      EXPECT_EQ(u.w_hh[q], sl.w_hh(l, 0).offset + shift + q * 4 * 4);
      EXPECT_EQ(u.b_ih[q], sl.b_ih(l, 0).offset + shift + q * 4);
      EXPECT_EQ(u.b_hh[q], sl.b_hh(l, 0).offset + shift + q * 4);
      EXPECT_EQ(u.fc_w, 500);
      EXPECT_EQ(u.extras, 600);
    }
  // Stacked and bidirectional: layer l's directions in turn after layer 0's, W_ih 2 H columns wide above layer 0.
  ModelShape sb = st;
  sb.bidirectional = true;
  const ParamLayout sbl(sb);
  std::vector<int64_t> sbindex(static_cast<size_t>(sbl.total()));
  for (int64_t i = 0; i < sbl.total(); ++i) sbindex[static_cast<size_t>(i)] = i + shift;
  const FusedLayoutResult six = fused_layout_from_index(sb, sbindex, 700, 800);
  ASSERT_TRUE(six.ok) << six.why;
  ASSERT_EQ(six.upper.size(), 4u);
  EXPECT_EQ(six.reverse.w_hh[0], sbl.w_hh(0, 1).offset + shift);
  for (int64_t l = 1; l < 3; ++l)
    for (int64_t d = 0; d < 2; ++d)
      for (int q = 0; q < 4; ++q) {
        const FusedLayout& u = six.upper[static_cast<size_t>(2 * (l - 1) + d)];
        EXPECT_EQ(u.w_ih[q], sbl.w_ih(l, d).offset + shift + q * 4 * 8);
        EXPECT_EQ(u.w_hh[q], sbl.w_hh(l, d).offset + shift + q * 4 * 4);
        EXPECT_EQ(u.b_hh[q], sbl.b_hh(l, d).offset + shift + q * 4);
        EXPECT_EQ(u.fc_b, 700 + 2 * 8);
      }
}
