// The confusion matrix of a classifier and what is read from it: accuracy, per-class precision, recall and F1.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ragtrain {

struct ClassScores {
  double precision = 0;   // correct / predicted as this class (0 when never predicted)
  double recall = 0;      // correct / true members of this class (0 when it has none)
  double f1 = 0;          // harmonic mean of the two (0 when both are 0)
  int64_t support = 0;    // true members
  int64_t predicted = 0;  // sequences predicted as this class
};

// Counts of (true class, predicted class). Plain int64 counts in one array, so that ranks add theirs with
// one MPI_Allreduce on counts().
class ConfusionMatrix {
 public:
  explicit ConfusionMatrix(int64_t classes);

  void add(int32_t truth, int32_t predicted, int64_t count = 1);
  int64_t classes() const { return classes_; }
  int64_t at(int32_t truth, int32_t predicted) const;
  std::vector<int64_t>& counts() { return counts_; }   // (C, C): row = true class, column = predicted class
  const std::vector<int64_t>& counts() const { return counts_; }

  int64_t total() const;
  int64_t correct() const;
  double accuracy() const;   // 0 for an empty matrix
  ClassScores scores(int32_t c) const;
  // Unweighted mean of the per-class scores over the classes that occur (as truth or as prediction), as
  // scikit-learn's average="macro" does; and the mean weighted by support (average="weighted").
  ClassScores macro_average() const;
  ClassScores weighted_average() const;

 private:
  int64_t classes_;
  std::vector<int64_t> counts_;
};

// Names for the report: `names` when it has one per class, else "0", "1", ...
std::vector<std::string> class_labels_or_ids(const std::vector<std::string>& names, int64_t classes);

// A fixed-width table: one row per class (precision, recall, F1, support), the macro and weighted averages,
// then the confusion matrix (rows: true class, columns: predicted) when it has at most `max_matrix` classes.
std::string format_classification_report(const ConfusionMatrix& m, const std::vector<std::string>& names,
                                         int64_t max_matrix = 30);

// {"accuracy", "classes", "per_class": [{class, precision, recall, f1, support, predicted}], "macro_avg",
//  "weighted_avg", "confusion_matrix": [[...]] (rows: true class, columns: predicted)}.
nlohmann::ordered_json classification_json(const ConfusionMatrix& m, const std::vector<std::string>& names);

}  // namespace ragtrain
