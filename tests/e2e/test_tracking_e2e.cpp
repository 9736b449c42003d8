// Experiment tracking and the timeline as a user meets them: a 2-rank train run leaves metrics.csv, time-stamped
// metrics.jsonl records, TensorBoard event files that an independent reader (tests/tensorboard/read_events.py,
// its own CRC-32C and protobuf decoding) reads back with the expected scalars, and with --trace one Chrome trace
// with both ranks' tracks; a resumed run continues all three; `compare` lays runs side by side.
#include <map>
#include <regex>

#include "e2e_util.hpp"

using namespace e2e;
namespace fs = std::filesystem;

namespace {

// Runs a shell command, returns (exit status, stdout).
std::pair<int, std::string> shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The independent reader's view of a run folder's event files.
nlohmann::json read_events(const std::string& dir) {
  const auto [rc, out] = shell("python3 " + repo_path("tests/tensorboard/read_events.py") + " " + dir + " 2>&1");
  EXPECT_EQ(rc, 0) << out;
  return rc == 0 ? nlohmann::json::parse(out) : nlohmann::json::object();
}

std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    std::vector<std::string> cells;
    std::stringstream s(line);
    std::string cell;
    while (std::getline(s, cell, ',')) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.push_back("");
    rows.push_back(cells);
  }
  return rows;
}

// 200 training sequences: 100 steps per epoch on 2 ranks.
const char* kTrain = " --epochs 3 --hidden 8 --log-every 20 ";

class Tracking : public ::testing::Test {
 protected:
  // The data sets of the whole suite (Scratch names its folder after a test, which does not exist here).
  static void SetUpTestSuite() {
    dir_ = (fs::temp_directory_path() / ("ragtrain_e2e_Tracking_" + std::to_string(::getpid()))).string();
    fs::create_directories(dir_);
    const std::string g = " --features 4 --min-length 5 --max-length 20 --classes 3 --quiet";
    ASSERT_EQ(run(0, "gen --out " + dir_ + "/tr.h5 --sequences 200" + g).rc, 0);
    ASSERT_EQ(run(0, "gen --out " + dir_ + "/va.h5 --sequences 60 --seed 2" + g).rc, 0);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string data() { return " --data " + dir_ + "/tr.h5 --val " + dir_ + "/va.h5"; }
  static std::string dir_;
};
std::string Tracking::dir_;

}  // namespace

TEST_F(Tracking, TwoRankRunWritesCsvEventFilesAndTrace) {
  if (shell("python3 -c 1 2>&1").first != 0) GTEST_SKIP() << "python3 is needed for the independent event reader";
  Scratch s;
  const std::string out = s / "run", trace = s / "trace.json";
  const Result r = run(2, "train" + data() + " --out " + out + kTrain + "--trace " + trace);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "# trace: " + trace)) << r.output;

  // Every metrics.jsonl record carries the UTC time with milliseconds and the elapsed seconds, never falling.
  const std::vector<nlohmann::json> recs = read_jsonl(out + "/metrics.jsonl");
  const std::regex iso("20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\\.[0-9]{3}Z");
  double last = 0;
  std::vector<nlohmann::json> epochs;
  int step_records = 0;
  for (const auto& rec : recs) {
    ASSERT_TRUE(rec.contains("time") && rec.contains("elapsed")) << rec.dump();
    EXPECT_TRUE(std::regex_match(rec["time"].get<std::string>(), iso)) << rec.dump();
    EXPECT_GE(rec["elapsed"].get<double>(), last) << rec.dump();
    last = rec["elapsed"].get<double>();
    if (rec["event"] == "epoch") epochs.push_back(rec);
    step_records += rec["event"] == "step";
  }
  ASSERT_EQ(epochs.size(), 3u);
  EXPECT_EQ(step_records, 15);   // 300 steps, one record every 20

  // metrics.csv: one row per epoch, the epoch records' numbers.
  const auto csv = read_csv(out + "/metrics.csv");
  ASSERT_EQ(csv.size(), 4u);
  EXPECT_EQ(csv[0], (std::vector<std::string>{"epoch", "step", "train_loss", "train_accuracy", "val_loss",
                                              "val_accuracy", "lr", "sequences_per_second", "elapsed"}));
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(csv[e + 1][0], std::to_string(e + 1));
    EXPECT_EQ(csv[e + 1][1], std::to_string(100 * (e + 1)));
    EXPECT_NEAR(std::stod(csv[e + 1][2]), epochs[e]["train_loss"].get<double>(), 1e-8);
    EXPECT_NEAR(std::stod(csv[e + 1][5]), epochs[e]["val_accuracy"].get<double>(), 1e-8);
    EXPECT_GT(std::stod(csv[e + 1][7]), 0.0);
  }

  // TensorBoard: one file, its version first, 5 scalars per step record and 5 per epoch record
  // (train loss/accuracy, val loss/accuracy, seq/s), each equal to the record's value as a float.
  const nlohmann::json ev = read_events(out);
  ASSERT_EQ(ev["files"].size(), 1u) << ev.dump();
  EXPECT_EQ(ev["file_versions"], nlohmann::json::array({"brain.Event:2"}));
  EXPECT_EQ(ev["session_starts"], nlohmann::json::array({1}));
  size_t scalars = 0;
  for (const auto& [tag, points] : ev["scalars"].items()) scalars += points.size();
  EXPECT_EQ(scalars, 15u * 5 + 3 * 5) << ev["scalars"].dump();
  ASSERT_EQ(ev["scalars"]["epoch/val_accuracy"].size(), 3u);
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(ev["scalars"]["epoch/val_accuracy"][e][0], 100 * (e + 1));
    EXPECT_FLOAT_EQ(ev["scalars"]["epoch/val_accuracy"][e][1].get<float>(),
                    static_cast<float>(epochs[e]["val_accuracy"].get<double>()));
  }
  EXPECT_EQ(ev["scalars"]["train/loss"].size(), 15u);

  // The trace: valid JSON, a named track per rank, every step's phases on both.
  const nlohmann::json t = read_json(trace);
  std::map<int, std::map<std::string, int>> count;   // rank -> phase -> events
  std::map<int, std::string> names;
  for (const auto& e : t["traceEvents"]) {
    const int pid = e["pid"].get<int>();
    if (e["ph"] == "M" && e["name"] == "process_name") names[pid] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    count[pid][e["name"].get<std::string>()] += 1;
  }
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[1].rfind("rank 1 (", 0), 0u) << names[1];
  for (int rank : {0, 1}) {
    for (const char* phase : {"read", "compute", "allreduce_wait", "update"})
      EXPECT_EQ(count[rank][phase], 300) << "rank " << rank << " " << phase;
    EXPECT_EQ(count[rank]["validation"], 3) << rank;
    EXPECT_EQ(count[rank]["log"], 15) << rank;
    EXPECT_EQ(count[rank]["setup_data"], 1) << rank;
    EXPECT_EQ(count[rank]["read_shard"], 2) << rank;   // the read started, then waited for and scaled
    EXPECT_GE(count[rank]["checkpoint"], 2) << rank;   // best.h5 at least once, and the end checkpoint
  }
  EXPECT_EQ(t["otherData"]["ranks"], 2);
  EXPECT_TRUE(t["otherData"]["truncated"].empty());
}

// With --val-every, validations fall inside --log-every intervals: an interval's throughput is its sequences over
// its training time, as the epoch's is. (The interval clock once restarted at every validation while the sequence
// count did not: with a validation after every step, each interval claimed ~20x the epoch's rate.)
TEST_F(Tracking, IntervalThroughputLeavesValidationOutButKeepsTraining) {
  Scratch s;
  const std::string out = s / "run";
  const Result r = run(0, "train" + data() + " --out " + out + " --epochs 1 --hidden 32 --log-every 20 --val-every 1 --quiet");
  ASSERT_EQ(r.rc, 0) << r.output;
  double interval_s = 0, interval_seq = 0, epoch_sps = 0, epoch_seq = 200;
  int intervals = 0;
  for (const auto& rec : read_jsonl(out + "/metrics.jsonl")) {
    if (rec["event"] == "step") {
      interval_s += rec["seconds"].get<double>();
      interval_seq += rec["sequences"].get<double>();
      EXPECT_NEAR(rec["sequences_per_second"].get<double>(), rec["sequences"].get<double>() / rec["seconds"].get<double>(),
                  1e-6 * rec["sequences_per_second"].get<double>());
      ++intervals;
    }
    if (rec["event"] == "epoch") epoch_sps = rec["sequences_per_second"].get<double>();
  }
  ASSERT_EQ(intervals, 10);
  EXPECT_EQ(interval_seq, epoch_seq);
  ASSERT_GT(epoch_sps, 0);
  const double epoch_train_s = epoch_seq / epoch_sps;
  // The intervals' training time is the epoch's (less its few log records); validation is ~30x a step here.
  EXPECT_GT(interval_s, 0.5 * epoch_train_s) << interval_s << " s in the intervals, " << epoch_train_s << " s in the epoch";
  EXPECT_LT(interval_s, 1.5 * epoch_train_s) << interval_s << " s in the intervals, " << epoch_train_s << " s in the epoch";
}

TEST_F(Tracking, ResumedRunContinuesCsvElapsedAndEvents) {
  if (shell("python3 -c 1 2>&1").first != 0) GTEST_SKIP() << "python3 is needed for the independent event reader";
  Scratch s;
  const std::string a = s / "a", b = s / "b";
  ASSERT_EQ(run(2, "train" + data() + " --out " + a + kTrain + "--checkpoint-every 150 --quiet").rc, 0);
  // A run killed after step 300 whose last surviving checkpoint is step 150: its folder without the later ones.
  fs::create_directories(b);
  for (const auto& e : fs::directory_iterator(a)) {
    const std::string name = e.path().filename().string();
    if (name == "metrics.jsonl" || name == "metrics.csv" || name == "checkpoint-step000000150.h5" ||
        name.rfind("events.out.tfevents.", 0) == 0)
      fs::copy_file(e.path(), fs::path(b) / name);
  }
  const Result r = run(2, "train" + data() + " --out " + b + kTrain + "--checkpoint-every 150 --quiet --resume " + b +
                              "/checkpoint-step000000150.h5");
  ASSERT_EQ(r.rc, 0) << r.output;

  // The same epochs and losses as the uninterrupted run (resume is bitwise on the CPU backend), elapsed rising.
  const auto ca = read_csv(a + "/metrics.csv"), cb = read_csv(b + "/metrics.csv");
  ASSERT_EQ(cb.size(), 4u);
  double last = -1;
  for (size_t i = 1; i < cb.size(); ++i) {
    EXPECT_EQ(cb[i][0], ca[i][0]);
    EXPECT_EQ(cb[i][1], ca[i][1]);
    EXPECT_EQ(cb[i][2], ca[i][2]) << "train_loss of epoch " << i;
    EXPECT_GT(std::stod(cb[i].back()), last);
    last = std::stod(cb[i].back());
  }
  // Two event files, each starting with a SessionLog START at its first step: the second's at step 151, so the
  // steps it redoes replace the first file's: every curve has each step once, in order.
  const nlohmann::json ev = read_events(b);
  EXPECT_EQ(ev["files"].size(), 2u);
  EXPECT_EQ(ev["session_starts"], nlohmann::json::array({1, 151}));
  std::vector<int> steps;
  for (const auto& p : ev["scalars"]["train/loss"]) steps.push_back(p[0].get<int>());
  std::vector<int> expected;
  for (int st = 20; st <= 300; st += 20) expected.push_back(st);
  EXPECT_EQ(steps, expected);
  EXPECT_EQ(ev["scalars"]["epoch/train_loss"].size(), 3u);
}

TEST_F(Tracking, CompareLaysRunsSideBySide) {
  Scratch s;
  const std::string a = s / "a", b = s / "b";
  ASSERT_EQ(run(2, "train" + data() + " --out " + a + " --epochs 2 --hidden 4 --quiet").rc, 0);
  ASSERT_EQ(run(0, "train" + data() + " --out " + b + " --epochs 2 --hidden 6 --quiet").rc, 0);
  const Result r = run(0, "compare " + a + " " + b + " --out " + s / "cmp.json");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "hidden=4") && contains(r.output, "hidden=6")) << r.output;
  const nlohmann::json j = read_json(s / "cmp.json");
  EXPECT_EQ(j["differing_options"], nlohmann::json::array({"hidden"}));
  ASSERT_EQ(j["runs"].size(), 2u);
  const nlohmann::json sa = read_json(a + "/summary.json");
  EXPECT_EQ(j["runs"][0]["ranks"], 2);
  EXPECT_EQ(j["runs"][1]["ranks"], 1);
  EXPECT_EQ(j["runs"][0]["best_val_accuracy"], sa["best_val_accuracy"]);
  EXPECT_EQ(j["runs"][0]["wall_seconds"], sa["wall_seconds"]);
  // CSV too; an existing output needs --force; a folder that is not a finished run is a user error.
  ASSERT_EQ(run(0, "compare " + a + " " + b + " --out " + s / "cmp.csv --quiet").rc, 0);
  const auto csv = read_csv(s / "cmp.csv");
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_EQ(csv[0][2], "hidden");
  EXPECT_EQ(csv[2][2], "6");
  const Result again = run(0, "compare " + a + " " + b + " --out " + s / "cmp.csv");
  EXPECT_EQ(again.rc, 2);
  EXPECT_TRUE(contains(again.output, "--force")) << again.output;
  const Result none = run(2, "compare " + a + " " + s.str());
  EXPECT_EQ(none.rc, 2);
  EXPECT_EQ(none.rank_rcs, (std::vector<int>{2, 2}));
  EXPECT_TRUE(contains(none.output, "has no summary.json") && contains(none.output, "hint:")) << none.output;
}

TEST_F(Tracking, TraceIsAnOutputThatNeverLosesData) {
  Scratch s;
  std::ofstream(s / "old.json") << "{}\n";
  const std::string base = "train" + data() + " --epochs 1 --hidden 4 --quiet --out " + s / "run";
  struct Bad {
    std::string trace, says;
  } cases[] = {{s / "old.json", "already exists"},
               {s / "run/summary.json", "writes too"},
               {s / "missing/t.json", "does not exist"},
               {s / "t.txt", "must end in .json"}};
  for (const Bad& c : cases) {
    const Result r = run(2, base + " --trace " + c.trace);
    EXPECT_EQ(r.rc, 2) << c.trace << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.says) && contains(r.output, "hint:")) << c.trace << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(s / "run/metrics.jsonl"));   // refused before any work
  std::ifstream old(s / "old.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(old), {}), "{}\n");
  // --force replaces a trace of an earlier run.
  const Result forced = run(2, base + " --trace " + s / "old.json --force");
  ASSERT_EQ(forced.rc, 0) << forced.output;
  EXPECT_TRUE(read_json(s / "old.json").contains("traceEvents"));
}

TEST_F(Tracking, BenchTracesTheSameStepPhases) {
  Scratch s;
  const std::string trace = s / "bench.json";
  const Result r = run(2, "bench --steps 6 --warmup 2 --hidden 4 --sequences 16 --features 3 --min-length 3 "
                          "--max-length 6 --trace " + trace);
  ASSERT_EQ(r.rc, 0) << r.output;
  std::map<int, int> compute;
  const nlohmann::json t = read_json(trace);
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "X" && e["name"] == "compute") compute[e["pid"].get<int>()] += 1;
  EXPECT_EQ(compute, (std::map<int, int>{{0, 8}, {1, 8}}));
}

// CUDA builds mark the same phases as NVTX ranges of the "ragtrain" domain (for Nsight Systems), with or without
// --trace. tests/nvtx/nvtx_count.cpp is an NVTX injection library, loaded the way nsys loads its own, that counts
// the ranges per name; NVTX is host code, so the CPU backend of a CUDA build shows them too.
TEST_F(Tracking, CudaBuildsMarkThePhasesWithNvtx) {
  if (!contains(run(0, "--version").output, "backends: cpu, cuda")) GTEST_SKIP() << "a CPU-only build has no NVTX";
  const std::string lib = (fs::path(bin()).parent_path().parent_path() / "lib/libnvtx_count.so").string();
  ASSERT_TRUE(fs::exists(lib)) << lib << " is missing: `make test` builds it (make " << lib << ")";
  Scratch s;
  const std::string counts = s / "nvtx";
  setenv("NVTX_INJECTION64_PATH", lib.c_str(), 1);
  setenv("RAGTRAIN_NVTX_COUNTS", counts.c_str(), 1);
  const Result r = run(2, "train" + data() + " --out " + s / "run --epochs 1 --hidden 4 --log-every 50 --quiet");
  unsetenv("NVTX_INJECTION64_PATH");
  unsetenv("RAGTRAIN_NVTX_COUNTS");
  ASSERT_EQ(r.rc, 0) << r.output;
  for (int rank : {0, 1}) {
    std::map<std::string, long> n;
    std::ifstream f(counts + "." + std::to_string(rank));
    ASSERT_TRUE(f.good()) << "rank " << rank << " wrote no NVTX counts (was the injection library loaded?)";
    std::string domain, name;
    long v;
    while (f >> domain) {
      if (domain == "unbalanced" || domain == "max_depth") {
        f >> v;
        n[domain] = v;
        continue;
      }
      f >> name >> v;
      EXPECT_EQ(domain, "ragtrain");
      n[name] = v;
    }
    for (const char* phase : {"read", "compute", "allreduce_wait", "update"}) EXPECT_EQ(n[phase], 100) << phase;
    EXPECT_EQ(n["validation"], 1);
    EXPECT_EQ(n["log"], 2);
    EXPECT_EQ(n["setup_data"], 1);
    EXPECT_EQ(n["unbalanced"], 0);   // every range pushed was popped
    EXPECT_GE(n["max_depth"], 1);
  }
}
