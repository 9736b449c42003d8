// The balanced schedule as a run sees it: the batch repeat fraction train writes in its epoch records is the one
// recomputed from the order it trained in (--write-order), repeats stay rare, and the short last step changes.
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "e2e_util.hpp"

using namespace e2e;

TEST(Schedule, EpochRecordsCountTheBatchesMetAgain) {
  Scratch d;
  // 402 sequences, global batch 4 (2 ranks x 2): 100 full steps and a last step of 2.
  ASSERT_EQ(run(0, "gen --out " + d / "t.h5" + " --sequences 402 --features 3 --min-length 5 --max-length 60").rc, 0);
  const Result r = run(2, "train --data " + d / "t.h5" + " --out " + d / "run" +
                              " --batch-per-rank 2 --epochs 4 --hidden 4 --write-order --quiet");
  ASSERT_EQ(r.rc, 0) << r.output;

  // (epoch, step) -> the sequences of that global batch, from order.csv.
  std::map<std::pair<int, int>, std::set<int>> steps;
  std::ifstream csv(d / "run/order.csv");
  std::string line;
  std::getline(csv, line);
  while (std::getline(csv, line)) {
    std::stringstream in(line);
    std::string e, s, slot, seq;
    std::getline(in, e, ',');
    std::getline(in, s, ',');
    std::getline(in, slot, ',');
    std::getline(in, seq, ',');
    steps[{std::stoi(e), std::stoi(s)}].insert(std::stoi(seq));
  }
  std::map<int, std::vector<std::set<int>>> batches;   // epoch -> its batches of >= 2 sequences
  std::map<int, std::set<int>> last;                    // epoch -> its short last step
  for (const auto& [key, seqs] : steps) {
    if (seqs.size() >= 2) batches[key.first].push_back(seqs);
    if (key.second == 100) last[key.first] = seqs;
  }
  ASSERT_EQ(batches.size(), 4u);

  std::map<int, nlohmann::json> records;   // 1-based epoch -> its record
  for (const auto& rec : read_jsonl(d / "run/metrics.jsonl"))
    if (rec["event"] == "epoch") records[rec["epoch"].get<int>()] = rec;
  ASSERT_EQ(records.size(), 4u);
  EXPECT_TRUE(records[1]["batch_repeat_fraction"].is_null()) << "no epoch before the first";
  for (int e = 1; e < 4; ++e) {
    const std::set<std::set<int>> before(batches[e - 1].begin(), batches[e - 1].end());
    int met = 0;
    for (const auto& b : batches[e]) met += before.count(b) > 0 ? 1 : 0;
    const double expect = static_cast<double>(met) / static_cast<double>(batches[e].size());
    EXPECT_NEAR(records[e + 1]["batch_repeat_fraction"].get<double>(), expect, 1e-12) << "epoch " << e + 1;
    EXPECT_LE(expect, 0.05) << "epoch " << e + 1;
    ASSERT_EQ(last[e].size(), 2u);
  }
  // Four epochs, four draws of the short last step: not the same pair every time.
  std::set<std::set<int>> distinct;
  for (const auto& [e, s] : last) distinct.insert(s);
  EXPECT_GE(distinct.size(), 3u);
}

// simulate reports the distinct classes in a global batch for a labelled file (both schedules, within 1 and the
// batch size) and nothing for drawn lengths, where there are no classes.
TEST(Schedule, SimulateReportsClassesPerBatch) {
  Scratch d;
  ASSERT_EQ(run(0, "gen --out " + d / "t.h5" + " --sequences 300 --features 2 --classes 5 --min-length 5 --max-length 60").rc, 0);
  Result r = run(2, "simulate --data " + d / "t.h5" + " --ranks 2,4 --batch-per-rank 4 --epochs 2 --out " + d / "s.json");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("classes"), std::string::npos) << r.output;
  nlohmann::json rows = read_json(d / "s.json")["rows"];
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows)
    for (const char* key : {"balanced_classes_per_batch", "random_classes_per_batch"}) {
      ASSERT_TRUE(row[key].is_number()) << key << " " << row.dump();
      EXPECT_GE(row[key].get<double>(), 1.0) << key;
      EXPECT_LE(row[key].get<double>(), 5.0) << key;   // 5 classes
    }
  r = run(0, "simulate --ranks 8 --epochs 2 --out " + d / "l.json");
  ASSERT_EQ(r.rc, 0) << r.output;
  rows = read_json(d / "l.json")["rows"];
  EXPECT_TRUE(rows[0]["balanced_classes_per_batch"].is_null());
  EXPECT_TRUE(rows[0]["random_classes_per_batch"].is_null());
}
