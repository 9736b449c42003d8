// The device window against the resident shard: the same steps trained from windows staged on another thread into
// the two device slots (copy stream, pinned staging, events; features their own or gathered from the resident shard)
// give bitwise the same fused buffers and parameters as the shard copied once, with cuDNN (graphs: the gather
// repointed at each slot) and with the fused kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "../../src/backend/cuda/cuda_backend.hpp"
#include "agreement.hpp"
#include "gpu_test_util.hpp"
#include "ragtrain/core/rng.hpp"
#include "ragtrain/train/shard_window.hpp"

using namespace ragtrain;
using namespace ragtrain::gputest;

namespace {

void train_both_ways(LstmPath lstm) {
  const ModelShape shape{4, 16, 1, 3, Task::Classification, false, Pool::Mean};
  const int64_t K = 4, steps = 24, W = 5, n = 70;
  Rng rng(3, 9);
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < n; ++i) lengths.push_back(5 + static_cast<int64_t>(rng.below(36)));
  const Shard shard = make_shard(shape, lengths, 21);
  // Step s trains K distinct sequences (an empty slot in every 7th step: the uneven end).
  std::vector<std::vector<int64_t>> batches;
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<int64_t> b;
    for (int64_t j = 0; j < K; ++j) b.push_back((s * 11 + j * 17) % n);
    if (s % 7 == 6) b[1] = -1;
    batches.push_back(b);
  }
  CudaTuning tuning;
  tuning.lstm = lstm;
  CudaBackend resident(shape, options("cuda", "adam", K), tuning), windowed(shape, options("cuda", "adam", K), tuning);
  const std::vector<float> params = init_params(ParamLayout(shape), 99);
  resident.set_params(params);
  windowed.set_params(params);
  resident.set_train_shard(shard);
  Backend::DeviceWindowSize size;
  size.sequences = W * K;
  size.timesteps = W * K * 40;
  size.min_length = *std::min_element(lengths.begin(), lengths.end());
  size.max_length = *std::max_element(lengths.begin(), lengths.end());
  size.copy_threads = 4;
  windowed.open_device_window(size);

  // Even windows carry their own features, odd ones are gathered from the resident shard as they are staged (what
  // a window of a resident host shard does).
  struct Window {
    Shard w;
    std::vector<int64_t> at;
    bool gathered = false;
  };
  auto window_of = [&](int64_t begin) {
    std::vector<int64_t> seqs;
    for (int64_t s = begin; s < std::min(steps, begin + W); ++s)
      for (int64_t g : batches[static_cast<size_t>(s)])
        if (g >= 0) seqs.push_back(g);
    std::sort(seqs.begin(), seqs.end());
    seqs.erase(std::unique(seqs.begin(), seqs.end()), seqs.end());
    Window v;
    v.gathered = (begin / W) % 2 == 1;
    v.w = v.gathered ? window_index(shard, seqs, v.at) : copy_sequences(shard, seqs, 2);
    return v;
  };
  auto stage = [&](const Window& v, int slot) {
    if (v.gathered)
      windowed.stage_window(v.w, WindowFeatures(v.w, shard, v.at), slot);
    else
      windowed.stage_window(v.w, WindowFeatures(v.w), slot);
  };
  // Staged on a reader thread one window ahead, as ShardWindow does: stage k + 1 only after k is in use.
  Window current = window_of(0), next;
  std::thread reader([&] { stage(current, 0); });
  reader.join();
  for (int64_t s = 0; s < steps; ++s) {
    if (s % W == 0) {
      const int64_t k = s / W;
      if (k > 0) {
        reader.join();
        current = std::move(next);
      }
      windowed.use_window(current.w, static_cast<int>(k % 2));
      if (s + W < steps) {
        next = window_of(s + W);
        reader = std::thread([&, k] { stage(next, static_cast<int>((k + 1) % 2)); });
      }
    }
    std::vector<int64_t> in_window;
    for (int64_t g : batches[static_cast<size_t>(s)]) {
      const auto it = std::lower_bound(current.w.indices.begin(), current.w.indices.end(), g);
      in_window.push_back(g < 0 ? -1 : it - current.w.indices.begin());
    }
    resident.set_global_step(s);
    windowed.set_global_step(s);
    resident.forward_backward(batches[static_cast<size_t>(s)]);
    windowed.forward_backward(in_window);
    ASSERT_EQ(resident.fused_buffer(), windowed.fused_buffer()) << "step " << s;
    resident.allreduce();
    windowed.allreduce();
    const StepTotals a = resident.update(1e-2f), b = windowed.update(1e-2f);
    EXPECT_EQ(a.loss_sum, b.loss_sum) << "step " << s;
  }
  if (reader.joinable()) reader.join();
  EXPECT_EQ(resident.params(), windowed.params());
}

TEST(DeviceWindow, WindowsTrainTheSameModelAsTheResidentShardCudnn) {
  RT_SKIP_WITHOUT_GPU();
  train_both_ways(LstmPath::Cudnn);
}

TEST(DeviceWindow, WindowsTrainTheSameModelAsTheResidentShardFused) {
  RT_SKIP_WITHOUT_GPU();
  train_both_ways(LstmPath::Fused);
}

}  // namespace
