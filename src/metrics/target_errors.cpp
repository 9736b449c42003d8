// TargetErrors sums and their table and JSON forms.
#include "ragtrain/metrics/target_errors.hpp"

#include <cmath>
#include <cstdio>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

TargetErrors::TargetErrors(int64_t targets) : k_(targets), sums_(static_cast<size_t>(2 * targets + 1), 0.0) {
  RT_CHECK(targets >= 1, "regression needs a target, got " << targets);
}

void TargetErrors::add(const float* predicted, const float* truth) {
  for (int64_t k = 0; k < k_; ++k) {
    const double d = static_cast<double>(predicted[k]) - static_cast<double>(truth[k]);
    sums_[static_cast<size_t>(k)] += d * d;
    sums_[static_cast<size_t>(k_ + k)] += std::fabs(d);
  }
  sums_.back() += 1;
}

double TargetErrors::mse(int64_t k) const { return count() > 0 ? sums_[static_cast<size_t>(k)] / count() : 0.0; }
double TargetErrors::mae(int64_t k) const {
  return count() > 0 ? sums_[static_cast<size_t>(k_ + k)] / count() : 0.0;
}

double TargetErrors::mse() const {
  double s = 0;
  for (int64_t k = 0; k < k_; ++k) s += mse(k);
  return s / static_cast<double>(k_);
}

double TargetErrors::mae() const {
  double s = 0;
  for (int64_t k = 0; k < k_; ++k) s += mae(k);
  return s / static_cast<double>(k_);
}

std::string format_regression_report(const TargetErrors& e) {
  std::string out;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%-8s %12s %12s %12s\n", "target", "mse", "rmse", "mae");
  out += buf;
  for (int64_t k = 0; k < e.targets(); ++k) {
    std::snprintf(buf, sizeof buf, "%-8s %12.6g %12.6g %12.6g\n", ("y_" + std::to_string(k)).c_str(), e.mse(k),
                  std::sqrt(e.mse(k)), e.mae(k));
    out += buf;
  }
  if (e.targets() > 1) {
    std::snprintf(buf, sizeof buf, "%-8s %12.6g %12.6g %12.6g\n", "mean", e.mse(), std::sqrt(e.mse()), e.mae());
    out += buf;
  }
  return out;
}

nlohmann::ordered_json regression_json(const TargetErrors& e) {
  using J = nlohmann::ordered_json;
  J per = J::array();
  for (int64_t k = 0; k < e.targets(); ++k)
    per.push_back(J{{"target", "y_" + std::to_string(k)}, {"mse", e.mse(k)}, {"rmse", std::sqrt(e.mse(k))},
                    {"mae", e.mae(k)}});
  return J{{"mse", e.mse()}, {"rmse", std::sqrt(e.mse())}, {"mae", e.mae()}, {"per_target", per}};
}

}  // namespace ragtrain
