// The training shard's placement (resident, device window, host window), the window size from the host's and the
// device's budgets, and the window protocol a device backend sees (stage on the reader thread, use on the loop's).
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <numeric>
#include <thread>

#include "ragtrain/data/ragged_data.hpp"
#include "ragtrain/data/synthetic.hpp"
#include "ragtrain/schedule/schedule.hpp"
#include "ragtrain/train/shard_window.hpp"
#include "ragtrain/train/step.hpp"
#include "ragtrain/train/window_plan.hpp"

namespace ragtrain {
namespace {

constexpr int64_t MiB = int64_t{1} << 20, GiB = int64_t{1} << 30;

TEST(WindowPlan, ResidentWhenBothFitElseTheWindowOfTheSmallerBudget) {
  // (a) fits the host and the device: resident, no window.
  WindowPlan p = plan_window({true, true, 0, 40});
  EXPECT_EQ(p.placement, ShardPlacement::Resident);
  EXPECT_EQ(p.steps, 0);
  EXPECT_FALSE(p.on_device);
  // (b) fits the host only: the device holds windows of what its budget allows.
  p = plan_window({true, false, 0, 40});
  EXPECT_EQ(p.placement, ShardPlacement::DeviceWindow);
  EXPECT_EQ(p.steps, 40);
  EXPECT_TRUE(p.on_device);
  // (c) over the host's budget: host windows, bounded by the device's too (each goes to the device).
  p = plan_window({false, false, 70, 40});
  EXPECT_EQ(p.placement, ShardPlacement::HostWindow);
  EXPECT_EQ(p.steps, 40);
  EXPECT_TRUE(p.on_device);
  p = plan_window({false, true, 30, 40});
  EXPECT_EQ(p.steps, 30);
  EXPECT_TRUE(p.on_device);
  // The CPU backend (no device): the host's window alone, as before there was a device window.
  p = plan_window({false, true, 30, -1});
  EXPECT_EQ(p.placement, ShardPlacement::HostWindow);
  EXPECT_EQ(p.steps, 30);
  EXPECT_FALSE(p.on_device);
  // A device budget that holds no step: W = 0, which the trainer refuses with a message.
  EXPECT_EQ(plan_window({true, false, 0, 0}).steps, 0);
  EXPECT_STREQ(shard_placement_name(ShardPlacement::DeviceWindow), "device_window");
}

TEST(WindowPlan, TwoWindowsShareTheRoom) {
  EXPECT_EQ(window_steps_in(1000, 100), 5);
  EXPECT_EQ(window_steps_in(1999, 100), 9);
  EXPECT_EQ(window_steps_in(199, 100), 0);
  EXPECT_EQ(window_steps_in(-5, 100), 0);
  EXPECT_EQ(window_steps_in(1000, 0), 0);
  // K = 4 of at most 130 steps of 36 features, a class label each.
  EXPECT_EQ(window_step_bytes(4, 130, 36, 4), 4 * (130 * 36 * 4 + 4 + 24));
}

// A run that starts streamed: two windows in the room beside the shard, each at most kEarlySlotBytes, and none
// (start resident) when its first window would be the whole shard anyway.
TEST(WindowPlan, EarlyWindowsAreSmallAndOnlyWhereTheyAreNotTheWholeShard) {
  const int64_t none = INT64_MAX;
  EXPECT_EQ(early_window_steps(1000, 100, none, 50, 100), 5);     // the room bounds W
  EXPECT_EQ(early_window_steps(199, 100, none, 50, 100), 0);      // not two steps beside the shard
  EXPECT_EQ(early_window_steps(-1, 100, none, 50, 100), 0);       // the shard alone fills --max-memory
  EXPECT_EQ(early_window_steps(1000, 100, 3, 50, 100), 3);        // the test hook's cap
  EXPECT_EQ(early_window_steps(1000, 100, none, 5, 100), 0);      // a window of a whole epoch: every sequence
  EXPECT_EQ(early_window_steps(1000, 100, none, 50, 5), 0);       // every step left (a resumed run near its end)
  EXPECT_EQ(early_window_steps(1000, 100, none, 50, 6), 5);
  // A large --max-memory: the slot's cap, not the room, bounds W (the first window is read in a fraction of a
  // second whatever the shard's size). K = 128 of at most 130 steps of 36 features.
  const int64_t step = window_step_bytes(128, 130, 36, 4);
  EXPECT_EQ(early_window_steps(64 * GiB, step, none, 100000, 100000), kEarlySlotBytes / step);
}

TEST(WindowPlan, DeviceBudgetIsTheFreeMemoryLessAMarginAndAnOptionOnlyLowersIt) {
  const int64_t total = 80 * GiB;   // margin: total / 16 = 5 GiB
  EXPECT_EQ(device_shard_budget(-1, 60 * GiB, total), 55 * GiB);
  EXPECT_EQ(device_shard_budget(2 * GiB, 60 * GiB, total), 2 * GiB);
  EXPECT_EQ(device_shard_budget(100 * GiB, 60 * GiB, total), 55 * GiB);
  EXPECT_EQ(device_shard_budget(-1, 3 * GiB, total), 0);   // less free than the margin: nothing, never negative
  // A small device: the margin is at least 256 MiB.
  EXPECT_EQ(device_shard_budget(-1, 1 * GiB, 2 * GiB), 1 * GiB - 256 * MiB);
}

RaggedData data(int64_t n, Task task = Task::Classification) {
  SyntheticSpec spec;
  spec.sequences = n;
  spec.features = 3;
  spec.min_length = 2;
  spec.max_length = 9;
  spec.task = task;
  spec.classes = 4;
  spec.outputs = 2;
  spec.seed = 11;
  return make_synthetic(spec);
}

// What a window really takes (features, labels, indices: what the device copy holds) stays within W steps of
// window_step_bytes, for every window of every rank.
TEST(WindowPlan, EveryWindowFitsItsStepBytes) {
  const RaggedData d = data(200);
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < d.num_sequences(); ++i) lengths.push_back(d.offsets[i + 1] - d.offsets[i]);
  const int64_t K = 3, W = 4;
  const Schedule schedule(lengths, 2, K, 7, ScheduleKind::Balanced);
  const int64_t total = 2 * schedule.steps_per_epoch();
  Schedule::Epoch cache;
  int64_t cache_epoch = -1;
  for (int64_t rank = 0; rank < 2; ++rank)
    for (int64_t b = 0; b < total; b += W) {
      const Shard w = make_shard(d, window_sequences(schedule, rank, b, std::min(total, b + W), cache, cache_epoch));
      const int64_t bytes = static_cast<int64_t>(w.features.size() * 4 + w.labels.size() * 4 + w.indices.size() * 8);
      EXPECT_LE(bytes, W * window_step_bytes(K, 9, 3, 4));
    }
}

TEST(WindowPlan, CopySequencesEqualsReadingThemFromTheData) {
  for (Task task : {Task::Classification, Task::Regression}) {
    const RaggedData d = data(120, task);
    std::vector<int64_t> all(120);
    std::iota(all.begin(), all.end(), 0);
    const Shard resident = make_shard(d, all);
    const std::vector<int64_t> some = {0, 3, 4, 50, 51, 52, 119};
    const Shard want = make_shard(d, some);
    for (int threads : {1, 3}) {
      const Shard got = copy_sequences(resident, some, threads);
      EXPECT_EQ(got.indices, want.indices);
      EXPECT_EQ(got.offsets, want.offsets);
      EXPECT_TRUE(got.features == std::vector<float>(want.features.begin(), want.features.end()));
      EXPECT_EQ(got.labels, want.labels);
      EXPECT_EQ(got.targets, want.targets);
    }
    EXPECT_THROW(copy_sequences(make_shard(d, {1, 2}), {3}, 1), std::exception);
  }
}

// Any range of a window's gathered features, on any thread count, is the range of the copied window's.
TEST(WindowPlan, GatheredFeaturesEqualTheCopiedWindowsAnywhere) {
  // Large enough (1.3 M floats of the window) that 4 threads each take a part.
  SyntheticSpec spec;
  spec.sequences = 400;
  spec.features = 64;
  spec.min_length = 50;
  spec.max_length = 150;
  spec.classes = 4;
  spec.seed = 3;
  const RaggedData d = make_synthetic(spec);
  std::vector<int64_t> all(400), some;
  std::iota(all.begin(), all.end(), 0);
  for (int64_t g = 1; g < 400; g += 2) some.push_back(g);
  const Shard resident = make_shard(d, all);
  const Shard want = copy_sequences(resident, some, 1);
  std::vector<int64_t> at;
  const Shard index = window_index(resident, some, at);
  EXPECT_TRUE(index.features.empty());
  EXPECT_EQ(index.offsets, want.offsets);
  EXPECT_EQ(index.labels, want.labels);
  const WindowFeatures rows(index, resident, at);
  ASSERT_EQ(rows.size(), want.features.size());
  const size_t n = rows.size();
  for (size_t first : {size_t{0}, size_t{1}, size_t{8}, n / 3, n - 5})
    for (size_t len : {size_t{0}, size_t{1}, size_t{9}, n - first})
      for (int threads : {1, 4}) {
        if (first + len > n) continue;
        std::vector<float> got(len, -1.0f);
        rows.copy(got.data(), first, len, threads);
        EXPECT_TRUE(std::equal(got.begin(), got.end(), want.features.begin() + static_cast<std::ptrdiff_t>(first)))
            << "floats [" << first << ", " << first + len << ") on " << threads << " threads";
      }
  const WindowFeatures own(want);
  std::vector<float> got(n);
  own.copy(got.data(), 0, n, 3);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), want.features.begin()));
  EXPECT_THROW(rows.copy(got.data(), n - 1, 2), std::exception);
}

// A device backend as the window sees it: records what is staged and used, on which thread, in which slot.
class RecordingDevice final : public Backend {
 public:
  std::string name() const override { return "recording"; }
  void set_params(const std::vector<float>&) override {}
  std::vector<float> params() const override { return {}; }
  OptimizerState optimizer_state() const override { return {}; }
  void set_optimizer_state(const OptimizerState&) override {}
  void set_train_shard(const Shard&) override { ADD_FAILURE() << "a device window never sets the whole shard"; }
  void forward_backward(const std::vector<int64_t>&) override {}
  void allreduce() override {}
  StepTotals update(float) override { return {}; }
  LocalNonfinite first_nonfinite(const std::vector<int64_t>&) override { return {}; }
  std::vector<float> infer(const Shard&) override { return {}; }
  std::optional<DeviceMemory> device_memory() const override { return DeviceMemory{GiB, GiB}; }

  void stage_window(const Shard& w, const WindowFeatures& rows, int slot) override {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_NE(std::this_thread::get_id(), loop) << "staged on the loop's thread";
    EXPECT_EQ(slot, static_cast<int>(staged.size() % 2));
    // A slot is staged again only after the other one was used (its window's steps queued): its own previous
    // window is then no longer current.
    EXPECT_LE(staged.size(), used.size()) << "window " << staged.size() << " staged before window "
                                              << used.size() << " was used";
    EXPECT_EQ(rows.size() == 0, w.size() == 0) << "window " << staged.size();   // the uneven end: none
    staged.push_back(w.indices);
    std::vector<float> f(rows.size());
    rows.copy(f.data(), 0, f.size(), 2);
    staged_features.push_back(std::move(f));
  }
  void use_window(const Shard& w, int slot) override {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(std::this_thread::get_id(), loop);
    EXPECT_EQ(slot, static_cast<int>(used.size() % 2));
    ASSERT_LT(used.size(), staged.size()) << "used before it was staged";
    EXPECT_EQ(w.indices, staged[used.size()]);
    EXPECT_TRUE(w.features.empty()) << "the host keeps no copy of a window on the device";
    used.push_back(w.indices);
  }

  std::mutex mu;
  std::thread::id loop = std::this_thread::get_id();
  std::vector<std::vector<int64_t>> staged, used;
  std::vector<std::vector<float>> staged_features;
};

// Case (b) without a GPU: a resident shard, windows copied out of it and staged to a device, each window exactly the
// scheduled sequences with the resident values, every step's sequences found in the current window; a resume in
// the middle of an epoch (first step not on a window boundary) included.
TEST(WindowPlan, DeviceWindowsOfAResidentShardHoldEachStepsSequences) {
  const RaggedData d = data(90);
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < d.num_sequences(); ++i) lengths.push_back(d.offsets[i + 1] - d.offsets[i]);
  const int64_t K = 2, W = 3, ranks = 2;
  const Schedule schedule(lengths, ranks, K, 3, ScheduleKind::Balanced);
  const int64_t spe = schedule.steps_per_epoch(), total = 2 * spe;
  for (int64_t first : {int64_t{0}, spe / 2 + 1}) {
    for (int64_t rank = 0; rank < ranks; ++rank) {
      std::vector<int64_t> mine = schedule.rank_sequences(rank);
      std::sort(mine.begin(), mine.end());
      const Shard resident = make_shard(d, mine);
      RecordingDevice device;
      DatasetInfo info;
      ShardWindow window(info, DirectSource{}, schedule, rank, W, first, total, Normalizer{}, 2, nullptr, 0, &resident,
                         &device);
      EXPECT_TRUE(window.on_device());
      std::vector<int64_t> positions(static_cast<size_t>(K));
      for (int64_t step = first; step < total; ++step) {
        if (!window.covers(step)) window.advance(step);
        const ShardIndex index(window.shard());
        RankCounters counters;
        index.positions(schedule.epoch(step / spe), step % spe, rank, positions, counters);
        const std::vector<int64_t> batch = schedule.epoch(step / spe).rank_batch(step % spe, rank);
        for (size_t j = 0; j < batch.size(); ++j) {
          if (batch[j] >= 0) {
            EXPECT_EQ(window.shard().indices[static_cast<size_t>(positions[j])], batch[j]);
          }
        }
      }
      std::lock_guard<std::mutex> lock(device.mu);
      ASSERT_EQ(device.used.size(), static_cast<size_t>((total - first + W - 1) / W));
      Schedule::Epoch cache;
      int64_t cache_epoch = -1;
      for (size_t k = 0; k < device.used.size(); ++k) {
        const int64_t b = first + static_cast<int64_t>(k) * W;
        const std::vector<int64_t> seqs = window_sequences(schedule, rank, b, std::min(total, b + W), cache, cache_epoch);
        EXPECT_EQ(device.used[k], seqs);
        const Shard want = make_shard(d, seqs);
        EXPECT_EQ(device.staged_features[k], std::vector<float>(want.features.begin(), want.features.end()));
      }
    }
  }
}

}  // namespace
}  // namespace ragtrain
