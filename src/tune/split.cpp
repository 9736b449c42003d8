// Stratified hold-out split of a training set, and the data sets it writes.
#include "ragtrain/tune/split.hpp"

#include <algorithm>
#include <cmath>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/rng.hpp"

namespace ragtrain {

SplitIndices stratified_split(const std::vector<int32_t>& labels, int64_t n, double fraction, uint64_t seed) {
  RT_CHECK(fraction > 0 && fraction < 1, "split fraction " << fraction);
  RT_CHECK(labels.empty() || static_cast<int64_t>(labels.size()) == n, "labels " << labels.size() << " for " << n);
  // Groups of sequences drawn from separately: one per class, or all of them for regression.
  std::vector<std::vector<int64_t>> groups;
  if (labels.empty()) {
    groups.emplace_back();
    for (int64_t i = 0; i < n; ++i) groups[0].push_back(i);
  } else {
    const int32_t classes = labels.empty() ? 0 : *std::max_element(labels.begin(), labels.end()) + 1;
    groups.resize(static_cast<size_t>(std::max(classes, 0)));
    for (int64_t i = 0; i < n; ++i) groups[static_cast<size_t>(labels[static_cast<size_t>(i)])].push_back(i);
  }
  SplitIndices s;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<int64_t>& members = groups[g];
    const auto count = static_cast<int64_t>(members.size());
    if (count == 0) continue;
    Rng rng(seed ^ 0x73706C6974ull, g);   // one stream per class: a class's draw does not depend on the others
    shuffle(members, rng);
    int64_t to_val = static_cast<int64_t>(std::llround(fraction * static_cast<double>(count)));
    to_val = count >= 2 ? std::clamp<int64_t>(to_val, 1, count - 1) : 0;
    s.val.insert(s.val.end(), members.begin(), members.begin() + to_val);
    s.train.insert(s.train.end(), members.begin() + to_val, members.end());
  }
  std::sort(s.train.begin(), s.train.end());
  std::sort(s.val.begin(), s.val.end());
  USER_CHECK(!s.val.empty(), "the training set is too small to hold out a validation set (" << n << " sequences)",
             "give tune a validation set with --val VAL.h5 (held-out training data, never the test set)");
  return s;
}

RaggedData subset(const RaggedData& data, const std::vector<int64_t>& indices) {
  RaggedData out;
  out.labeled = data.labeled;
  out.task = data.task;
  out.num_features = data.num_features;
  out.num_outputs = data.num_outputs;
  out.class_names = data.class_names;
  out.source = data.source;
  const auto F = static_cast<size_t>(data.num_features);
  const auto K = static_cast<size_t>(data.num_outputs);
  for (int64_t i : indices) {
    const auto u = static_cast<size_t>(i);
    const auto begin = static_cast<size_t>(data.offsets[u]) * F, end = static_cast<size_t>(data.offsets[u + 1]) * F;
    out.features.insert(out.features.end(), data.features.begin() + static_cast<std::ptrdiff_t>(begin),
                        data.features.begin() + static_cast<std::ptrdiff_t>(end));
    out.offsets.push_back(out.offsets.back() + data.offsets[u + 1] - data.offsets[u]);
    if (!data.labels.empty()) out.labels.push_back(data.labels[u]);
    if (!data.targets.empty())
      out.targets.insert(out.targets.end(), data.targets.begin() + static_cast<std::ptrdiff_t>(u * K),
                         data.targets.begin() + static_cast<std::ptrdiff_t>((u + 1) * K));
  }
  return out;
}

RaggedData to_ragged(const Shard& shard, const std::vector<std::string>& class_names, const std::string& source) {
  RaggedData d;
  d.labeled = shard.labeled;
  d.task = shard.task;
  d.num_features = shard.num_features;
  d.num_outputs = shard.num_outputs;
  d.offsets = shard.offsets;
  d.features = shard.features;
  d.labels = shard.labels;
  d.targets = shard.targets;
  d.class_names = class_names;
  d.source = source;
  return d;
}

}  // namespace ragtrain
