// The model options end to end on CPUs (--bidirectional, --pool, --dropout, --head-dropout): each trains on small
// data and learns, eval and predict read the model from the checkpoint, a resumed run continues the same run, and
// the rank count changes nothing but rounding.
#include <cmath>

#include "e2e_util.hpp"

using namespace e2e;

namespace {

void gen(const Scratch& d, const std::string& name, const std::string& extra) {
  const Result r = run(0, "gen --out " + d / name + " --features 4 --min-length 4 --max-length 24 --classes 3 " + extra);
  ASSERT_EQ(r.rc, 0) << r.output;
}

void data(const Scratch& d) {
  gen(d, "train.h5", "--sequences 120 --seed 11");
  gen(d, "val.h5", "--sequences 40 --seed 12");
}

std::string train(const Scratch& d, const std::string& out, const std::string& extra) {
  return "train --data " + d / "train.h5" + " --val " + d / "val.h5" + " --out " + d / out +
         " --hidden 8 --epochs 2 --lr 0.02 --log-every 10 --quiet " + extra;
}

// The validation accuracy a train run reported is what eval computes from its checkpoint (dropout is off in
// eval), and predict writes one row per sequence.
void expect_eval_and_predict_agree(const Scratch& d, const std::string& run_dir) {
  const auto s = read_json(d / (run_dir + "/summary.json"));
  const Result e = run(2, "eval --verbose --checkpoint " + d / (run_dir + "/checkpoint.h5") + " --data " + d / "val.h5");
  ASSERT_EQ(e.rc, 0) << e.output;
  char acc[32];
  std::snprintf(acc, sizeof acc, "accuracy %.4f", s["val_accuracy"].get<double>());
  EXPECT_TRUE(contains(e.output, acc)) << e.output << " expected " << acc;
  const Result p = run(1, "predict --checkpoint " + d / (run_dir + "/checkpoint.h5") + " --data " + d / "val.h5" +
                              " --out " + d / (run_dir + ".csv"));
  ASSERT_EQ(p.rc, 0) << p.output;
  std::ifstream csv(d / (run_dir + ".csv"));
  std::string line;
  int rows = -1;   // the header
  while (std::getline(csv, line)) ++rows;
  EXPECT_EQ(rows, 40);
}

double loss(const Scratch& d, const std::string& run_dir, const char* key = "train_loss") {
  return read_json(d / (run_dir + "/summary.json"))[key].get<double>();
}

}  // namespace

TEST(ModelOptions, BidirectionalTrainsEvaluatesAndResumes) {
  Scratch d;
  data(d);
  const Result a = run(2, train(d, "a", "--bidirectional --layers 2 --pool last --checkpoint-every 30 --keep 5"));
  ASSERT_EQ(a.rc, 0) << a.output;
  const auto log = read_jsonl(d / "a/metrics.jsonl");
  EXPECT_LT(loss(d, "a"), log.front()["loss"].get<double>()) << "the loss did not fall";
  expect_eval_and_predict_agree(d, "a");
  const Result v = run(1, "eval --verbose --checkpoint " + d / "a/checkpoint.h5" + " --data " + d / "val.h5");
  EXPECT_TRUE(contains(v.output, "layers 2, bidirectional) + last pool + Linear(16 -> 3)")) << v.output;

  // Resumed at step 30 (mid-epoch: 120 / 2 = 60 steps per epoch), the run ends exactly where the first one did.
  const Result b = run(2, train(d, "b", "--bidirectional --layers 2 --pool last --resume " + d / "a/checkpoint-step000000030.h5"));
  ASSERT_EQ(b.rc, 0) << b.output;
  EXPECT_EQ(loss(d, "b"), loss(d, "a"));
  EXPECT_EQ(loss(d, "b", "val_loss"), loss(d, "a", "val_loss"));
  // The checkpoint says what the model is: resuming it as a unidirectional run is refused.
  const Result c = run(2, train(d, "c", "--layers 2 --resume " + d / "a/checkpoint-step000000030.h5"));
  EXPECT_EQ(c.rc, 2) << c.output;
  EXPECT_TRUE(contains(c.output, "bidirectional")) << c.output;
}

TEST(ModelOptions, PoolMeanAndMaxTrainAndAreRankCountIndependent) {
  Scratch d;
  data(d);
  for (const std::string pool : {"mean", "max"}) {
    const Result two = run(2, train(d, pool + "2", "--pool " + pool));
    const Result one = run(1, train(d, pool + "1", "--pool " + pool + " --batch-per-rank 2"));
    ASSERT_EQ(two.rc, 0) << two.output;
    ASSERT_EQ(one.rc, 0) << one.output;
    EXPECT_NEAR(loss(d, pool + "2"), loss(d, pool + "1"), 1e-5 * loss(d, pool + "1")) << pool;
    const auto log = read_jsonl(d / (pool + "2/metrics.jsonl"));
    EXPECT_LT(loss(d, pool + "2"), log.front()["loss"].get<double>()) << pool << ": the loss did not fall";
    expect_eval_and_predict_agree(d, pool + "2");
  }
  // Pooling changes what the head reads: another model, another run.
  ASSERT_EQ(run(2, train(d, "last", "--pool last")).rc, 0);
  EXPECT_NE(loss(d, "last"), loss(d, "mean2"));
  EXPECT_NE(loss(d, "mean2"), loss(d, "max2"));
}

// The masks are keyed by (seed, global step, global sequence): the same run on 2 ranks and on 1 rank with 2 per
// step, and a resumed run, draw the same masks; another seed draws others; eval and predict use no dropout.
void expect_dropout_is_reproducible(const std::string& option) {
  Scratch d;
  data(d);
  const std::string args = "--layers 2 " + option + " --checkpoint-every 30 --keep 5";
  const Result two = run(2, train(d, "two", args));
  const Result one = run(1, train(d, "one", args + " --batch-per-rank 2"));
  ASSERT_EQ(two.rc, 0) << two.output;
  ASSERT_EQ(one.rc, 0) << one.output;
  EXPECT_NEAR(loss(d, "two"), loss(d, "one"), 1e-5 * loss(d, "one"));
  EXPECT_NEAR(loss(d, "two", "val_loss"), loss(d, "one", "val_loss"), 1e-5 * loss(d, "one", "val_loss"));
  expect_eval_and_predict_agree(d, "two");

  ASSERT_EQ(run(2, train(d, "none", "--layers 2")).rc, 0);
  EXPECT_NE(loss(d, "two"), loss(d, "none")) << option << " changed nothing";
  ASSERT_EQ(run(2, train(d, "seed", args + " --seed 2")).rc, 0);
  EXPECT_NE(loss(d, "two"), loss(d, "seed"));

  const Result r = run(2, train(d, "resumed", "--layers 2 " + option + " --resume " + d / "two/checkpoint-step000000030.h5"));
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(loss(d, "resumed"), loss(d, "two"));
  const Result other = run(2, train(d, "other", "--layers 2 --resume " + d / "two/checkpoint-step000000030.h5"));
  EXPECT_EQ(other.rc, 2) << other.output;
  EXPECT_TRUE(contains(other.output, "dropout")) << other.output;
}

TEST(ModelOptions, DropoutBetweenLayersIsReproducibleAndOffInEval) { expect_dropout_is_reproducible("--dropout 0.3"); }

TEST(ModelOptions, HeadDropoutIsReproducibleAndOffInEval) { expect_dropout_is_reproducible("--head-dropout 0.3"); }
