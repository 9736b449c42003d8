// Stratified hold-out split of a training set, and the data sets it writes.
#include "ragtrain/tune/split.hpp"

#include <algorithm>
#include <cmath>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/rng.hpp"

namespace ragtrain {

namespace {

// One group per class (or one for regression), each in its own seeded shuffle: a class's draw does not depend on
// the others'.
std::vector<std::vector<int64_t>> shuffled_groups(const std::vector<int32_t>& labels, int64_t n, uint64_t seed) {
  std::vector<std::vector<int64_t>> groups;
  if (labels.empty()) {
    groups.emplace_back();
    for (int64_t i = 0; i < n; ++i) groups[0].push_back(i);
  } else {
    const int32_t classes = *std::max_element(labels.begin(), labels.end()) + 1;
    groups.resize(static_cast<size_t>(std::max(classes, 0)));
    for (int64_t i = 0; i < n; ++i) groups[static_cast<size_t>(labels[static_cast<size_t>(i)])].push_back(i);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    Rng rng(seed ^ 0x73706C6974ull, g);
    shuffle(groups[g], rng);
  }
  return groups;
}

}  // namespace

SplitIndices stratified_split(const std::vector<int32_t>& labels, int64_t n, double fraction, uint64_t seed) {
  RT_CHECK(fraction > 0 && fraction < 1, "split fraction " << fraction);
  RT_CHECK(labels.empty() || static_cast<int64_t>(labels.size()) == n, "labels " << labels.size() << " for " << n);
  SplitIndices s;
  for (const std::vector<int64_t>& members : shuffled_groups(labels, n, seed)) {
    const auto count = static_cast<int64_t>(members.size());
    if (count == 0) continue;
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


std::vector<SplitIndices> stratified_folds(const std::vector<int32_t>& labels, int64_t n, int k, uint64_t seed) {
  RT_CHECK(k >= 2, "folds " << k);
  RT_CHECK(labels.empty() || static_cast<int64_t>(labels.size()) == n, "labels " << labels.size() << " for " << n);
  USER_CHECK(n >= k, "the training set has " << n << " sequences, fewer than the " << k << " folds",
             "use fewer folds (--folds), or give tune a validation set with --val VAL.h5");
  std::vector<int64_t> fold_of(static_cast<size_t>(n));
  // Round-robin through the classes one after another, continuing where the last class stopped: the folds'
  // sizes differ by at most one, and each class is spread as evenly as its count allows.
  int next = 0;
  for (const std::vector<int64_t>& members : shuffled_groups(labels, n, seed))
    for (int64_t i : members) {
      fold_of[static_cast<size_t>(i)] = next;
      next = (next + 1) % k;
    }
  std::vector<SplitIndices> folds(static_cast<size_t>(k));
  for (int64_t i = 0; i < n; ++i)
    for (int f = 0; f < k; ++f)
      (fold_of[static_cast<size_t>(i)] == f ? folds[static_cast<size_t>(f)].val : folds[static_cast<size_t>(f)].train)
          .push_back(i);
  return folds;
}

RaggedData to_ragged(const Shard& shard, const std::vector<std::string>& class_names, const std::string& source) {
  RaggedData d;
  copy_header(d, shard);
  d.offsets = shard.offsets;
  d.features.assign(shard.features.begin(), shard.features.end());
  d.labels = shard.labels;
  d.targets = shard.targets;
  d.class_names = class_names;
  d.source = source;
  return d;
}

}  // namespace ragtrain
