// map_class_labels: text labels to ids, in a fixed order or the sorted order of the distinct labels.
#include "ragtrain/data/class_labels.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

namespace {

bool as_number(const std::string& s, double& v) {
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (b != e && *b == '+') ++b;
  const auto [p, ec] = std::from_chars(b, e, v);
  return ec == std::errc() && p == e && b != e && std::isfinite(v);
}

}  // namespace

ClassLabels map_class_labels(const std::vector<std::string>& labels, const std::vector<std::string>& fixed_names,
                             const std::string& fixed_source, const std::function<std::string(int64_t)>& where) {
  ClassLabels out;
  if (!fixed_names.empty()) {
    out.names = fixed_names;
  } else {
    std::vector<std::string> distinct(labels);
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    std::vector<double> value(distinct.size());
    bool numeric = true;
    for (size_t i = 0; i < distinct.size() && numeric; ++i) numeric = as_number(distinct[i], value[i]);
    if (numeric) {
      std::vector<size_t> order(distinct.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return value[a] < value[b]; });
      for (size_t i : order) out.names.push_back(distinct[i]);
    } else {
      out.names = distinct;
    }
    USER_CHECK(out.names.size() >= 2,
               where(0) << ": every sequence has the label \"" << (labels.empty() ? "" : labels[0])
                        << "\"; classification needs at least 2 classes",
               "check the label column; for numeric targets pass --regression");
  }
  std::map<std::string, int32_t> id;
  for (size_t i = 0; i < out.names.size(); ++i) id.emplace(out.names[i], static_cast<int32_t>(i));
  out.ids.reserve(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto it = id.find(labels[i]);
    USER_CHECK(it != id.end(),
               where(static_cast<int64_t>(i)) << ": the label \"" << labels[i]
                                              << "\" is not one of the " << out.names.size()
                                              << " classes of " << fixed_source,
               "every label must be one of the classes listed in " << fixed_source);
    out.ids.push_back(it->second);
  }
  return out;
}

namespace {

// "a, b, c" for messages; long lists show their first and last names.
std::string name_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names.size() > 12 && i == 6) {
      out += ", ... (" + std::to_string(names.size() - 12) + " more)";
      i = names.size() - 6;
    }
    out += (i ? ", " : "") + names[i];
  }
  return out;
}

}  // namespace

void require_same_class_names(const std::vector<std::string>& names, const std::string& what,
                              const std::vector<std::string>& reference_names, const std::string& reference) {
  if (names.empty() || reference_names.empty() || names == reference_names) return;
  USER_CHECK(false,
             what << " names its classes " << name_list(names) << "; " << reference << " has " << name_list(reference_names)
                  << ": class ids would be compared across different classes",
             "convert the data with --class-names-from TRAIN.h5 (the converted training set), so that both number "
             "the same classes in the same order");
}

}  // namespace ragtrain
