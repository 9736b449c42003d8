// Choosing the model a user keeps: validation every epoch and every --val-every steps, DIR/best.h5 by --select
// (surviving rotation and resume), --early-stop, the best in summary.json, and eval/predict on the run folder.
#include <cmath>

#include "e2e_util.hpp"

using namespace e2e;

namespace {

void gen(const Scratch& d, const std::string& name, const std::string& extra) {
  const Result r = run(0, "gen --out " + d / name + " --features 4 --min-length 5 --max-length 20 --classes 3 " + extra);
  ASSERT_EQ(r.rc, 0) << r.output;
}

// Every validation the run recorded (epoch records with val numbers, and "validation" records), in order.
std::vector<nlohmann::json> validations(const std::string& run_dir) {
  std::vector<nlohmann::json> v;
  for (const auto& rec : read_jsonl(run_dir + "/metrics.jsonl"))
    if ((rec["event"] == "epoch" && rec.contains("val_loss")) || rec["event"] == "validation") v.push_back(rec);
  return v;
}

// The validation --select val_accuracy keeps: the highest accuracy, ties to the lower loss, the earliest first.
nlohmann::json best_by_accuracy(const std::vector<nlohmann::json>& vals) {
  nlohmann::json best;
  for (const auto& v : vals) {
    const double acc = v["val_accuracy"], loss = v["val_loss"];
    if (best.is_null() || acc > best["val_accuracy"].get<double>() ||
        (acc == best["val_accuracy"].get<double>() && loss < best["val_loss"].get<double>()))
      best = v;
  }
  return best;
}

const std::string kTrain = " --hidden 8 --lr 0.02 --clip 1 --log-every 1000 --quiet";

// The two files every test here trains and validates on: d/train.h5 and d/val.h5 (gen's options for each).
void gen_train_and_val(const Scratch& d, const std::string& train, const std::string& val) {
  gen(d, "train.h5", train);
  gen(d, "val.h5", val);
}

// `train` on d/train.h5, validated on d/val.h5, into `out`.
Result train_with_val(const Scratch& d, int np, const std::string& out, const std::string& extra) {
  return run(np, "train --data " + d / "train.h5" + " --val " + d / "val.h5" + " --out " + out + extra);
}

// `eval` of a checkpoint or a run folder on d/val.h5; it must succeed.
std::string eval_on_val(const Scratch& d, int np, const std::string& model) {
  const Result e = run(np, "eval --checkpoint " + model + " --data " + d / "val.h5");
  EXPECT_EQ(e.rc, 0) << e.output;
  return e.output;
}

}  // namespace

TEST(Select, BestByAccuracySurvivesRotationAndEvalPredictUseIt) {
  Scratch d;
  gen_train_and_val(d, "--sequences 96 --seed 1", "--sequences 30 --seed 2");
  for (int np : {1, 2}) {
    const std::string out = d / ("run" + std::to_string(np));
    const Result r = train_with_val(d, np, out, kTrain + " --epochs 5 --val-every 10 --checkpoint-every 7 --keep 1");
    ASSERT_EQ(r.rc, 0) << r.output;
    const auto vals = validations(out);
    // After each of the 5 epochs (96/np steps each), and every 10 steps besides.
    int64_t expected = 0;
    for (int64_t step = 1; step <= 5 * 96 / np; ++step) expected += step % (96 / np) == 0 || step % 10 == 0;
    EXPECT_EQ(static_cast<int64_t>(vals.size()), expected) << np;
    const auto want = best_by_accuracy(vals);
    const auto s = read_json(out + "/summary.json");
    EXPECT_EQ(s["select"], "val_accuracy");
    EXPECT_EQ(s["stop_reason"], "epochs");
    EXPECT_EQ(s["best_step"], want["step"]);
    EXPECT_EQ(s["best_epoch"], want["epoch"]);
    EXPECT_DOUBLE_EQ(s["best_val_accuracy"].get<double>(), want["val_accuracy"].get<double>());
    EXPECT_DOUBLE_EQ(s["best_val_loss"].get<double>(), want["val_loss"].get<double>());
    // The final lines name both models: the last one's figure, and the best one's, which eval and predict use.
    char last[160], best[200];
    std::snprintf(last, sizeof last, "validation accuracy: %.4f (", s["val_accuracy"].get<double>());
    std::snprintf(best, sizeof best, "validation accuracy: %.4f, best model (epoch %d, %s/best.h5: what eval and predict",
                  s["best_val_accuracy"].get<double>(), s["best_epoch"].get<int>(), out.c_str());
    EXPECT_TRUE(contains(r.output, std::string(last)) && contains(r.output, "last model (" + out + "/checkpoint.h5)"))
        << r.output;
    EXPECT_TRUE(contains(r.output, best)) << r.output << " expected " << best;
    // Rotation kept one step file; best.h5 is not a step file and stays.
    ASSERT_TRUE(std::filesystem::exists(out + "/best.h5"));
    int step_files = 0;
    for (const auto& e : std::filesystem::directory_iterator(out))
      step_files += e.path().filename().string().rfind("checkpoint-step", 0) == 0;
    EXPECT_EQ(step_files, 1);

    // eval and predict on the run folder take best.h5, say so, and reproduce the best validation.
    const std::string e = eval_on_val(d, np, out);
    EXPECT_TRUE(contains(e, "# model: " + out + "/best.h5, the run's best validation")) << e;
    char acc[32];
    std::snprintf(acc, sizeof acc, "accuracy %.4f", s["best_val_accuracy"].get<double>());
    EXPECT_TRUE(contains(e, acc)) << e << " expected " << acc;
    const Result p = run(np, "predict --checkpoint " + out + " --data " + d / "val.h5" + " --out " + out + "/pred.csv");
    ASSERT_EQ(p.rc, 0) << p.output;
    EXPECT_TRUE(contains(p.output, out + "/best.h5")) << p.output;
  }
}

TEST(Select, ValLossForRegressionAndTheLastModelWithoutVal) {
  Scratch d;
  gen_train_and_val(d, "--sequences 64 --seed 3 --task regression --outputs 2",
                    "--sequences 20 --seed 4 --task regression --outputs 2");
  const std::string out = d / "run";
  const Result r = train_with_val(d, 2, out, kTrain + " --epochs 4 --val-every 5");
  ASSERT_EQ(r.rc, 0) << r.output;
  double lowest = INFINITY;
  int64_t at = -1;
  for (const auto& v : validations(out))
    if (v["val_loss"].get<double>() < lowest) {
      lowest = v["val_loss"];
      at = v["step"];
    }
  const auto s = read_json(out + "/summary.json");
  EXPECT_EQ(s["select"], "val_loss") << "the default for regression";
  EXPECT_EQ(s["best_step"], at);
  EXPECT_DOUBLE_EQ(s["best_val_loss"].get<double>(), lowest);
  EXPECT_TRUE(s["best_val_accuracy"].is_null());

  // A run without --val keeps no best.h5; eval on its folder takes checkpoint.h5 and says why.
  const std::string plain = d / "plain";
  ASSERT_EQ(run(1, "train --data " + d / "train.h5" + " --out " + plain + kTrain + " --epochs 1").rc, 0);
  EXPECT_FALSE(std::filesystem::exists(plain + "/best.h5"));
  EXPECT_TRUE(read_json(plain + "/summary.json")["best_step"].is_null());
  const std::string e = eval_on_val(d, 1, plain);
  EXPECT_TRUE(contains(e, plain + "/checkpoint.h5, the run's last (the folder has no best.h5")) << e;
}

TEST(Select, EarlyStopEndsTheRunWithExitZeroAndSaysWhy) {
  Scratch d;
  gen_train_and_val(d, "--sequences 48 --seed 5", "--sequences 15 --seed 6");
  for (int np : {1, 2}) {
    const std::string out = d / ("run" + std::to_string(np));
    const Result r = train_with_val(
        d, np, out, " --hidden 8 --lr 0.05 --log-every 1000 --epochs 60 --early-stop 2 --select val_loss");
    ASSERT_EQ(r.rc, 0) << r.output;
    const auto s = read_json(out + "/summary.json");
    ASSERT_EQ(s["stop_reason"], "early_stop") << "60 epochs of lr 0.05 on 48 sequences must overfit";
    EXPECT_LT(s["steps"].get<int64_t>(), 60 * 48 / np);
    // The epochs it reached, and the planned ones beside them.
    EXPECT_EQ(s["epochs"], (s["steps"].get<int64_t>() + 48 / np - 1) / (48 / np));
    EXPECT_EQ(s["epochs_planned"], 60);
    EXPECT_EQ(s["early_stop"]["patience"], 2);
    EXPECT_TRUE(contains(r.output, "# early stop at step")) << r.output;
    // The last two validations were no better than the best; the one before them was the best.
    const auto vals = validations(out);
    ASSERT_GE(vals.size(), 3u);
    const double best = s["best_val_loss"];
    EXPECT_DOUBLE_EQ(vals[vals.size() - 3]["val_loss"].get<double>(), best);
    EXPECT_GE(vals[vals.size() - 2]["val_loss"].get<double>(), best);
    EXPECT_GE(vals.back()["val_loss"].get<double>(), best);
    EXPECT_EQ(vals.back()["step"], s["steps"]) << "the run stops at the validation that ran out of patience";
    const auto log = read_jsonl(out + "/metrics.jsonl");
    EXPECT_EQ(log.back()["event"], "checkpoint");
    EXPECT_EQ(log.back()["reason"], "early_stop");
  }
}

// A resumed run knows the best of the run it continues (stored in the checkpoint): 16 epochs, then --resume to
// 20, gives the best of an uninterrupted 20-epoch run, and its best.h5 holds the same model. With this seed and
// --lr the best validation loss falls in the first part (checked), so a resumed run that forgot it would differ.
TEST(Select, ResumedRunKnowsTheBestSoFar) {
  Scratch d;
  gen_train_and_val(d, "--sequences 40 --seed 7", "--sequences 20 --seed 8");
  // A constant rate: with the default cosine decay, --epochs 16 then 20 would follow another schedule than 20.
  const std::string args = " --hidden 8 --lr 0.1 --lr-decay none --clip 1 --log-every 1000 --quiet --val-every 3"
                           " --select val_loss";
  ASSERT_EQ(train_with_val(d, 2, d / "whole", args + " --epochs 20").rc, 0);
  ASSERT_EQ(train_with_val(d, 2, d / "parts", args + " --epochs 16").rc, 0);
  // Resumed into another folder (--out is free to change): the best model comes along with the records.
  const Result m = train_with_val(d, 2, d / "moved", args + " --epochs 20 --resume " + d / "parts");
  ASSERT_EQ(m.rc, 0) << m.output;
  // From a checkpoint copied alone: the best model is at hand nowhere, so nothing names a file for it, and the
  // best so far still decides (no later validation beats it here).
  std::filesystem::create_directories(d / "alone");
  std::filesystem::copy_file(d / "parts/checkpoint.h5", d / "alone/checkpoint.h5");
  const Result l = train_with_val(d, 2, d / "lost", args + " --epochs 20 --resume " + d / "alone/checkpoint.h5");
  ASSERT_EQ(l.rc, 0) << l.output;
  const Result r = train_with_val(d, 2, d / "parts", args + " --epochs 20 --resume " + d / "parts");
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto a = read_json(d / "whole/summary.json");
  const auto lost = read_json(d / "lost/summary.json");
  EXPECT_EQ(lost["best_step"], a["best_step"]);
  EXPECT_TRUE(lost["best_checkpoint"].is_null()) << lost["best_checkpoint"];
  EXPECT_FALSE(std::filesystem::exists(d / "lost/best.h5"));
  ASSERT_LE(a["best_step"].get<int64_t>(), 16 * 20) << "the best must lie before the resume point for this test";
  const std::string ea = eval_on_val(d, 1, d / "whole");
  ASSERT_TRUE(contains(ea, "\nloss ")) << ea;
  const auto tail = [](const std::string& out) { return out.substr(out.find("\nloss ")); };
  for (const std::string run_dir : {"parts", "moved"}) {
    const auto b = read_json(d / (run_dir + "/summary.json"));
    for (const char* k : {"best_epoch", "best_step", "best_val_loss", "best_val_accuracy"})
      EXPECT_EQ(a[k], b[k]) << run_dir << " " << k;
    EXPECT_EQ(b["best_checkpoint"], d / (run_dir + "/best.h5")) << run_dir;
    ASSERT_TRUE(std::filesystem::exists(d / (run_dir + "/best.h5"))) << run_dir;
    const std::string eb = eval_on_val(d, 1, d / run_dir);
    EXPECT_TRUE(contains(eb, "best.h5")) << eb;
    ASSERT_TRUE(contains(eb, "\nloss ")) << eb;
    EXPECT_EQ(tail(ea), tail(eb)) << run_dir;
  }
}

TEST(Select, OptionsNeedAValidationSet) {
  Scratch d;
  gen(d, "train.h5", "--sequences 20 --seed 9");
  gen(d, "reg.h5", "--sequences 20 --seed 9 --task regression");
  gen(d, "regval.h5", "--sequences 10 --seed 10 --task regression");
  const std::string base = "train --data " + d / "train.h5" + " --out " + d / "run ";
  for (const char* opt : {"--select val_loss", "--early-stop 3", "--val-every 5"}) {
    const Result r = run(2, base + std::string(opt));
    EXPECT_EQ(r.rc, 2) << opt << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "needs a validation set")) << r.output;
  }
  const Result r = run(2, "train --data " + d / "reg.h5" + " --val " + d / "regval.h5" + " --out " + d / "run" +
                              " --select val_accuracy");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "is a regression set (no accuracy)")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(d / "run"));
}
