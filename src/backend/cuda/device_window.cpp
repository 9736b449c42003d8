// DeviceWindow: windows of the training shard copied to the GPU on their own stream, overlapped with training.
#include "device_window.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

DeviceWindow::DeviceWindow(int device, int64_t features, int64_t outputs, Task task, int64_t sequences,
                           int64_t timesteps, int copy_threads)
    : device_(device),
      copy_threads_(std::max(1, copy_threads)),
      F_(features),
      C_(outputs),
      task_(task),
      sequences_(sequences),
      timesteps_(timesteps),
      copy_(Stream::create()),
      staging_{PinnedBuffer<char>(kChunk, false), PinnedBuffer<char>(kChunk, false)},
      chunk_done_{Event::create(false), Event::create(false)} {
  for (Slot& s : slots_) {
    s.features.resize_discard(static_cast<size_t>(timesteps_ * F_));
    if (task_ == Task::Classification)
      s.labels.resize_discard(static_cast<size_t>(sequences_));
    else
      s.targets.resize_discard(static_cast<size_t>(sequences_ * C_));
    s.indices.resize_discard(static_cast<size_t>(sequences_));
    s.copied = Event::create(false);
    s.released = Event::create(false);
  }
}

int64_t DeviceWindow::bytes() const {
  const Slot& s = slots_[0];
  return 2 * static_cast<int64_t>(s.features.bytes() + s.labels.bytes() + s.targets.bytes() + s.indices.bytes());
}

template <class Fill>
void DeviceWindow::copy_in(void* dst, size_t bytes, const Fill& fill) {
  for (size_t at = 0; at < bytes; at += kChunk, ++chunks_) {
    const size_t b = chunks_ % 2, n = std::min(kChunk, bytes - at);
    CUDA_CHECK(cudaEventSynchronize(chunk_done_[b].get()));   // that chunk's previous copy has left it
    fill(staging_[b].get(), at, n);
    CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + at, staging_[b].get(), n, cudaMemcpyHostToDevice, copy_.get()));
    CUDA_CHECK(cudaEventRecord(chunk_done_[b].get(), copy_.get()));
  }
}

void DeviceWindow::stage(const Shard& w, const WindowFeatures& rows, int slot) {
  RT_CHECK(slot == 0 || slot == 1, "device window slot " << slot);
  RT_CHECK(w.size() <= sequences_ && w.timesteps() <= timesteps_,
           "a window of " << w.size() << " sequences and " << w.timesteps() << " rows; the device window holds "
                          << sequences_ << " and " << timesteps_);
  RT_CHECK(w.num_features == F_ && w.task == task_, "a window of another data set");
  CUDA_CHECK(cudaSetDevice(device_));   // this runs on the window's reader thread
  Slot& s = slots_[slot];
  // The slot's previous window may still be read by steps queued on the compute stream: wait for them on the copy
  // stream, not on the host (an event never recorded, the first time, is no wait).
  CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), s.released.get(), 0));
  // The features on the reader's threads (one thread's copy into pinned memory, ~6-10 GB/s, is slower than the copy
  // engine and than what training at K = 128 reads); the chunks are whole floats.
  copy_in(s.features.get(), rows.size() * sizeof(float), [&](char* to, size_t at, size_t n) {
    rows.copy(reinterpret_cast<float*>(to), at / sizeof(float), n / sizeof(float), copy_threads_);
  });
  auto from = [](const void* src) {
    return [src](char* to, size_t at, size_t n) { std::memcpy(to, static_cast<const char*>(src) + at, n); };
  };
  if (task_ == Task::Classification)
    copy_in(s.labels.get(), w.labels.size() * sizeof(int32_t), from(w.labels.data()));
  else
    copy_in(s.targets.get(), w.targets.size() * sizeof(float), from(w.targets.data()));
  copy_in(s.indices.get(), w.indices.size() * sizeof(int64_t), from(w.indices.data()));
  CUDA_CHECK(cudaEventRecord(s.copied.get(), copy_.get()));
}

DeviceWindow::View DeviceWindow::use(int slot, cudaStream_t compute) {
  RT_CHECK(slot == 0 || slot == 1, "device window slot " << slot);
  Slot& s = slots_[slot];
  CUDA_CHECK(cudaStreamWaitEvent(compute, s.copied.get(), 0));
  CUDA_CHECK(cudaEventRecord(slots_[1 - slot].released.get(), compute));
  View v;
  v.features = s.features.get();
  v.labels = s.labels.get();
  v.targets = s.targets.get();
  v.indices = s.indices.get();
  return v;
}

}  // namespace ragtrain
