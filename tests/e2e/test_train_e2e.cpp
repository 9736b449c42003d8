// The ragtrain binary end to end on CPUs: gen -> inspect -> train (several ranks) -> eval -> predict; the loss
// falls, runs repeat exactly, the data-parallel identity holds through the whole program.
#include <cmath>

#include "e2e_util.hpp"

using namespace e2e;

namespace {

void gen(const Scratch& d, const std::string& name, const std::string& extra) {
  const Result r = run(0, "gen --out " + d / name + " --features 6 --min-length 5 --max-length 40 --classes 3 " + extra);
  ASSERT_EQ(r.rc, 0) << r.output;
}

const char* kTrainArgs = " --hidden 16 --epochs 4 --optimizer adam --lr 0.01 --clip 1 --log-every 10 --quiet";

}  // namespace

TEST(EndToEnd, TrainLossFallsAndOutputsAreComplete) {
  Scratch d;
  gen(d, "train.h5", "--sequences 240 --seed 1");
  gen(d, "val.h5", "--sequences 60 --seed 2");
  const Result r = run(2, "train --data " + d / "train.h5" + " --val " + d / "val.h5" + " --out " + d / "run" + kTrainArgs +
                              " --batch-per-rank 2");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "validation accuracy")) << r.output;

  const auto s = read_json(d / "run/summary.json");
  for (const char* key : {"world_size", "backend", "epochs", "steps", "train_loss", "val_loss", "val_accuracy",
                          "sequences_per_second", "timesteps_per_second", "wall_seconds", "timings"})
    EXPECT_TRUE(s.contains(key)) << key;
  EXPECT_EQ(s["world_size"], 2);
  EXPECT_EQ(s["backend"], "cpu");
  EXPECT_EQ(s["steps"], 4 * 60);
  for (const char* t : {"compute_s", "comm_s", "io_s"})
    for (const char* m : {"min", "median", "max"}) EXPECT_TRUE(s["timings"][t].contains(m)) << t << " " << m;

  const auto log = read_jsonl(d / "run/metrics.jsonl");
  ASSERT_FALSE(log.empty());
  const double first = log.front()["loss"];
  double last_epoch_loss = -1;
  int epochs = 0;
  for (const auto& rec : log)
    if (rec["event"] == "epoch") {
      ++epochs;
      last_epoch_loss = rec["train_loss"];
      EXPECT_TRUE(rec.contains("val_accuracy"));
    }
  EXPECT_EQ(epochs, 4);
  EXPECT_LT(last_epoch_loss, 0.7 * first) << "loss did not fall: first interval " << first << ", last epoch " << last_epoch_loss;
  EXPECT_GT(s["val_accuracy"].get<double>(), 1.0 / 3 + 0.2) << "no better than chance";

  // The checkpoint is what eval and predict load; eval on 1 and 3 ranks gives the run's validation numbers.
  for (int np : {1, 3}) {
    const Result e = run(np, "eval --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "val.h5");
    ASSERT_EQ(e.rc, 0) << e.output;
    char acc[32];
    std::snprintf(acc, sizeof acc, "accuracy %.4f", s["val_accuracy"].get<double>());
    EXPECT_TRUE(contains(e.output, acc)) << e.output << " expected " << acc;
  }
  const Result p = run(2, "predict --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "val.h5" + " --out " +
                              d / "pred.csv");
  ASSERT_EQ(p.rc, 0) << p.output;
  std::ifstream csv(d / "pred.csv");
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header, "index,predicted,p_0,p_1,p_2");
  int rows = 0;
  while (std::getline(csv, line)) {
    EXPECT_EQ(line.rfind(std::to_string(rows) + ",", 0), 0u) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 60);
}

TEST(EndToEnd, SameCommandTwiceGivesIdenticalLosses) {
  Scratch d;
  gen(d, "train.h5", "--sequences 90 --seed 3");
  gen(d, "val.h5", "--sequences 30 --seed 4");
  const std::string args = "train --data " + d / "train.h5" + " --val " + d / "val.h5" + kTrainArgs + " --out ";
  ASSERT_EQ(run(2, args + d / "a").rc, 0);
  ASSERT_EQ(run(2, args + d / "b").rc, 0);
  const auto a = read_json(d / "a/summary.json"), b = read_json(d / "b/summary.json");
  EXPECT_EQ(a["train_loss"].get<double>(), b["train_loss"].get<double>());
  EXPECT_EQ(a["val_loss"].get<double>(), b["val_loss"].get<double>());
  EXPECT_EQ(a["val_accuracy"].get<double>(), b["val_accuracy"].get<double>());
}

// -np 3 --batch-per-rank 1 and -np 1 --batch-per-rank 3 train on the same global batches: same run up to rounding.
TEST(EndToEnd, ThreeRanksEqualOneRankWithThreePerStep) {
  Scratch d;
  gen(d, "train.h5", "--sequences 100 --seed 5");   // 100 = 33 x 3 + 1: an uneven last step every epoch
  gen(d, "val.h5", "--sequences 40 --seed 6");
  const std::string args = "train --data " + d / "train.h5" + " --val " + d / "val.h5" + kTrainArgs;
  const Result three = run(3, args + " --batch-per-rank 1 --out " + d / "p3");
  const Result one = run(1, args + " --batch-per-rank 3 --out " + d / "p1");
  ASSERT_EQ(three.rc, 0) << three.output;
  ASSERT_EQ(one.rc, 0) << one.output;
  const auto a = read_json(d / "p3/summary.json"), b = read_json(d / "p1/summary.json");
  EXPECT_EQ(a["steps"], b["steps"]);
  for (const char* k : {"train_loss", "val_loss"}) {
    const double x = a[k], y = b[k];
    EXPECT_NEAR(x, y, 1e-5 * std::fabs(y)) << k;
  }
}

TEST(EndToEnd, RegressionTrainsAndPredictsValues) {
  Scratch d;
  ASSERT_EQ(run(0, "gen --task regression --outputs 2 --sequences 120 --features 4 --min-length 3 --max-length 30 --out " +
                       d / "r.h5").rc,
            0);
  ASSERT_EQ(run(0, "gen --task regression --outputs 2 --sequences 40 --features 4 --min-length 3 --max-length 30 --seed 9 "
                   "--out " + d / "rv.h5").rc,
            0);
  const Result r = run(2, "train --data " + d / "r.h5" + " --val " + d / "rv.h5" + " --out " + d / "run" + kTrainArgs);
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto s = read_json(d / "run/summary.json");
  EXPECT_TRUE(s.contains("val_mae"));
  const auto log = read_jsonl(d / "run/metrics.jsonl");
  EXPECT_LT(s["train_loss"].get<double>(), log.front()["loss"].get<double>());
  const Result p = run(1, "predict --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "rv.h5" + " --out " + d / "p.csv");
  ASSERT_EQ(p.rc, 0) << p.output;
  std::ifstream csv(d / "p.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header, "index,y_0,y_1");
}
