// Errors of a regression model per target: mean squared and mean absolute error, overall and for each of K.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ragtrain {

// Sums of squared and absolute errors per target over the sequences seen. Kept as sums in one array so that
// ranks add theirs with one MPI_Allreduce on sums().
class TargetErrors {
 public:
  explicit TargetErrors(int64_t targets);

  // One sequence: K predictions against K true values.
  void add(const float* predicted, const float* truth);

  int64_t targets() const { return k_; }
  double count() const { return sums_.back(); }
  double mse(int64_t k) const;   // mean over sequences of (prediction - truth)^2 for target k
  double mae(int64_t k) const;   // mean over sequences of |prediction - truth| for target k
  double mse() const;            // mean over sequences and targets (the training loss of regression)
  double mae() const;
  std::vector<double>& sums() { return sums_; }   // (2K + 1): squared errors, absolute errors, count

 private:
  int64_t k_;
  std::vector<double> sums_;
};

// Table: one row per target (y_0, y_1, ...) with MSE, RMSE and MAE, and the mean over targets.
std::string format_regression_report(const TargetErrors& e);

// {"mse", "mae", "rmse", "per_target": [{"target": "y_0", "mse", "rmse", "mae"}, ...]}.
nlohmann::ordered_json regression_json(const TargetErrors& e);

}  // namespace ragtrain
