// The device window: two slots on the GPU for windows of the training shard, each filled on a copy stream of its
// own through pinned staging while the compute stream trains on the other slot; events order the two streams.
#pragma once

#include <cstdint>

#include "cuda_raii.hpp"
#include "ragtrain/data/shard.hpp"
#include "ragtrain/data/window_features.hpp"

namespace ragtrain {

class DeviceWindow {
 public:
  // The device arrays of one slot, as the step's gather reads them.
  struct View {
    const float* features = nullptr;   // (timesteps, F)
    const int32_t* labels = nullptr;   // (n) classification
    const float* targets = nullptr;    // (n, C) regression
    const int64_t* indices = nullptr;  // (n) global sequence indices (dropout keys)
  };

  // Both slots allocated now, for windows of at most `sequences` sequences and `timesteps` rows, so no allocation
  // (and no implicit device synchronisation) happens while training. `device`: the CUDA ordinal the reader thread
  // selects before its first call.
  DeviceWindow(int device, int64_t features, int64_t outputs, Task task, int64_t sequences, int64_t timesteps,
               int copy_threads);
  DeviceWindow(const DeviceWindow&) = delete;
  DeviceWindow& operator=(const DeviceWindow&) = delete;

  int64_t bytes() const;   // device memory of both slots

  // Reader thread: queues `w`'s copy (its feature rows from `rows`) into `slot` on the copy stream, behind the
  // compute stream's last use of that slot (its `released` event, recorded by use() of the other slot). Returns once
  // every byte is in pinned staging or on its way: `w` and `rows` may then be freed. Never waits for the compute
  // stream.
  void stage(const Shard& w, const WindowFeatures& rows, int slot);
  // Loop thread: the compute stream waits for `slot`'s copy (the only point where it does), and everything queued
  // on it so far — the previous window's steps — marks the other slot released.
  View use(int slot, cudaStream_t compute);

 private:
  struct Slot {
    DeviceBuffer<float> features, targets;
    DeviceBuffer<int32_t> labels;
    DeviceBuffer<int64_t> indices;
    Event copied, released;
  };
  // Copies `bytes` to `dst` through the two pinned chunks; fill(to, at, n) writes source bytes [at, at + n) to `to`.
  template <class Fill>
  void copy_in(void* dst, size_t bytes, const Fill& fill);

  int device_;
  int copy_threads_;
  int64_t F_, C_;
  Task task_;
  int64_t sequences_, timesteps_;
  Stream copy_;
  Slot slots_[2];
  // Pinned staging: the host fills one chunk while the copy engine drains the other. 64 MiB each: large enough that
  // a copy's (and the fill threads') fixed cost is small, small enough to keep the pinned (unswappable) memory
  // negligible.
  static constexpr size_t kChunk = size_t{64} << 20;
  PinnedBuffer<char> staging_[2];
  Event chunk_done_[2];
  uint64_t chunks_ = 0;
};

}  // namespace ragtrain
