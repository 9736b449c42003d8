// Bring your own data through the binary: a CSV folder and an .npz file converted, trained on, evaluated with
// the per-class report and its JSON; bad input stops every rank with exit code 2; --print-config exits 0.
#include <filesystem>

#include "e2e_util.hpp"

using namespace e2e;

TEST(ByodE2e, CsvFolderToTrainEvalJsonAndPredict) {
  Scratch d;
  std::filesystem::create_directories(d / "seqs");
  std::ofstream labels(d / "labels.csv");
  labels << "file,trend\n";
  // 40 sequences of 3-9 timesteps, 2 features; the class is whether feature 0 rises or falls (learnable).
  for (int i = 0; i < 40; ++i) {
    const bool up = i % 2 == 0;
    const std::string name = "s" + std::to_string(i) + ".csv";
    std::ofstream f(d / ("seqs/" + name));
    f << "level,noise\n";
    for (int t = 0; t < 3 + i % 7; ++t) f << (up ? t : -t) * 0.3 << "," << ((i * 7 + t * 3) % 5) * 0.1 << "\n";
    labels << name << "," << (up ? "up" : "down") << "\n";
  }
  labels.close();

  const Result c = run(0, "convert " + d / "seqs" + " --labels " + d / "labels.csv " + d / "train.h5");
  ASSERT_EQ(c.rc, 0) << c.output;
  EXPECT_TRUE(contains(c.output, "40 sequences, F=2, lengths 3..9, 2 classes (down, up)")) << c.output;
  ASSERT_EQ(run(0, "inspect " + d / "train.h5").rc, 0);

  const Result t = run(2, "train --data " + d / "train.h5" + " --out " + d / "run" +
                              " --epochs 3 --hidden 4 --lr 0.05 --quiet");
  ASSERT_EQ(t.rc, 0) << t.output;

  const Result e = run(2, "eval --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "train.h5" + " --out " +
                              d / "metrics.json");
  ASSERT_EQ(e.rc, 0) << e.output;
  EXPECT_TRUE(contains(e.output, "confusion matrix (rows: true class, columns: predicted class)")) << e.output;
  EXPECT_TRUE(contains(e.output, "\ndown ")) << "class names from the checkpoint: " << e.output;
  const nlohmann::json m = read_json(d / "metrics.json");
  EXPECT_EQ(m["classes"], nlohmann::json({"down", "up"}));
  EXPECT_EQ(m["sequences"], 40);
  EXPECT_EQ(m["ranks"], 2);
  int64_t total = 0, diagonal = 0;
  for (int r = 0; r < 2; ++r)
    for (int p = 0; p < 2; ++p) {
      total += m["confusion_matrix"][r][p].get<int64_t>();
      if (r == p) diagonal += m["confusion_matrix"][r][p].get<int64_t>();
    }
  EXPECT_EQ(total, 40);
  EXPECT_EQ(diagonal, m["correct"].get<int64_t>());
  char acc[32];
  std::snprintf(acc, sizeof acc, "accuracy %.4f", m["accuracy"].get<double>());
  EXPECT_TRUE(contains(e.output, acc)) << e.output << " expected " << acc;
  EXPECT_EQ(m["per_class"][0]["support"].get<int64_t>() + m["per_class"][1]["support"].get<int64_t>(), 40);

  const Result p = run(2, "predict --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "train.h5" + " --out " +
                              d / "pred.csv");
  ASSERT_EQ(p.rc, 0) << p.output;
  std::ifstream csv(d / "pred.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header, "name,index,predicted,p_down,p_up");
  std::string row;
  std::getline(csv, row);   // named by its file; the predicted class by the name the p_ columns use
  EXPECT_TRUE(row.rfind("s0.csv,0,down,", 0) == 0 || row.rfind("s0.csv,0,up,", 0) == 0) << row;

  // A set converted on its own with other class names ("fall" for "down"): its class ids would mean other classes,
  // so eval and train --val refuse it on every rank.
  std::filesystem::create_directories(d / "other");
  std::ofstream other_labels(d / "other-labels.csv");
  other_labels << "file,trend\n";
  for (int i = 0; i < 4; ++i) {
    const std::string name = "s" + std::to_string(i) + ".csv";
    std::filesystem::copy_file(d / ("seqs/" + name), d / ("other/" + name));
    other_labels << name << "," << (i % 2 == 0 ? "up" : "fall") << "\n";
  }
  other_labels.close();
  ASSERT_EQ(run(0, "convert " + d / "other" + " --labels " + d / "other-labels.csv " + d / "other.h5").rc, 0);
  for (const std::string& cmd :
       {"eval --checkpoint " + d / "run" + " --data " + d / "other.h5",
        "train --data " + d / "train.h5" + " --val " + d / "other.h5" + " --out " + d / "run2 --epochs 1 --quiet"}) {
    const Result r = run(2, cmd);
    EXPECT_EQ(r.rank_rcs, (std::vector<int>{2, 2})) << cmd << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "names its classes fall, up;")) << r.output;
    EXPECT_TRUE(contains(r.output, "--class-names-from")) << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(d / "run2"));
}

TEST(ByodE2e, NpzConvertsAndBadNpzStopsEveryRank) {
  Scratch d;
  const Result ok = run(0, "convert " + repo_path("tests/fixtures/byod/values_regression.npz") + " " + d / "r.h5");
  ASSERT_EQ(ok.rc, 0) << ok.output;
  EXPECT_TRUE(contains(ok.output, "3 sequences, F=3, lengths 4..7, regression, 2 target(s)")) << ok.output;
  EXPECT_TRUE(contains(ok.output, "ignored 1 array(s): note")) << ok.output;

  const Result bad = run(2, "convert " + repo_path("tests/fixtures/byod/object_list.npz") + " " + d / "x.h5");
  EXPECT_EQ(bad.rank_rcs, (std::vector<int>{2, 2})) << bad.output;
  EXPECT_TRUE(contains(bad.output, "object array")) << bad.output;
  EXPECT_TRUE(contains(bad.output, "hint:")) << bad.output;
  EXPECT_FALSE(std::filesystem::exists(d / "x.h5"));
}

TEST(ByodE2e, PrintConfigPrintsAndExitsWithoutRunning) {
  Scratch d;
  const Result r = run(2, "train --data " + d / "none.h5" + " --out " + d / "run" + " --hidden 64 --print-config");
  EXPECT_EQ(r.rank_rcs, (std::vector<int>{0, 0})) << r.output;
  EXPECT_TRUE(contains(r.output, "# ragtrain train\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "hidden = 64\n")) << r.output;
  EXPECT_EQ(r.output.find("# ragtrain train"), r.output.rfind("# ragtrain train")) << "printed by rank 0 only";
  EXPECT_FALSE(std::filesystem::exists(d / "run")) << "nothing ran";
}
