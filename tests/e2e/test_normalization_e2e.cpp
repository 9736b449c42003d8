// --normalize end to end: without --val (an internal error, exit 3, before), and `series`, which train applies to
// training and validation data and eval and predict apply from the checkpoint, on any rank count.
#include <string>

#include "e2e_util.hpp"

using namespace e2e;

namespace {

void gen(const Scratch& d, const std::string& name, const std::string& extra) {
  const Result r = run(0, "gen --out " + d / name + " --features 4 --min-length 5 --max-length 30 --classes 3 " + extra);
  ASSERT_EQ(r.rc, 0) << r.output;
}

const char* kTrain = " --hidden 8 --lr 0.01 --log-every 20 --quiet";

}  // namespace

TEST(Normalize, FeatureWithoutValidationTrains) {
  Scratch d;
  gen(d, "train.h5", "--sequences 60 --seed 1");
  const Result r = run(2, "train --data " + d / "train.h5" + " --out " + d / "run" + " --normalize --epochs 2" + kTrain);
  ASSERT_EQ(r.rc, 0) << r.output;
  for (int rc : r.rank_rcs) EXPECT_EQ(rc, 0) << r.output;
  const Result e = run(1, "eval --verbose --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "train.h5");
  ASSERT_EQ(e.rc, 0) << e.output;
  EXPECT_TRUE(contains(e.output, "normalisation feature")) << e.output;
}

TEST(Normalize, SeriesIsAppliedAlikeInTrainEvalAndPredict) {
  Scratch d;
  gen(d, "train.h5", "--sequences 90 --seed 3");
  gen(d, "val.h5", "--sequences 31 --seed 4");
  const Result r = run(2, "train --data " + d / "train.h5" + " --val " + d / "val.h5" + " --out " + d / "run" +
                              " --normalize series --epochs 2" + kTrain);
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto s = read_json(d / "run/summary.json");
  EXPECT_TRUE(contains(s["config"].get<std::string>(), "normalize = series"));
  // eval on other rank counts reproduces the run's validation loss: the same transform of the same data.
  for (int np : {1, 3}) {
    const Result e = run(np, "eval --verbose --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "val.h5");
    ASSERT_EQ(e.rc, 0) << e.output;
    EXPECT_TRUE(contains(e.output, "normalisation series")) << e.output;
    const size_t at = e.output.find("\nloss ");
    ASSERT_NE(at, std::string::npos) << e.output;
    EXPECT_NEAR(std::stod(e.output.substr(at + 6)), s["val_loss"].get<double>(), 1e-5) << e.output;
  }
  const Result p = run(2, "predict --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "val.h5" + " --out " +
                              d / "pred.csv");
  ASSERT_EQ(p.rc, 0) << p.output;
  // Resuming needs the same mode: another one would change the data the model sees.
  const Result bad = run(1, "train --data " + d / "train.h5" + " --val " + d / "val.h5" + " --out " + d / "run" +
                                " --resume " + d / "run" + " --epochs 3 --normalize feature" + kTrain);
  EXPECT_EQ(bad.rc, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "--normalize series")) << bad.output;
}

TEST(Normalize, UnknownModeIsAUserError) {
  Scratch d;
  gen(d, "train.h5", "--sequences 20 --seed 1");
  const Result r = run(0, "train --data " + d / "train.h5" + " --out " + d / "run" + " --normalize true");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "normalize = feature")) << r.output;
}
