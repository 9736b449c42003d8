// `ragtrain tune` through the real binary on 2 ranks: the files it writes, best.ini reproducing its trial's
// validation figure when trained again, the same trials.csv on 1 rank as on 2 (times aside), a resume after every
// rank was killed, a diverging trial recorded without stopping the search, the default space's trial 0 (train's
// defaults, kept to the last rung), and bad input ending every rank with 2.
#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "e2e_util.hpp"

using namespace e2e;
namespace fs = std::filesystem;

namespace {

// Small trials: a search of a few seconds on the CPU.
const char* kSpace =
    "hidden = 4 | 8\n"
    "lr = 0.005 .. 0.05 log\n"
    "normalize = none | feature | series\n"
    "pool = last | mean\n"
    "epochs = 6 | 9\n";

std::string write_file(const Scratch& d, const std::string& name, const std::string& text) {
  std::ofstream(d / name) << text;
  return d / name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::vector<std::vector<std::string>> csv_rows(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::stringstream s(line);
    for (std::string x; std::getline(s, x, ',');) f.push_back(x);
    rows.push_back(f);
  }
  return rows;
}

// trials.csv without its seconds column: what must be the same run after run.
std::string without_times(const std::string& path) {
  std::string out;
  for (auto row : csv_rows(path)) {
    if (row.size() > 6) row.erase(row.begin() + 6);
    for (const std::string& f : row) out += f + ",";
    out += "\n";
  }
  return out;
}

std::string gen(const Scratch& d, const std::string& name, const std::string& extra) {
  const std::string path = d / name;
  const Result r = run(0, "gen --out " + path + " --quiet --features 3 --min-length 8 --max-length 24 " + extra);
  EXPECT_EQ(r.rc, 0) << r.output;
  return path;
}

}  // namespace

TEST(TuneE2E, TwoRanksWriteTheRecordsAndBestIniReproducesItsTrial) {
  const Scratch d;
  const std::string data = gen(d, "train.h5", "--sequences 90 --classes 3 --seed 4");
  const std::string space = write_file(d, "space.ini", kSpace);
  const std::string out = d / "tune";
  const Result r = run(2, "tune --data " + data + " --out " + out + " --space " + space + " --trials 6 --seed 9 --folds 1");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(r.rank_rcs, (std::vector<int>{0, 0}));
  EXPECT_TRUE(contains(r.output, "best so far")) << r.output;
  for (const char* f : {"trials.csv", "best.ini", "summary.json", "tune.ini", "split/train.h5", "split/val.h5",
                        "final/checkpoint.h5"})
    EXPECT_TRUE(fs::exists(out + "/" + f)) << f;

  const auto rows = csv_rows(out + "/trials.csv");
  ASSERT_EQ(rows.size(), 7u);   // header + one row per trial
  EXPECT_EQ(rows[0][0], "trial");
  const nlohmann::json s = read_json(out + "/summary.json");
  EXPECT_EQ(s["ranks"], 2);
  EXPECT_EQ(s["groups"], 2);
  EXPECT_EQ(s["rungs"].size(), 2u);   // 6 trials, eta 3: rungs of 6 and 2
  EXPECT_EQ(s["rungs"][0]["runs"], 6);
  EXPECT_EQ(s["rungs"][1]["runs"], 2);
  const int64_t best = s["best"]["trial"];
  std::vector<std::string> best_row;
  for (const auto& row : rows)
    if (row[0] == std::to_string(best)) best_row = row;
  ASSERT_FALSE(best_row.empty());
  EXPECT_EQ(best_row[1], "1");   // the last rung's
  EXPECT_EQ(best_row[7], "done");

  // train --config best.ini as is, on the data the trial trained and was ranked on, gives its figure again.
  const Result again = run(0, "train --config " + out + "/best.ini --data " + out + "/split/train.h5 --val " + out +
                                  "/split/val.h5 --out " + (d / "again") + " --quiet");
  ASSERT_EQ(again.rc, 0) << again.output;
  double last_val_loss = -1;
  for (const auto& rec : read_jsonl(d / "again/metrics.jsonl"))
    if (rec["event"] == "epoch") last_val_loss = rec["val_loss"];
  EXPECT_NEAR(last_val_loss, std::stod(best_row[4]), 1e-7 * std::fabs(last_val_loss)) << read_file(out + "/best.ini");

  // The final model is a checkpoint eval takes.
  const Result ev = run(0, "eval --checkpoint " + out + "/final/checkpoint.h5 --data " + data + " --quiet");
  EXPECT_EQ(ev.rc, 0) << ev.output;

  // The same search on one rank (one group instead of two): the same trials, figures and decisions.
  const Result one = run(0, "tune --data " + data + " --out " + (d / "one") + " --space " + space +
                                " --trials 6 --seed 9 --folds 1 --quiet");
  ASSERT_EQ(one.rc, 0) << one.output;
  EXPECT_EQ(without_times(d / "one/trials.csv"), without_times(out + "/trials.csv"));
  EXPECT_EQ(read_file(d / "one/best.ini"), read_file(out + "/best.ini"));

  // Run again on the finished folder: nothing is trained again, and the records stay.
  const Result done = run(2, "tune --data " + data + " --out " + out + " --space " + space + " --trials 6 --seed 9 --folds 1");
  EXPECT_EQ(done.rc, 0) << done.output;
  EXPECT_TRUE(contains(done.output, "0 to train (6 finished before)")) << done.output;
}

TEST(TuneE2E, ResumesWithTheRunsItFinishedAfterEveryRankWasKilled) {
  const Scratch d;
  const std::string data = gen(d, "train.h5", "--sequences 150 --classes 3 --seed 5");
  const std::string space = write_file(d, "space.ini", "hidden = 8 | 16\nlr = 0.005 .. 0.05 log\nepochs = 40 | 60\n");
  const std::string out = d / "tune";
  const std::string args = "tune --data " + data + " --out " + out + " --space " + space + " --trials 9 --seed 2 --folds 1 --quiet";
  // In the background, each rank recording its pid; killed hard (a node lost, a job preempted without warning)
  // once three runs of the first rung have their result files.
  fs::create_directories(d / "bg");
  const std::string cmd = "(timeout 300 mpirun --oversubscribe -np 2 sh -c '" + bin() + " " + args + " & p=$!; echo $p > " +
                          (d / "bg") + "/pid.$OMPI_COMM_WORLD_RANK; wait $p'; echo $? > " + (d / "bg/rc") + ") > " +
                          (d / "bg/log") + " 2>&1 &";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const auto results = [&] {
    int n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out + "/runs", ec)) n += e.path().extension() == ".csv";
    return n;
  };
  for (int i = 0; i < 6000 * time_scale() && results() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(results(), 3) << read_file(d / "bg/log");
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream in(d / ("bg/pid." + std::to_string(rank)));
    pid_t p = 0;
    ASSERT_TRUE(in >> p);
    ::kill(p, SIGKILL);
  }
  for (int i = 0; i < 600 * time_scale() && !fs::exists(d / "bg/rc"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_FALSE(fs::exists(out + "/summary.json")) << "the kill came after the search ended; nothing was resumed";
  const int finished = results();

  const Result resumed = run(2, args.substr(0, args.size() - 8), 300);   // without --quiet: the rung lines
  ASSERT_EQ(resumed.rc, 0) << resumed.output;
  // The first rung's line: the runs that had their result files are not trained again.
  const auto at = resumed.output.find("tune: rung 1/3: ");
  ASSERT_NE(at, std::string::npos) << resumed.output;
  const std::string first_rung = resumed.output.substr(at, resumed.output.find('\n', at) - at);
  EXPECT_TRUE(contains(first_rung, std::to_string(std::min(finished, 9)) + " finished before")) << first_rung;

  const Result whole = run(2, "tune --data " + data + " --out " + (d / "whole") + " --space " + space +
                                  " --trials 9 --seed 2 --folds 1 --quiet", 300);
  ASSERT_EQ(whole.rc, 0) << whole.output;
  EXPECT_EQ(without_times(out + "/trials.csv"), without_times(d / "whole/trials.csv"));
  EXPECT_EQ(read_file(out + "/best.ini"), read_file(d / "whole/best.ini"));
}

TEST(TuneE2E, ADivergingTrialIsRecordedAndTheSearchGoesOn) {
  const Scratch d;
  const std::string data = gen(d, "reg.h5", "--sequences 60 --task regression --outputs 2 --seed 3");
  // lr 1e30 without clipping overflows the regression loss in its first steps.
  const std::string space = write_file(d, "space.ini", "hidden = 4\nlr = 0.01 | 1e30\nclip = 0\nepochs = 3\n");
  const Result r = run(2, "tune --data " + data + " --out " + (d / "tune") + " --space " + space +
                              " --trials 8 --seed 1 --folds 1 --quiet");
  ASSERT_EQ(r.rc, 0) << r.output;
  int diverged = 0, done = 0;
  for (const auto& row : csv_rows(d / "tune/trials.csv")) {
    if (row[0] == "trial") continue;
    diverged += row[7] == "diverged";
    done += row[7] == "done";
    if (row[7] == "diverged") {
      EXPECT_EQ(row[10], "1e30");
    }
  }
  EXPECT_GT(diverged, 0);
  EXPECT_GT(done, 0);
  EXPECT_TRUE(fs::exists(d / "tune/final/checkpoint.h5"));
  EXPECT_TRUE(contains(read_file(d / "tune/best.ini"), "lr = 0.01"));
}

TEST(TuneE2E, SmallSetsAreCrossValidatedAndTheFigureIsTheMeanOverFolds) {
  const Scratch d;
  const std::string data = gen(d, "train.h5", "--sequences 45 --classes 3 --seed 6");
  const std::string space = write_file(d, "space.ini", "hidden = 4 | 8\nepochs = 3\n");
  const std::string out = d / "tune";
  // 45 sequences, --folds left at 0: five folds.
  const Result r = run(2, "tune --data " + data + " --out " + out + " --space " + space + " --trials 2 --quiet");
  ASSERT_EQ(r.rc, 0) << r.output;
  for (int f = 0; f < 5; ++f)
    for (const char* file : {"train.h5", "val.h5"})
      EXPECT_TRUE(fs::exists(out + "/split/fold" + std::to_string(f) + "/" + file)) << f << file;
  EXPECT_TRUE(contains(read_json(out + "/summary.json")["selection"].get<std::string>(), "5-fold"));
  // A row's figure is the mean of its five trainings' last validation.
  const auto rows = csv_rows(out + "/trials.csv");
  ASSERT_EQ(rows.size(), 3u);
  const std::string run_dir = out + "/runs/t000" + rows[1][0] + "-r" + rows[1][1];
  double loss = 0;
  for (int f = 0; f < 5; ++f) {
    double last = -1;
    for (const auto& rec : read_jsonl(run_dir + "-f" + std::to_string(f) + "/metrics.jsonl"))
      if (rec["event"] == "epoch") last = rec["val_loss"];
    ASSERT_GE(last, 0) << f;
    loss += last / 5;
  }
  EXPECT_NEAR(std::stod(rows[1][4]), loss, 1e-6 * loss);
  // --folds with --val: refused, nothing written.
  const std::string val = gen(d, "val.h5", "--sequences 20 --classes 3 --seed 7");
  const Result both = run(2, "tune --data " + data + " --val " + val + " --out " + (d / "both") + " --folds 3 --space " +
                                 space);
  EXPECT_EQ(both.rc, 2) << both.output;
  EXPECT_TRUE(contains(both.output, "--folds 3")) << both.output;
  EXPECT_FALSE(fs::exists(d / "both"));
}

TEST(TuneE2E, TheDefaultSpacesTrialZeroIsTrainsDefaultsAndReachesTheLastRung) {
  const Scratch d;
  const std::string data = gen(d, "train.h5", "--sequences 30 --classes 2 --seed 8");
  const std::string out = d / "tune";
  // The default space (no --space), one hold-out to keep it short: rungs of 3 and 1, trial 0 in both.
  const Result r = run(2, "tune --data " + data + " --out " + out + " --trials 3 --folds 1 --quiet");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(read_json(out + "/summary.json")["defaults_trial"].get<int64_t>(), 0);
  // train's defaults, as train itself prints them.
  const Result defaults = run(1, "train --print-config --data " + data + " --out " + (d / "probe"));
  ASSERT_EQ(defaults.rc, 0) << defaults.output;
  std::map<std::string, std::string> value;
  std::stringstream in(defaults.output);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find(" = ");
    if (eq != std::string::npos) value[line.substr(0, eq)] = line.substr(eq + 3);
  }
  const auto rows = csv_rows(out + "/trials.csv");
  ASSERT_EQ(rows.size(), 4u);
  ASSERT_EQ(rows[1][0], "0");
  EXPECT_EQ(rows[1][1], "1");   // promoted to the last rung whatever its figure
  for (size_t c = 9; c < rows[0].size(); ++c) EXPECT_EQ(rows[1][c], value[rows[0][c]]) << rows[0][c];
}

// A budget spent before the search starts (9 trials: rungs of 9, 3 and 1, the first at 100 of 900 epochs): the
// first run still starts (a search ends in a recipe, not in "no trial finished"), and best.ini is its trial's
// recipe with its own 900 epochs, not the 100 it was ranked after; the final model trains them.
TEST(TuneE2E, ABudgetCutSearchKeepsTheRecipesOwnEpochs) {
  Scratch d;
  const std::string data = gen(d, "train.h5", "--sequences 60 --classes 2 --seed 5");
  const std::string space = write_file(d, "space.ini", "hidden = 4 | 8\nlr = 0.005 .. 0.05 log\nepochs = 900\n");
  const std::string out = d / "tune";
  const Result r = run(2, "tune --data " + data + " --out " + out + " --space " + space +
                              " --trials 9 --seed 4 --folds 1 --budget-minutes 0.000001");
  ASSERT_EQ(r.rc, 0) << r.output;
  const std::string best = read_file(out + "/best.ini");
  EXPECT_TRUE(contains(best, "\nepochs = 900\n")) << best;
  EXPECT_TRUE(contains(best, "ranked after 100 epochs, the recipe trains its own 900")) << best;
  const auto summary = read_json(out + "/summary.json");   // says what best.ini says, and what was ranked
  EXPECT_EQ(summary["best"]["options"]["epochs"].get<int64_t>(), 900);
  EXPECT_EQ(summary["best"]["ranked_after_epochs"].get<int64_t>(), 100);
  const Result again = run(0, "train --config " + out + "/best.ini --data " + data + " --out " + (d / "again") + " --quiet");
  ASSERT_EQ(again.rc, 0) << again.output;
  EXPECT_EQ(read_json(d / "again/summary.json")["epochs"].get<int64_t>(), 900);
}

TEST(TuneE2E, BadInputEndsEveryRankWithExitCode2) {
  const Scratch d;
  const std::string data = gen(d, "train.h5", "--sequences 40 --classes 2 --seed 1");
  struct Case {
    std::string space, extra, expect;
  };
  const std::vector<Case> cases = {
      {"hiden = 4 | 8\n", "", "hiden"},                     // not an option of train
      {"pool = avg | mean\n", "", "pool = avg"},            // a value train refuses
      {"seed = 1 | 2\n", "", "set by tune itself"},         // tune's own
      {"hidden = 4\n", " --ranks-per-trial 3", "--ranks-per-trial 3"},
  };
  int k = 0;
  for (const Case& c : cases) {
    const std::string space = write_file(d, "space" + std::to_string(k) + ".ini", c.space);
    const Result r = run(2, "tune --data " + data + " --out " + (d / ("t" + std::to_string(k++))) + " --space " +
                                space + " --trials 2" + c.extra);
    EXPECT_EQ(r.rc, 2) << c.space << r.output;
    EXPECT_EQ(r.rank_rcs, (std::vector<int>{2, 2})) << c.space;
    EXPECT_TRUE(contains(r.output, c.expect)) << c.space << r.output;
    EXPECT_TRUE(contains(r.output, "hint:")) << r.output;
    EXPECT_FALSE(fs::exists(d / ("t" + std::to_string(k - 1)))) << c.space << ": bad input left a folder behind";
  }
  // A data set that is not there: exit 2 on every rank, nothing written.
  const Result missing = run(2, "tune --data " + (d / "nope.h5") + " --out " + (d / "m") + " --trials 2");
  EXPECT_EQ(missing.rc, 2) << missing.output;
  EXPECT_EQ(missing.rank_rcs, (std::vector<int>{2, 2}));
  EXPECT_FALSE(fs::exists(d / "m"));
  // Another search in the same folder is refused: the folder holds the first one's records.
  const std::string space = write_file(d, "ok.ini", "hidden = 4\nepochs = 1\n");
  ASSERT_EQ(run(2, "tune --data " + data + " --out " + (d / "s") + " --space " + space + " --trials 2 --quiet").rc, 0);
  const Result other = run(2, "tune --data " + data + " --out " + (d / "s") + " --space " + space + " --trials 3");
  EXPECT_EQ(other.rc, 2) << other.output;
  EXPECT_TRUE(contains(other.output, "holds another search")) << other.output;
}
