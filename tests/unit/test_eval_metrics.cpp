// The scores eval prints and writes, against hand-computed values: confusion matrix, precision/recall/F1 with
// their macro and weighted means, and per-target MSE/MAE.
#include <gtest/gtest.h>

#include <cmath>

#include "ragtrain/metrics/confusion.hpp"
#include "ragtrain/metrics/target_errors.hpp"

using namespace ragtrain;

namespace {

// truth -> predicted, 10 sequences over 3 classes:
//            pred 0  pred 1  pred 2
//   true 0      3       1       0      support 4
//   true 1      1       2       1      support 4
//   true 2      0       0       2      support 2
ConfusionMatrix example() {
  ConfusionMatrix m(3);
  m.add(0, 0, 3);
  m.add(0, 1);
  m.add(1, 0);
  m.add(1, 1, 2);
  m.add(1, 2);
  m.add(2, 2, 2);
  return m;
}

}  // namespace

TEST(Confusion, CountsAndAccuracy) {
  const ConfusionMatrix m = example();
  EXPECT_EQ(m.total(), 10);
  EXPECT_EQ(m.correct(), 7);
  EXPECT_DOUBLE_EQ(m.accuracy(), 0.7);
  EXPECT_EQ(m.at(1, 2), 1);
  EXPECT_EQ(m.counts(), (std::vector<int64_t>{3, 1, 0, 1, 2, 1, 0, 0, 2}));
}

TEST(Confusion, PerClassScoresByHand) {
  const ConfusionMatrix m = example();
  // class 0: tp 3, predicted 4 (3 + 1), support 4 -> p = r = f1 = 0.75
  const ClassScores c0 = m.scores(0);
  EXPECT_DOUBLE_EQ(c0.precision, 0.75);
  EXPECT_DOUBLE_EQ(c0.recall, 0.75);
  EXPECT_DOUBLE_EQ(c0.f1, 0.75);
  EXPECT_EQ(c0.support, 4);
  EXPECT_EQ(c0.predicted, 4);
  // class 1: tp 2, predicted 3, support 4 -> p = 2/3, r = 1/2, f1 = 2 * (1/3) / (7/6) = 4/7
  const ClassScores c1 = m.scores(1);
  EXPECT_DOUBLE_EQ(c1.precision, 2.0 / 3);
  EXPECT_DOUBLE_EQ(c1.recall, 0.5);
  EXPECT_NEAR(c1.f1, 4.0 / 7, 1e-15);
  // class 2: tp 2, predicted 3, support 2 -> p = 2/3, r = 1, f1 = 2 * (2/3) / (5/3) = 0.8
  const ClassScores c2 = m.scores(2);
  EXPECT_DOUBLE_EQ(c2.precision, 2.0 / 3);
  EXPECT_DOUBLE_EQ(c2.recall, 1.0);
  EXPECT_NEAR(c2.f1, 0.8, 1e-15);

  const ClassScores macro = m.macro_average();
  EXPECT_NEAR(macro.precision, (0.75 + 2.0 / 3 + 2.0 / 3) / 3, 1e-15);
  EXPECT_NEAR(macro.recall, (0.75 + 0.5 + 1.0) / 3, 1e-15);
  EXPECT_NEAR(macro.f1, (0.75 + 4.0 / 7 + 0.8) / 3, 1e-15);
  const ClassScores weighted = m.weighted_average();
  EXPECT_NEAR(weighted.recall, (4 * 0.75 + 4 * 0.5 + 2 * 1.0) / 10, 1e-15);   // equals the accuracy
  EXPECT_NEAR(weighted.f1, (4 * 0.75 + 4 * 4.0 / 7 + 2 * 0.8) / 10, 1e-15);
  EXPECT_EQ(weighted.support, 10);
}

TEST(Confusion, ClassesThatNeverOccurScoreZeroAndLeaveTheMacroMean) {
  ConfusionMatrix m(3);
  m.add(0, 0, 2);
  m.add(1, 0, 1);
  m.add(1, 1, 1);   // class 2: no true member, never predicted
  const ClassScores c2 = m.scores(2);
  EXPECT_EQ(c2.precision, 0.0);
  EXPECT_EQ(c2.recall, 0.0);
  EXPECT_EQ(c2.f1, 0.0);
  // class 0: p 2/3, r 1; class 1: p 1, r 1/2 -> macro over the two classes that occur.
  EXPECT_NEAR(m.macro_average().precision, (2.0 / 3 + 1.0) / 2, 1e-15);
  EXPECT_NEAR(m.macro_average().recall, 0.75, 1e-15);
  EXPECT_EQ(ConfusionMatrix(2).accuracy(), 0.0);
}

TEST(Confusion, ReportTableAndJsonUseClassNames) {
  const ConfusionMatrix m = example();
  const std::string table = format_classification_report(m, {"walk", "run", "sit"});
  EXPECT_NE(table.find("walk            0.7500    0.7500    0.7500         4"), std::string::npos) << table;
  EXPECT_NE(table.find("macro avg"), std::string::npos);
  EXPECT_NE(table.find("confusion matrix (rows: true class, columns: predicted class)"), std::string::npos);
  EXPECT_NE(table.find("\nrun              1     2     1\n"), std::string::npos) << table;
  // Without names (or with the wrong number of them) the classes are numbered.
  EXPECT_NE(format_classification_report(m, {}).find("\n2               0.6667"), std::string::npos);
  EXPECT_NE(format_classification_report(m, {}, 2).find("too wide to print"), std::string::npos);

  const auto j = classification_json(m, {"walk", "run", "sit"});
  EXPECT_DOUBLE_EQ(j["accuracy"].get<double>(), 0.7);
  EXPECT_EQ(j["classes"][2], "sit");
  EXPECT_EQ(j["per_class"][1]["class"], "run");
  EXPECT_DOUBLE_EQ(j["per_class"][1]["recall"].get<double>(), 0.5);
  EXPECT_EQ(j["confusion_matrix"][1], (std::vector<int64_t>{1, 2, 1}));
  EXPECT_EQ(j["weighted_avg"]["support"], 10);
}

TEST(TargetErrors, PerTargetMseAndMaeByHand) {
  TargetErrors e(2);
  const float p1[2] = {1, 0}, y1[2] = {0, 0};    // errors (1, 0)
  const float p2[2] = {2, -1}, y2[2] = {0, 2};   // errors (2, -3)
  e.add(p1, y1);
  e.add(p2, y2);
  EXPECT_EQ(e.count(), 2);
  EXPECT_DOUBLE_EQ(e.mse(0), (1 + 4) / 2.0);
  EXPECT_DOUBLE_EQ(e.mse(1), (0 + 9) / 2.0);
  EXPECT_DOUBLE_EQ(e.mae(0), 1.5);
  EXPECT_DOUBLE_EQ(e.mae(1), 1.5);
  EXPECT_DOUBLE_EQ(e.mse(), (2.5 + 4.5) / 2);   // the mean over targets: the training loss of regression
  EXPECT_DOUBLE_EQ(e.mae(), 1.5);
  EXPECT_EQ(e.sums().size(), 5u);   // 2K + 1, summed over ranks as one array

  const std::string table = format_regression_report(e);
  EXPECT_NE(table.find("y_1"), std::string::npos);
  EXPECT_NE(table.find("mean"), std::string::npos);
  const auto j = regression_json(e);
  EXPECT_DOUBLE_EQ(j["mse"].get<double>(), 3.5);
  EXPECT_DOUBLE_EQ(j["per_target"][0]["rmse"].get<double>(), std::sqrt(2.5));
  EXPECT_DOUBLE_EQ(j["per_target"][1]["mae"].get<double>(), 1.5);
}
