// Offsets, labels and finiteness checks of format v1.
#include "ragtrain/data/checks.hpp"

#include <charconv>
#include <cmath>
#include <limits>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

namespace {
const char* const kOffsetsHint =
    "offsets must start at 0, increase strictly (every sequence has at least one timestep) and end at the "
    "number of rows of /features; see doc/data-format.md";
}

bool finite_as_float32(double v) {
  return std::isfinite(v) && std::fabs(v) <= static_cast<double>(std::numeric_limits<float>::max());
}

bool parse_float32_text(const std::string& text, double& value) {
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (begin != end && *begin == '+') ++begin;
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  return ec == std::errc() && ptr == end && begin != end && finite_as_float32(value);
}

void check_offsets(const std::string& path, const std::vector<int64_t>& offsets, int64_t rows) {
  USER_CHECK(offsets.size() >= 2,
             path << ": dataset /offsets has " << offsets.size()
                  << " element(s); expected N + 1 >= 2 (at least one sequence)",
             kOffsetsHint);
  USER_CHECK(offsets[0] == 0, path << ": dataset /offsets: offsets[0] is " << offsets[0] << "; expected 0",
             kOffsetsHint);
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    if (offsets[i + 1] > offsets[i]) continue;
    if (offsets[i + 1] == offsets[i])
      throw UserError(RT_MSG(path << ": dataset /offsets: sequence " << i << " is empty (offsets[" << i
                                  << "] == offsets[" << i + 1 << "] == " << offsets[i]
                                  << "); expected at least one timestep per sequence"),
                      RT_MSG("drop empty sequences before writing; " << kOffsetsHint));
    throw UserError(RT_MSG(path << ": dataset /offsets: offsets[" << i + 1 << "] = " << offsets[i + 1]
                                << " is less than offsets[" << i << "] = " << offsets[i]
                                << "; expected strictly increasing offsets"),
                    kOffsetsHint);
  }
  USER_CHECK(offsets.back() == rows,
             path << ": dataset /offsets: the last offset (offsets[" << offsets.size() - 1
                  << "]) is " << offsets.back() << " but /features has " << rows << " rows; expected them equal",
             kOffsetsHint);
}

void check_label(const std::string& path, int64_t index, int32_t label, int64_t classes) {
  USER_CHECK(label >= 0 && label < classes,
             path << ": dataset /labels: sequence " << index << " has label " << label << "; expected 0.."
                  << classes - 1 << " (num_classes = " << classes << ")",
             "labels are class indices 0..num_classes-1; fix the labels or the num_classes attribute");
}

void check_finite_features(const std::string& path, int64_t index, const float* x, int64_t length,
                           int64_t num_features) {
  for (int64_t t = 0; t < length; ++t)
    for (int64_t f = 0; f < num_features; ++f) {
      const float v = x[t * num_features + f];
      USER_CHECK(std::isfinite(v),
                 path << ": dataset /features: sequence " << index << " has a non-finite value (" << v
                      << ") at timestep " << t << ", feature " << f << "; expected finite numbers",
                 "impute or drop missing values (NaN) and infinities before writing the file");
    }
}

void check_finite_targets(const std::string& path, int64_t index, const float* y, int64_t num_outputs) {
  for (int64_t k = 0; k < num_outputs; ++k)
    USER_CHECK(std::isfinite(y[k]),
               path << ": dataset /labels: sequence " << index << " has a non-finite target (" << y[k]
                    << ") at output " << k << "; expected finite numbers",
               "impute or drop missing regression targets before writing the file");
}

}  // namespace ragtrain
