// The pure logic of `ragtrain tune`, without MPI: the space file and the recipes drawn from it, successive
// halving (rung sizes, epochs, ranking, promotion), the stratified split, and the rows a resumed tune reads back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "ragtrain/core/error.hpp"
#include "ragtrain/tune/halving.hpp"
#include "ragtrain/tune/search_space.hpp"
#include "ragtrain/tune/split.hpp"
#include "ragtrain/tune/trial_record.hpp"

using namespace ragtrain;

namespace {

RungResult result(int64_t trial, double acc, double loss, TrialStatus st = TrialStatus::Done) {
  RungResult r;
  r.trial = trial;
  r.val_accuracy = acc;
  r.val_loss = loss;
  r.status = st;
  return r;
}

}  // namespace

TEST(TuneSpace, ParsesChoicesRangesAndLogRanges) {
  const SearchSpace s = parse_space(
      "# comment\nhidden = 16 | 32\n\nlr = 0.001 .. 0.1 log  ; why\nlayers = 1 .. 3\nclip = 0.5 .. 2\npool = mean\n",
      "t.ini");
  ASSERT_EQ(s.dims.size(), 5u);
  EXPECT_EQ(s.dims[0].kind, Dimension::Kind::Choice);
  EXPECT_EQ(s.dims[0].choices, (std::vector<std::string>{"16", "32"}));
  EXPECT_EQ(s.dims[1].kind, Dimension::Kind::LogUniform);
  EXPECT_DOUBLE_EQ(s.dims[1].lo, 0.001);
  EXPECT_TRUE(s.dims[2].integer);
  EXPECT_FALSE(s.dims[3].integer);
  EXPECT_EQ(s.dims[4].choices, std::vector<std::string>{"mean"});
}

TEST(TuneSpace, RefusesMalformedLinesWithTheLineNumber) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"hidden 32", "t.ini:1"},          {"a = 1\nhidden = 32 | | 64", "t.ini:2"},
      {"lr = 0.1 .. 0.01", "above HI"},  {"lr = 0 .. 0.1 log", "LO > 0"},
      {"lr = 0.1 .. x", "two numbers"},  {"lr = 0.01 .. 0.1 ln", "unknown scale"},
      {"seed = 1 | 2", "set by tune"},   {"data = x.h5", "set by tune"},
      {"hidden = 1\nhidden = 2", "twice"}, {"[train]\nhidden = 2", "sections"},
      {"# nothing\n", "lists no option"}};
  for (const auto& [text, why] : bad) {
    try {
      parse_space(text, "t.ini");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << text << " -> " << e.what();
      EXPECT_FALSE(e.hint().empty()) << text;
    }
  }
}

TEST(TuneSpace, DefaultSpaceCoversTheIssuesOptions) {
  const SearchSpace s = default_space();
  for (const char* name : {"normalize", "pool", "hidden", "layers", "bidirectional", "dropout", "lr", "epochs"})
    EXPECT_NE(s.find(name), nullptr) << name;
  EXPECT_EQ(s.find("normalize")->choices, (std::vector<std::string>{"none", "feature", "series"}));
  // Its own text form parses back to the same space (summary.json and tune.ini hold it).
  EXPECT_EQ(space_text(parse_space(space_text(s), "again")), space_text(s));
}

TEST(TuneSpace, RecipesArePureAndStayInTheirRanges) {
  const SearchSpace s = parse_space("hidden = 8 | 16 | 32\nlr = 0.001 .. 0.1 log\nlayers = 1 .. 3\nd = 0 .. 0.5\n",
                                    "t");
  std::set<std::string> hidden_seen, layers_seen;
  for (int64_t t = 0; t < 200; ++t) {
    const Recipe r = sample_recipe(s, 7, t);
    EXPECT_EQ(r.ini(), sample_recipe(s, 7, t).ini());   // same (space, seed, trial): same recipe
    hidden_seen.insert(r.get("hidden", ""));
    layers_seen.insert(r.get("layers", ""));
    const double lr = std::stod(r.get("lr", ""));
    EXPECT_GE(lr, 0.001 * (1 - 1e-3));
    EXPECT_LE(lr, 0.1 * (1 + 1e-3));
    const double d = std::stod(r.get("d", ""));
    EXPECT_GE(d, 0.0);
    EXPECT_LE(d, 0.5);
  }
  EXPECT_EQ(hidden_seen, (std::set<std::string>{"8", "16", "32"}));
  EXPECT_EQ(layers_seen, (std::set<std::string>{"1", "2", "3"}));
  // Another seed draws other trials; a space that gains a dimension keeps the others' values.
  int same = 0;
  for (int64_t t = 0; t < 50; ++t) same += sample_recipe(s, 7, t).ini() == sample_recipe(s, 8, t).ini();
  EXPECT_LT(same, 5);
  const SearchSpace wider = parse_space(space_text(s) + "pool = mean | max\n", "t");
  for (int64_t t = 0; t < 50; ++t)
    EXPECT_EQ(sample_recipe(wider, 7, t).get("hidden", ""), sample_recipe(s, 7, t).get("hidden", ""));
  EXPECT_NE(trial_seed(1, 0), trial_seed(1, 1));
  EXPECT_EQ(trial_seed(1, 5), trial_seed(1, 5));
  EXPECT_LT(trial_seed(1, 5), 2147483648ull);
}

TEST(TuneHalving, RungsEpochsAndPromotionCounts) {
  EXPECT_EQ(rung_count(27, 3), 3);
  EXPECT_EQ(rung_count(81, 3), 3);   // kMaxRungs
  EXPECT_EQ(rung_count(6, 3), 2);
  EXPECT_EQ(rung_count(2, 3), 1);
  EXPECT_EQ(rung_count(1, 3), 1);
  EXPECT_EQ(rung_epochs(40, 0, 3, 3), 5);    // ceil(40 / 9)
  EXPECT_EQ(rung_epochs(40, 1, 3, 3), 14);   // ceil(40 / 3)
  EXPECT_EQ(rung_epochs(40, 2, 3, 3), 40);   // the recipe's own
  EXPECT_EQ(rung_epochs(2, 0, 3, 3), 1);     // never below one epoch
  EXPECT_EQ(rung_epochs(18, 0, 3, 3), 2);    // exact divisions are not rounded up
  EXPECT_EQ(promoted_count(27, 3), 9);
  EXPECT_EQ(promoted_count(9, 3), 3);
  EXPECT_EQ(promoted_count(2, 3), 1);
}

TEST(TuneHalving, RanksByTheTasksFigureThenLossThenTrial) {
  const std::vector<RungResult> rs = {result(0, 0.8, 0.5), result(1, 0.9, 0.7), result(2, 0.9, 0.6),
                                      result(3, 0.0, 0.0, TrialStatus::Diverged), result(4, 0.9, 0.6),
                                      result(5, 0.99, 0.1, TrialStatus::Failed)};
  std::vector<int64_t> order;
  for (const RungResult& r : ranked(rs, true)) order.push_back(r.trial);
  EXPECT_EQ(order, (std::vector<int64_t>{2, 4, 1, 0, 3, 5}));
  order.clear();
  for (const RungResult& r : ranked(rs, false)) order.push_back(r.trial);   // regression: val_loss alone
  EXPECT_EQ(order, (std::vector<int64_t>{0, 2, 4, 1, 3, 5}));
}

TEST(TuneHalving, PromotionIsIndependentOfTheOrderResultsArrive) {
  std::vector<RungResult> rs;
  for (int64_t t = 0; t < 27; ++t) rs.push_back(result(t, static_cast<double>((t * 7) % 27) / 27.0, 1.0));
  const std::vector<int64_t> first = promote(rs, 27, 3, true);
  ASSERT_EQ(first.size(), 9u);
  EXPECT_TRUE(std::is_sorted(first.begin(), first.end()));
  for (int k = 0; k < 10; ++k) {
    std::rotate(rs.begin(), rs.begin() + 5, rs.end());
    std::swap(rs[3], rs[11]);
    EXPECT_EQ(promote(rs, 27, 3, true), first);
  }
  // The best nine: accuracy (t * 7) % 27 >= 18.
  for (int64_t t : first) EXPECT_GE((t * 7) % 27, 18);
}

TEST(TuneHalving, DivergedAndFailedTrialsAreNeverPromoted) {
  const std::vector<RungResult> rs = {result(0, 0.5, 1.0, TrialStatus::Diverged), result(1, 0.1, 2.0),
                                      result(2, 0.0, 0.0, TrialStatus::Failed)};
  EXPECT_EQ(promote(rs, 3, 3, true), std::vector<int64_t>{1});
  const std::vector<RungResult> none = {result(0, 0.5, 1.0, TrialStatus::Diverged)};
  EXPECT_TRUE(promote(none, 3, 3, true).empty());
}

TEST(TuneHalving, TheDefaultsTrialIsPromotedOverTheCount) {
  std::vector<RungResult> rs;
  for (int64_t t = 0; t < 9; ++t) rs.push_back(result(t, 0.1 * static_cast<double>(t), 1.0));   // trial 0 worst
  EXPECT_EQ(promote(rs, 9, 3, true), (std::vector<int64_t>{6, 7, 8}));
  EXPECT_EQ(promote(rs, 9, 3, true, 0), (std::vector<int64_t>{0, 6, 7, 8}));   // the three best, and the anchor
  EXPECT_EQ(promote(rs, 9, 3, true, 7), (std::vector<int64_t>{6, 7, 8}));      // among the best: no extra
  rs[0].status = TrialStatus::Diverged;
  EXPECT_EQ(promote(rs, 9, 3, true, 0), (std::vector<int64_t>{6, 7, 8}));      // a diverged anchor stays out
}

TEST(TuneHalving, NoiseIsOneStandardErrorAndAtLeastOneSequence) {
  EXPECT_DOUBLE_EQ(accuracy_noise(1.0, 50), 1.0 / 50);                          // no spread: one sequence
  EXPECT_NEAR(accuracy_noise(0.9, 100), std::sqrt(0.9 * 0.1 / 100), 1e-12);   // 0.03 > 0.01
  EXPECT_NEAR(accuracy_noise(0.96, 270), std::sqrt(0.96 * 0.04 / 270), 1e-12);
  EXPECT_EQ(accuracy_noise(0.5, 0), 0.0);
}

TEST(TuneHalving, ChoosesTheCheapestRecipeWithinTheNoiseOfTheBest) {
  // JapaneseVowels' last rung on a 54-sequence hold-out: 53, 52 and 52 right; the best was the largest model.
  const std::vector<RungResult> rs = {result(3, 53.0 / 54, 0.20), result(8, 52.0 / 54, 0.15),
                                      result(11, 52.0 / 54, 0.18), result(14, 0.99, 0.1, TrialStatus::Diverged)};
  const std::vector<double> cost = {8.0, 1.0, 0.5, 0.1};   // the diverged one is cheapest but has no figure
  // Without noise the best figure wins, whatever it costs (the rule before: ranked()).
  EXPECT_EQ(choose_best(rs, cost, true, 0.0).trial, 3);
  // Within one sequence (1/54) all three are the same figure: the cheapest wins.
  EXPECT_EQ(choose_best(rs, cost, true, accuracy_noise(53.0 / 54, 54)).trial, 11);
  // Of equal cost, the better figure (then the lower loss) wins.
  EXPECT_EQ(choose_best(rs, {1.0, 1.0, 1.0, 1.0}, true, 1.0 / 54).trial, 3);
  EXPECT_EQ(choose_best(rs, {9.0, 1.0, 1.0, 1.0}, true, 1.0 / 54).trial, 8);
  // Two sequences behind is outside one sequence's noise.
  const std::vector<RungResult> far = {result(3, 53.0 / 54, 0.2), result(11, 51.0 / 54, 0.1)};
  EXPECT_EQ(choose_best(far, {8.0, 0.5}, true, 1.0 / 54).trial, 3);
  // Regression: the loss within `noise` of the lowest.
  const std::vector<RungResult> reg = {result(1, 0, 0.50), result(2, 0, 0.52), result(3, 0, 0.60)};
  EXPECT_EQ(choose_best(reg, {5, 1, 0.1}, false, 0.0).trial, 1);
  EXPECT_EQ(choose_best(reg, {5, 1, 0.1}, false, 0.03).trial, 2);
  // The same results in another order choose the same run.
  const std::vector<RungResult> back(rs.rbegin(), rs.rend());
  const std::vector<double> back_cost(cost.rbegin(), cost.rend());
  EXPECT_EQ(choose_best(back, back_cost, true, 1.0 / 54).trial, 11);
}

TEST(TuneSplit, StratifiedKeepsEveryClassInBothSidesAndIsPure) {
  std::vector<int32_t> labels;
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 10 + 10 * c; ++i) labels.push_back(c);   // 10, 20, 30, 40 sequences
  labels.push_back(4);                                          // a class of one
  std::vector<int32_t> shuffled = labels;
  std::rotate(shuffled.begin(), shuffled.begin() + 37, shuffled.end());
  const auto n = static_cast<int64_t>(shuffled.size());
  const SplitIndices s = stratified_split(shuffled, n, 0.2, 11);
  EXPECT_EQ(s.train.size() + s.val.size(), shuffled.size());
  std::vector<int64_t> all = s.train;
  all.insert(all.end(), s.val.begin(), s.val.end());
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(all[static_cast<size_t>(i)], i);
  std::map<int32_t, int> in_val, in_train;
  for (int64_t i : s.val) ++in_val[shuffled[static_cast<size_t>(i)]];
  for (int64_t i : s.train) ++in_train[shuffled[static_cast<size_t>(i)]];
  EXPECT_EQ(in_val[0], 2);
  EXPECT_EQ(in_val[1], 4);
  EXPECT_EQ(in_val[2], 6);
  EXPECT_EQ(in_val[3], 8);
  EXPECT_EQ(in_val.count(4), 0u);   // a class of one stays in training
  EXPECT_EQ(in_train[4], 1);
  const SplitIndices again = stratified_split(shuffled, n, 0.2, 11);
  EXPECT_EQ(again.val, s.val);
  EXPECT_NE(stratified_split(shuffled, n, 0.2, 12).val, s.val);
}

TEST(TuneSplit, SmallClassesKeepOneOnEachSideAndTooSmallSetsAreRefused) {
  const SplitIndices s = stratified_split({0, 0, 1, 1, 1}, 5, 0.2, 1);
  EXPECT_EQ(s.val.size(), 2u);   // one of each class (round(0.4) = 0 is raised to 1)
  EXPECT_EQ(s.train.size(), 3u);
  const SplitIndices reg = stratified_split({}, 10, 0.2, 1);   // regression: over all sequences
  EXPECT_EQ(reg.val.size(), 2u);
  EXPECT_THROW(stratified_split({0, 1, 2}, 3, 0.2, 1), UserError);   // every class a single sequence
}

TEST(TuneSplit, FoldsValidateEverySequenceOnceAndSpreadEachClass) {
  std::vector<int32_t> labels;
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 7 + 5 * c; ++i) labels.push_back(c);   // 7, 12, 17 sequences
  const auto n = static_cast<int64_t>(labels.size());
  const std::vector<SplitIndices> folds = stratified_folds(labels, n, 5, 3);
  ASSERT_EQ(folds.size(), 5u);
  std::vector<int> validated(static_cast<size_t>(n), 0);
  for (const SplitIndices& f : folds) {
    EXPECT_EQ(f.train.size() + f.val.size(), static_cast<size_t>(n));
    EXPECT_TRUE(std::is_sorted(f.val.begin(), f.val.end()));
    EXPECT_TRUE(std::is_sorted(f.train.begin(), f.train.end()));
    EXPECT_GE(f.val.size(), 7u);   // 36 / 5: sizes differ by at most one
    EXPECT_LE(f.val.size(), 8u);
    std::map<int32_t, int> per_class;
    for (int64_t i : f.val) {
      ++validated[static_cast<size_t>(i)];
      ++per_class[labels[static_cast<size_t>(i)]];
    }
    // Each class in each fold: its count / 5, rounded down or up.
    EXPECT_GE(per_class[0], 1);
    EXPECT_LE(per_class[0], 2);
    EXPECT_GE(per_class[2], 3);
    EXPECT_LE(per_class[2], 4);
    for (int64_t i : f.val) EXPECT_FALSE(std::binary_search(f.train.begin(), f.train.end(), i));
  }
  for (int v : validated) EXPECT_EQ(v, 1);
  EXPECT_EQ(stratified_folds(labels, n, 5, 3)[2].val, folds[2].val);   // pure
  EXPECT_THROW(stratified_folds({0, 1}, 2, 3, 1), UserError);
  EXPECT_EQ(stratified_folds({}, 10, 2, 1)[0].val.size(), 5u);   // regression
}

TEST(TuneSplit, SubsetCopiesTheChosenSequences) {
  RaggedData d;
  d.num_features = 2;
  d.num_outputs = 3;
  d.offsets = {0, 2, 3, 6};
  d.features = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  d.labels = {2, 0, 1};
  d.class_names = {"a", "b", "c"};
  const RaggedData s = subset(d, {0, 2});
  EXPECT_EQ(s.offsets, (std::vector<int64_t>{0, 2, 5}));
  EXPECT_EQ(s.features, (std::vector<float>{0, 1, 2, 3, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(s.labels, (std::vector<int32_t>{2, 1}));
  EXPECT_EQ(s.class_names, d.class_names);
}

TEST(TuneRecords, RowsRoundTripAndDamagedRowsAreRejected) {
  const SearchSpace space = parse_space("hidden = 8 | 16\nlr = 0.001 .. 0.1 log\n", "t");
  RungResult r = result(12, 0.123456789, 0.987654321);
  r.rung = 2;
  r.epochs = 14;
  r.epochs_reached = 14;
  r.seconds = 3.25;
  const std::string row = trials_csv_row(r, 99, sample_recipe(space, 1, 12));
  const std::string header = trials_csv_header(space);
  EXPECT_EQ(std::count(header.begin(), header.end(), ','), std::count(row.begin(), row.end(), ','));
  RungResult back;
  ASSERT_TRUE(parse_trials_csv_row(row.substr(0, row.size() - 1), back));
  EXPECT_EQ(back.trial, 12);
  EXPECT_EQ(back.rung, 2);
  EXPECT_EQ(back.epochs, 14);
  EXPECT_EQ(back.val_accuracy, 0.123456789);   // %.9g: the figure ranks the same after a resume
  EXPECT_EQ(back.status, TrialStatus::Done);
  EXPECT_FALSE(parse_trials_csv_row(row.substr(0, 20), back));   // a torn write
  EXPECT_FALSE(parse_trials_csv_row("12,2,14,14,nan,nan,3.25,done,99", back));
  EXPECT_FALSE(parse_trials_csv_row("12,2,14,14,0.1,0.2,3.25,maybe,99", back));
  EXPECT_TRUE(parse_trials_csv_row("12,2,14,3,nan,nan,3.25,diverged,99", back));
  EXPECT_EQ(back.status, TrialStatus::Diverged);
  EXPECT_EQ(run_name(7, 1), "runs/t0007-r1");
}
