// WindowFeatures: a window's feature rows, its own or gathered from a resident shard as they are copied.
#include "ragtrain/data/window_features.hpp"

#include <algorithm>
#include <cstring>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/parallel_blocks.hpp"

namespace ragtrain {

WindowFeatures::WindowFeatures(const Shard& window, const Shard& from, std::vector<int64_t> at)
    : window_(window), from_(&from), at_(std::move(at)) {
  RT_CHECK(static_cast<int64_t>(at_.size()) == window_.size() && from.num_features == window_.num_features,
           "a window of " << window_.size() << " sequences gathered from " << at_.size() << " positions");
}

void WindowFeatures::copy(float* dst, size_t first, size_t n, int threads) const {
  RT_CHECK(first + n <= size(), "window features [" << first << ", " << first + n << ") of " << size());
  // Parts of at least 1 MiB: below that a thread costs more than it copies.
  const size_t parts = std::min<size_t>(static_cast<size_t>(std::max(1, threads)), std::max<size_t>(1, n >> 18));
  const size_t per = (n + parts - 1) / parts;
  parallel_blocks(static_cast<int64_t>(parts), static_cast<int>(parts), [&](int64_t b) {
    const size_t at = static_cast<size_t>(b) * per;
    if (at < n) copy_part(dst + at, first + at, std::min(per, n - at));
  });
}

void WindowFeatures::copy_part(float* dst, size_t first, size_t n) const {
  if (n == 0) return;
  if (!from_) {
    std::memcpy(dst, window_.features.data() + first, n * sizeof(float));
    return;
  }
  const size_t F = static_cast<size_t>(window_.num_features);
  // The window's sequence holding float `first`, then sequence by sequence.
  const auto row = static_cast<int64_t>(first / F);
  size_t i = static_cast<size_t>(std::upper_bound(window_.offsets.begin(), window_.offsets.end(), row) -
                                 window_.offsets.begin() - 1);
  size_t within = first - static_cast<size_t>(window_.offsets[i]) * F;
  while (n > 0) {
    const size_t len = static_cast<size_t>(window_.length(static_cast<int64_t>(i))) * F;
    const size_t m = std::min(n, len - within);
    std::memcpy(dst, from_->x(at_[i]) + within, m * sizeof(float));
    dst += m;
    n -= m;
    within = 0;
    ++i;
  }
}

Shard window_index(const Shard& from, const std::vector<int64_t>& seqs, std::vector<int64_t>& at) {
  Shard w;
  copy_header(w, from);
  w.indices = seqs;
  w.offsets.assign(1, 0);
  at.resize(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto it = std::lower_bound(from.indices.begin(), from.indices.end(), seqs[i]);
    RT_CHECK(it != from.indices.end() && *it == seqs[i], "sequence " << seqs[i] << " is not in the resident shard");
    at[i] = it - from.indices.begin();
    w.offsets.push_back(w.offsets.back() + from.length(at[i]));
  }
  const size_t C = static_cast<size_t>(from.num_outputs);
  if (from.labeled && from.task == Task::Classification) {
    w.labels.resize(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) w.labels[i] = from.labels[static_cast<size_t>(at[i])];
  }
  if (from.labeled && from.task == Task::Regression) {
    w.targets.resize(seqs.size() * C);
    for (size_t i = 0; i < seqs.size(); ++i) std::copy_n(from.target(at[i]), C, w.targets.data() + i * C);
  }
  return w;
}

}  // namespace ragtrain
