// Shards cut from an in-memory data set, the same shape read_shard produces from a file.
#include <algorithm>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/ragged_data.hpp"

namespace ragtrain {

Shard make_shard(const RaggedData& data, const std::vector<int64_t>& indices) {
  Shard s;
  s.labeled = data.labeled;
  s.task = data.task;
  s.num_features = data.num_features;
  s.num_outputs = data.num_outputs;
  s.indices = indices;
  s.offsets.assign(1, 0);
  const int64_t F = data.num_features, K = data.num_outputs;
  for (int64_t i : indices) {
    RT_CHECK(i >= 0 && i < data.num_sequences(), "index " << i << " out of range");
    const int64_t b = data.offsets[static_cast<size_t>(i)], e = data.offsets[static_cast<size_t>(i + 1)];
    s.features.insert(s.features.end(), data.features.begin() + b * F, data.features.begin() + e * F);
    s.offsets.push_back(s.offsets.back() + (e - b));
    if (!data.labeled) continue;
    if (data.task == Task::Classification)
      s.labels.push_back(data.labels[static_cast<size_t>(i)]);
    else
      s.targets.insert(s.targets.end(), data.targets.begin() + i * K, data.targets.begin() + (i + 1) * K);
  }
  return s;
}

}  // namespace ragtrain
