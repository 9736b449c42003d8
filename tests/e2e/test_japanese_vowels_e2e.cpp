// Real data: JapaneseVowels converted from the embedded .ts files and trained on 2 ranks with the shipped
// configuration must reach the accuracy of published LSTM models (>= 0.97 on the 370 test series).
#include "e2e_util.hpp"

using namespace e2e;

TEST(JapaneseVowels, TwoRanksReachPublishedAccuracy) {
  Scratch d;
  const std::string dir = repo_path("inputs/japanese-vowels");
  ASSERT_EQ(run(0, "convert " + dir + "/JapaneseVowels_TRAIN.ts " + d / "train.h5").rc, 0);
  ASSERT_EQ(run(0, "convert " + dir + "/JapaneseVowels_TEST.ts " + d / "test.h5").rc, 0);
  const Result r = run(2, "train --config " + repo_path("inputs/japanese-vowels.ini") + " --data " + d / "train.h5" +
                              " --val " + d / "test.h5" + " --out " + d / "run",
                       300);
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto s = read_json(d / "run/summary.json");
  EXPECT_EQ(s["world_size"], 2);
  EXPECT_GE(s["val_accuracy"].get<double>(), 0.97) << r.output;
  std::printf("JapaneseVowels test accuracy on 2 ranks: %.4f (train loss %.4f, %.1f s)\n",
              s["val_accuracy"].get<double>(), s["train_loss"].get<double>(), s["wall_seconds"].get<double>());

  // The checkpoint reproduces the number through eval, with the normalisation stored in it.
  const Result e = run(1, "eval --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "test.h5");
  ASSERT_EQ(e.rc, 0) << e.output;
  char acc[32];
  std::snprintf(acc, sizeof acc, "accuracy %.4f", s["val_accuracy"].get<double>());
  EXPECT_TRUE(contains(e.output, acc)) << e.output;
}
