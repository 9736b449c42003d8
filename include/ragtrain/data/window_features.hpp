// The feature rows of a window of the training shard, as a device backend copies them into its pinned staging.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ragtrain/data/shard.hpp"

namespace ragtrain {

// A window's (rows, F) features in the window's order: its own (Shard::features), or the rows of its sequences in a
// resident shard, gathered as they are copied. The second is what a window of a resident host shard uses: the rows
// go from the resident shard straight into the device's staging, one pass over host memory instead of two (a copy
// into the window, then into the staging) — at K = 128 the reader has to keep up with ~15 GB/s of training.
class WindowFeatures {
 public:
  explicit WindowFeatures(const Shard& window) : window_(window) {}
  // window's sequence i is from's sequence at position at[i]; window.features may be empty.
  WindowFeatures(const Shard& window, const Shard& from, std::vector<int64_t> at);

  size_t size() const {   // floats
    return static_cast<size_t>(window_.timesteps()) * static_cast<size_t>(window_.num_features);
  }
  // Floats [first, first + n) of the features into dst, split over `threads` threads (memory bandwidth: one
  // thread copies ~6-10 GB/s). The bytes do not depend on the thread count.
  void copy(float* dst, size_t first, size_t n, int threads = 1) const;

 private:
  void copy_part(float* dst, size_t first, size_t n) const;

  const Shard& window_;
  const Shard* from_ = nullptr;
  std::vector<int64_t> at_;
};

// The window of `from` (sorted indices) holding the sequences `seqs` (sorted global indices): header, indices,
// offsets, labels and targets, features left empty; at[i] receives seqs[i]'s position in from.
Shard window_index(const Shard& from, const std::vector<int64_t>& seqs, std::vector<int64_t>& at);

}  // namespace ragtrain
