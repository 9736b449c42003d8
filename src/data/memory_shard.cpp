// Shards and subsets cut from an in-memory data set: the shape read_shard produces from a file, and a data set
// of its own (tune's split and folds).
#include <algorithm>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/ragged_data.hpp"

namespace ragtrain {

namespace {

// Appends the sequences `indices` of `data`, in that order, to a feature buffer (a Shard's BulkVector or a
// RaggedData's vector), its offsets (starting with 0), and the labels or targets of a labeled set.
template <class Features>
void append_sequences(const RaggedData& data, const std::vector<int64_t>& indices, Features& features,
                      std::vector<int64_t>& offsets, std::vector<int32_t>& labels, std::vector<float>& targets) {
  const int64_t F = data.num_features, K = data.num_outputs;
  for (int64_t i : indices) {
    RT_CHECK(i >= 0 && i < data.num_sequences(), "index " << i << " out of range");
    const int64_t b = data.offsets[static_cast<size_t>(i)], e = data.offsets[static_cast<size_t>(i + 1)];
    features.insert(features.end(), data.features.begin() + b * F, data.features.begin() + e * F);
    offsets.push_back(offsets.back() + (e - b));
    if (!data.labeled) continue;
    if (data.task == Task::Classification)
      labels.push_back(data.labels[static_cast<size_t>(i)]);
    else
      targets.insert(targets.end(), data.targets.begin() + i * K, data.targets.begin() + (i + 1) * K);
  }
}

}  // namespace

Shard make_shard(const RaggedData& data, const std::vector<int64_t>& indices) {
  Shard s;
  copy_header(s, data);
  s.indices = indices;
  s.offsets.assign(1, 0);
  append_sequences(data, indices, s.features, s.offsets, s.labels, s.targets);
  return s;
}

RaggedData subset(const RaggedData& data, const std::vector<int64_t>& indices) {
  RaggedData out;
  copy_header(out, data);
  out.class_names = data.class_names;
  out.source = data.source;
  append_sequences(data, indices, out.features, out.offsets, out.labels, out.targets);
  if (!data.names.empty())
    for (int64_t i : indices) out.names.push_back(data.names[static_cast<size_t>(i)]);
  return out;
}

}  // namespace ragtrain
