// The data path's record (issue 34): summary.json says how many bytes the ranks read, how fast, how long until the
// first step, how long the loop waited for data and the largest rank's peak memory; a rank holds its shard once
// (the reader wrote a file-order copy and scattered it, twice the shard at the peak, before).
#include <fcntl.h>
#include <hdf5.h>
#include <semaphore.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <vector>
#include <algorithm>
#include <sstream>
#include <regex>
#include <string>

#include "e2e_util.hpp"

using namespace e2e;

namespace {

void gen(const Scratch& d, const std::string& name, const std::string& extra) {
  const Result r = run(0, "gen --out " + d / name + " --classes 3 --quiet " + extra);
  ASSERT_EQ(r.rc, 0) << r.output;
}

// The timesteps `inspect` counts in a file.
int64_t timesteps_of(const std::string& path) {
  const Result r = run(0, "inspect " + path);
  std::smatch m;
  EXPECT_TRUE(std::regex_search(r.output, m, std::regex("timesteps\\s+([0-9]+)"))) << r.output;
  return m.empty() ? -1 : std::stoll(m[1]);
}

}  // namespace

TEST(DataPath, SummaryRecordsTheRead) {
  Scratch d;
  gen(d, "train.h5", "--sequences 300 --features 4 --min-length 5 --max-length 30 --seed 1");
  const Result r = run(2, "train --data " + d / "train.h5" + " --out " + d / "run" +
                              " --epochs 1 --hidden 8 --batch-per-rank 2 --log-every 10 --quiet");
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto s = read_json(d / "run/summary.json");
  // Every rank read its own sequences once: all of them, features and labels, exactly.
  EXPECT_EQ(s["read_bytes"].get<int64_t>(), timesteps_of(d / "train.h5") * 4 * 4 + 300 * 4);
  EXPECT_EQ(s["read_path"], "pread");
  EXPECT_GE(s["reader_threads"].get<int>(), 1);
  EXPECT_GT(s["read_s"].get<double>(), 0.0);
  EXPECT_GT(s["time_to_first_step_s"].get<double>(), s["read_s"].get<double>());   // the first step follows the read
  EXPECT_LT(s["time_to_first_step_s"].get<double>(), s["wall_seconds"].get<double>());
  EXPECT_GE(s["io_wait_s"].get<double>(), 0.0);
  EXPECT_GE(s["shard_wait_s"].get<double>(), 0.0);   // the part of the background read setup_backend did not hide
  EXPECT_EQ(s["feature_statistics"], "stored");      // gen wrote them into the file
  EXPECT_GT(s["max_rss_bytes"].get<int64_t>(), int64_t{1} << 20);
  int step_records = 0;
  for (const auto& rec : read_jsonl(d / "run/metrics.jsonl"))
    if (rec["event"] == "step") {
      ++step_records;
      EXPECT_TRUE(rec.contains("io_wait_s")) << rec.dump();
    }
  EXPECT_GT(step_records, 0);
}

namespace {

// Two single-rank runs that differ in the data's size: small.h5 and large.h5 (F = 36, lengths 60-130, `seed`),
// trained with `opts` (the large one also with `large_extra`); their summaries, and how much peak RSS grew.
void small_and_large(const Scratch& d, const std::string& seed, int64_t small, int64_t large, const std::string& opts,
                     const std::string& large_extra, nlohmann::json& sa, nlohmann::json& sb, double& grew) {
  const std::string g = " --features 36 --min-length 60 --max-length 130 --seed " + seed;
  gen(d, "small.h5", "--sequences " + std::to_string(small) + g);
  gen(d, "large.h5", "--sequences " + std::to_string(large) + g);
  const Result a = run(1, "train --data " + d / "small.h5" + " --out " + d / "a" + opts);
  const Result b = run(1, "train --data " + d / "large.h5" + " --out " + d / "b" + opts + large_extra, 300);
  ASSERT_EQ(a.rc, 0) << a.output;
  ASSERT_EQ(b.rc, 0) << b.output;
  sa = read_json(d / "a/summary.json");
  sb = read_json(d / "b/summary.json");
  grew = static_cast<double>(sb["max_rss_bytes"].get<int64_t>() - sa["max_rss_bytes"].get<int64_t>());
}

}  // namespace

// Peak memory grows by the shard, not twice the shard: two runs that differ only in the data's size (100 MB
// more of features), peak RSS compared. The old reader (file-order copy + scatter) grew by ~2x here.
TEST(DataPath, ARankHoldsItsShardOnce) {
  if (binary_has_asan()) GTEST_SKIP() << "peak RSS under AddressSanitizer counts its shadow memory and quarantine";
  Scratch d;
  nlohmann::json sa, sb;
  double grew = 0;
  ASSERT_NO_FATAL_FAILURE(small_and_large(
      d, "2", 200, 8000, " --epochs 1 --hidden 2 --batch-per-rank 512 --normalize none --log-every 1000 --quiet", "",
      sa, sb, grew));
  // The shards' values (features and labels), not read_bytes: a run that starts streamed reads its first windows too.
  const double shard = static_cast<double>((timesteps_of(d / "large.h5") - timesteps_of(d / "small.h5")) * 36 * 4 +
                                           (8000 - 200) * 4);
  ASSERT_GT(shard, 90e6);
  // The large set starts streamed (doc/hpc.md "Where the first step stands"): its two windows beside the shard while
  // it loads are a fixed overhead, at most two slots of kEarlySlotBytes (16 MiB).
  ASSERT_TRUE(sb["started_streamed"].get<bool>());
  const double windows = 2.0 * 16 * 1048576;
  EXPECT_LT(grew, 1.1 * shard + 16e6 + windows)
      << "peak RSS grew by " << grew << " bytes for " << shard << " bytes more data";
}

// A shard many times --max-memory stays inside it: peak RSS of a streamed run over ~55 MB of features at --max-memory
// 4M grows by less than the budget (plus the same slack as above) against a resident run of a small set with the
// same options; the shard itself would add ~55 MB.
TEST(DataPath, AStreamedRankStaysInsideItsBudget) {
  if (binary_has_asan()) GTEST_SKIP() << "peak RSS under AddressSanitizer counts its shadow memory and quarantine";
  Scratch d;
  nlohmann::json sa, sb;
  double grew = 0;
  ASSERT_NO_FATAL_FAILURE(small_and_large(
      d, "4", 100, 4000, " --epochs 1 --hidden 2 --batch-per-rank 16 --normalize none --log-every 1000 --quiet",
      " --max-memory 4M", sa, sb, grew));
  ASSERT_FALSE(sa["streamed"].get<bool>());
  ASSERT_TRUE(sb["streamed"].get<bool>());
  const double shard = static_cast<double>(timesteps_of(d / "large.h5") * 36 * 4);
  ASSERT_GT(shard, 40e6);
  EXPECT_LT(grew, 4.0 * 1048576 + 16e6) << "peak RSS grew by " << grew << " bytes streaming " << shard << " bytes";
}

namespace {

// The `groups` (h5dump's "-g /a -g /b") of an HDF5 file as h5dump prints them, without the line naming the file: two
// files compare equal when those groups hold the same values.
std::string h5dump_of(const std::string& groups, const std::string& path) {
  const std::string cmd = "h5dump " + groups + " " + path + " 2>&1 | grep -v '^HDF5'";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

// The parameters, optimizer state and feature statistics of a checkpoint: what a resident and a streamed run of the
// same options must agree on to the bit.
std::string model_of(const std::string& checkpoint) {
  return h5dump_of("-g /params -g /optimizer -g /normalization", checkpoint);
}

}  // namespace

// A shard several times --max-memory streams through a window read ahead of the schedule; the same options give
// the same model to the bit as the resident run, on 1 and 2 ranks, and when resumed in the middle of a streamed
// epoch. --normalize feature (the default) included: its statistics come from a streamed pass over the same blocks.
TEST(DataPath, StreamedShardTrainsTheSameModelAsResident) {
  Scratch d;
  gen(d, "train.h5", "--sequences 400 --features 5 --min-length 3 --max-length 40 --seed 3");   // ~170 KB
  const std::string opts = " --epochs 2 --hidden 8 --batch-per-rank 3 --quiet";
  for (int np : {1, 2}) {
    SCOPED_TRACE(np);
    const std::string resident = d / ("resident" + std::to_string(np)), streamed = d / ("streamed" + std::to_string(np));
    const Result a = run(np, "train --data " + d / "train.h5" + " --out " + resident + opts);
    const Result b = run(np, "train --data " + d / "train.h5" + " --out " + streamed + opts +
                                 " --max-memory 40K --checkpoint-every 50");
    ASSERT_EQ(a.rc, 0) << a.output;
    ASSERT_EQ(b.rc, 0) << b.output;
    const auto sa = read_json(resident + "/summary.json"), sb = read_json(streamed + "/summary.json");
    EXPECT_FALSE(sa["streamed"].get<bool>());
    EXPECT_TRUE(sb["streamed"].get<bool>()) << "the shard should not fit 40K";
    EXPECT_GE(sb["window_steps"].get<int64_t>(), 1);
    // Two epochs, each sequence once per epoch: no statistics pass, the file (gen's) has them.
    EXPECT_EQ(sb["read_bytes"].get<int64_t>(), 2 * sa["read_bytes"].get<int64_t>());
    EXPECT_EQ(sb["feature_statistics"], "stored");
    const std::string want = model_of(resident + "/checkpoint.h5");
    ASSERT_NE(want.find("DATASET"), std::string::npos) << want;
    EXPECT_EQ(model_of(streamed + "/checkpoint.h5"), want);
    // Resumed from a step checkpoint in the middle of the second epoch (epochs of 134 or 67 steps; the rotation
    // keeps the newest) into another folder, still streaming.
    const std::string middle = np == 1 ? "/checkpoint-step000000250.h5" : "/checkpoint-step000000100.h5";
    const Result c = run(np, "train --data " + d / "train.h5" + " --out " + streamed + "r" + opts + " --max-memory 40K" +
                                 " --resume " + streamed + middle);
    ASSERT_EQ(c.rc, 0) << c.output;
    EXPECT_EQ(model_of(streamed + "r/checkpoint.h5"), want);
  }
}

// The device window's trainer path on the CPU reference (RAGTRAIN_CPU_DEVICE_MEMORY: the CPU backend says it has a
// device and keeps the staged windows in two slots of its own): a shard over --max-device-memory held as device
// windows (resident on the host), one over --max-memory as host windows each staged to the device, and both budgets
// small (W from the smaller), train the resident run's model to the bit, on 1 and 2 ranks, and resumed from a step
// checkpoint in the middle of a windowed epoch.
TEST(DataPath, DeviceWindowsTrainTheSameModelAsResident) {
  Scratch d;
  gen(d, "train.h5", "--sequences 400 --features 5 --min-length 3 --max-length 40 --seed 3");   // ~170 KB
  const std::string opts = " --epochs 2 --hidden 8 --batch-per-rank 3 --quiet";
  struct EnvGuard {
    EnvGuard() { ::setenv("RAGTRAIN_CPU_DEVICE_MEMORY", "1G", 1); }
    ~EnvGuard() { ::unsetenv("RAGTRAIN_CPU_DEVICE_MEMORY"); }
  };
  for (int np : {1, 2}) {
    SCOPED_TRACE(np);
    const std::string n = std::to_string(np), resident = d / ("resident" + n);
    const Result a = run(np, "train --data " + d / "train.h5" + " --out " + resident + opts);
    ASSERT_EQ(a.rc, 0) << a.output;
    const std::string want = model_of(resident + "/checkpoint.h5");
    ASSERT_NE(want.find("DATASET"), std::string::npos) << want;
    EXPECT_EQ(read_json(resident + "/summary.json")["shard_placement"], "resident");
    const EnvGuard device;
    const std::map<std::string, std::string> cases = {
        {"device", " --max-device-memory 40K --checkpoint-every 50"},
        {"host", " --max-memory 60K"},
        {"both", " --max-memory 60K --max-device-memory 8K"}};
    std::map<std::string, int64_t> w;
    for (const auto& [name, extra] : cases) {
      SCOPED_TRACE(name);
      const std::string out = d / (name + n);
      const Result r = run(np, "train --data " + d / "train.h5" + " --out " + out + opts + extra);
      ASSERT_EQ(r.rc, 0) << r.output;
      const auto s = read_json(out + "/summary.json");
      EXPECT_EQ(s["shard_placement"], name == "device" ? "device_window" : "host_window");
      EXPECT_EQ(s["streamed"].get<bool>(), name != "device");
      w[name] = s["device_window_steps"].get<int64_t>();
      EXPECT_GE(w[name], 1);
      EXPECT_EQ(s["window_steps"].get<int64_t>(), w[name]);
      EXPECT_EQ(model_of(out + "/checkpoint.h5"), want);
    }
    EXPECT_LT(w["both"], w["host"]) << "the device's smaller budget bounds W";
    // Resumed in the middle of the second epoch (134 or 67 steps an epoch), still in device windows.
    const std::string middle = np == 1 ? "/checkpoint-step000000250.h5" : "/checkpoint-step000000100.h5";
    const Result c = run(np, "train --data " + d / "train.h5" + " --out " + d / ("resumed" + n) + opts +
                                 " --max-device-memory 40K --resume " + d / ("device" + n) + middle);
    ASSERT_EQ(c.rc, 0) << c.output;
    EXPECT_EQ(model_of(d / ("resumed" + n) + "/checkpoint.h5"), want);
  }
}

// A device budget that cannot hold two steps' sequences is refused on every rank with exit 2 and a hint.
TEST(DataPath, DeviceBudgetBelowTwoStepsIsRefused) {
  Scratch d;
  gen(d, "train.h5", "--sequences 400 --features 5 --min-length 3 --max-length 40 --seed 3");
  ::setenv("RAGTRAIN_CPU_DEVICE_MEMORY", "1G", 1);
  const Result r = run(2, "train --data " + d / "train.h5" + " --out " + d / "run --epochs 1 --hidden 8 --quiet"
                          " --batch-per-rank 3 --max-device-memory 1K");
  ::unsetenv("RAGTRAIN_CPU_DEVICE_MEMORY");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("--max-device-memory 1K"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hint:"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(d / "run/checkpoint.h5"));
}

// The file truncated while a streamed run reads it: every rank stops with exit 2 naming the file and a sequence,
// and the checkpoints already written still read.
TEST(DataPath, FileTruncatedWhileStreamingStopsEveryRank) {
  Scratch d;
  gen(d, "train.h5", "--sequences 400 --features 5 --min-length 3 --max-length 40 --seed 3");
  const std::string file = d / "train.h5", metrics = d / "run/metrics.jsonl";
  const auto half = std::filesystem::file_size(file) / 2;
  // Once the first step is logged (the statistics pass read the whole file already), cut the file in half.
  const std::string cutter = "sh -c 'for i in $(seq 600); do grep -q step " + metrics +
                             " 2>/dev/null && break; sleep 0.05; done; truncate -s " + std::to_string(half) + " " +
                             file + "' &";
  ASSERT_EQ(std::system(cutter.c_str()), 0);
  const Result r = run(2, "train --data " + file + " --out " + d / "run" +
                              " --epochs 400 --hidden 8 --batch-per-rank 3 --max-memory 40K --log-every 1"
                              " --checkpoint-every 20 --quiet");
  EXPECT_EQ(r.rc, 2) << r.output;
  for (int rc : r.rank_rcs) EXPECT_EQ(rc, 2) << r.output;
  // The window's rows may all lie before the cut while /labels (after /features in the file) is gone: the dataset
  // named is the first one whose read failed.
  EXPECT_TRUE(contains(r.output, file) && (contains(r.output, "/features") || contains(r.output, "/labels")) &&
              contains(r.output, "sequence") && contains(r.output, "truncated") && contains(r.output, "hint:"))
      << r.output;
  for (const auto& entry : std::filesystem::directory_iterator(d / "run"))
    if (entry.path().extension() == ".h5") {
      EXPECT_NE(model_of(entry.path().string()).find("DATASET"), std::string::npos);
    }
}

namespace {

std::string text_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// eval's report without the lines that may differ between a resident and a streamed run: --verbose's per-rank
// lines (they say how the block was read) and the name of the --out file.
std::string report_of(const std::string& output) {
  std::istringstream in(output);
  std::string line, kept;
  while (std::getline(in, line))
    if (line.rfind("# rank ", 0) != 0 && line.rfind("wrote ", 0) != 0) kept += line + "\n";
  return kept;
}

}  // namespace

// eval and predict on a data set several times --max-memory: each rank reads and scores its block in pieces, and
// the outputs are those of the resident run (predict's CSV to the byte, eval's report and JSON exactly), on 1 and 2
// ranks, for classification and regression. Before, such a block was refused ("needs ... but this rank may use").
TEST(DataPath, EvalAndPredictStreamABlockLargerThanTheBudget) {
  Scratch d;
  const std::string shape = " --sequences 400 --features 5 --min-length 3 --max-length 40 --seed 3";   // ~180 KB
  gen(d, "cls.h5", shape);
  ASSERT_EQ(run(0, "gen --out " + d / "reg.h5" + " --task regression --outputs 2 --quiet" + shape).rc, 0);
  for (const std::string task : {"cls", "reg"}) {
    SCOPED_TRACE(task);
    const std::string data = d / (task + ".h5"), model = d / (task + "run");
    ASSERT_EQ(run(0, "train --data " + data + " --out " + model + " --epochs 1 --hidden 8 --quiet").rc, 0);
    for (int np : {1, 2}) {
      SCOPED_TRACE(np);
      const std::string at = d / (task + std::to_string(np));
      const std::string common = " --checkpoint " + model + " --data " + data + " --verbose";
      const Result ea = run(np, "eval" + common + " --out " + at + "a.json");
      const Result eb = run(np, "eval" + common + " --out " + at + "b.json --max-memory 30K");
      ASSERT_EQ(ea.rc, 0) << ea.output;
      ASSERT_EQ(eb.rc, 0) << eb.output;
      EXPECT_FALSE(contains(ea.output, "pieces")) << ea.output;
      EXPECT_TRUE(contains(eb.output, "pieces of at most")) << eb.output;   // it streamed
      EXPECT_EQ(report_of(eb.output), report_of(ea.output));
      EXPECT_EQ(text_of(at + "b.json"), text_of(at + "a.json"));
      const Result pa = run(np, "predict" + common + " --out " + at + "a.csv");
      const Result pb = run(np, "predict" + common + " --out " + at + "b.csv --max-memory 30K");
      ASSERT_EQ(pa.rc, 0) << pa.output;
      ASSERT_EQ(pb.rc, 0) << pb.output;
      EXPECT_TRUE(contains(pb.output, "pieces of at most")) << pb.output;
      const std::string want = text_of(at + "a.csv");
      EXPECT_GT(want.size(), 400u * 10);
      EXPECT_EQ(text_of(at + "b.csv"), want);
    }
  }
}

// Too small a budget for even the longest sequence beside the model and the outputs: exit 2 on every rank, with
// what is needed and a hint.
TEST(DataPath, EvalRefusesABudgetBelowOneSequence) {
  Scratch d;
  gen(d, "cls.h5", "--sequences 400 --features 5 --min-length 3 --max-length 40 --seed 3");
  ASSERT_EQ(run(0, "train --data " + d / "cls.h5" + " --out " + d / "run" + " --epochs 1 --hidden 8 --quiet").rc, 0);
  const Result r = run(2, "predict --checkpoint " + d / "run" + " --data " + d / "cls.h5" + " --out " + d / "p.csv" +
                              " --max-memory 12K");
  EXPECT_EQ(r.rc, 2) << r.output;
  for (int rc : r.rank_rcs) EXPECT_EQ(rc, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "longest sequence") && contains(r.output, "hint:")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(d / "p.csv"));
}

// --trace of a streamed run: every rank's reader thread has a track of its own ("reader", tid 1) holding one
// window_read span per window it read (the first included, read before the loop), each starting at its window's
// first step; the trainer's phases stay on tid 0. A resident run's reader track holds one shard_load span, the
// shard read in the background: the trainer's read_shard spans are two, the read started (setup_shards) and the
// read waited for and scaled (finish_shards), setup_backend runs between them, and shard_load lies within them, so
// the read and the backend's set-up overlap as far as their durations allow; the streamed run has none.
TEST(DataPath, TraceOfAStreamedRunHoldsTheReadersSpans) {
  Scratch d;
  gen(d, "train.h5", "--sequences 400 --features 5 --min-length 3 --max-length 40 --seed 3");
  const std::string opts = " --epochs 2 --hidden 8 --batch-per-rank 3 --quiet --normalize none";
  const Result a = run(2, "train --data " + d / "train.h5" + " --out " + d / "resident" + opts + " --trace " +
                              d / "resident.json");
  const Result b = run(2, "train --data " + d / "train.h5" + " --out " + d / "streamed" + opts +
                              " --max-memory 40K --trace " + d / "streamed.json");
  ASSERT_EQ(a.rc, 0) << a.output;
  ASSERT_EQ(b.rc, 0) << b.output;
  const int64_t w = read_json(d / "streamed/summary.json")["window_steps"].get<int64_t>();
  ASSERT_GE(w, 1);
  for (const std::string which : {"resident", "streamed"}) {
    SCOPED_TRACE(which);
    const auto t = read_json(d / (which + ".json"));
    std::map<int, std::vector<int64_t>> starts;   // rank -> the first steps of its window reads
    std::map<int, int64_t> steps;                 // rank -> compute spans
    std::map<int, std::string> reader_track;
    std::map<int, std::vector<double>> loads;     // rank -> the start of its shard_load spans (us)
    std::map<int, std::vector<std::pair<double, double>>> spans;   // rank -> [begin, end) of read_shard, setup_backend
    for (const auto& e : t["traceEvents"]) {
      const int pid = e["pid"].get<int>();
      if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == 1) reader_track[pid] = e["args"]["name"];
      if (e["ph"] != "X") continue;
      if (e["name"] == "window_read" || e["name"] == "shard_load") {
        EXPECT_EQ(e["tid"], 1) << e.dump();
        EXPECT_EQ(e["cat"], "reader") << e.dump();
        EXPECT_GE(e["dur"].get<double>(), 0.0);
        if (e["name"] == "shard_load")
          loads[pid].push_back(e["ts"].get<double>()), loads[pid].push_back(e["ts"].get<double>() + e["dur"].get<double>());
        else
          starts[pid].push_back(e["args"]["step"].get<int64_t>());
      } else {
        EXPECT_EQ(e["tid"], 0) << e.dump();
        if (e["name"] == "compute") ++steps[pid];
        if (e["name"] == "read_shard" || e["name"] == "setup_backend")
          spans[pid].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
      }
    }
    for (int rank : {0, 1}) {
      ASSERT_GT(steps[rank], 0);
      if (which == "resident") {
        EXPECT_TRUE(starts[rank].empty()) << rank;
        EXPECT_EQ(reader_track[rank], "reader") << rank;
        ASSERT_EQ(loads[rank].size(), 2u) << rank;   // one span: begin, end
        std::vector<std::pair<double, double>>& v = spans[rank];   // read_shard, setup_backend, read_shard
        std::sort(v.begin(), v.end());
        ASSERT_EQ(v.size(), 3u) << rank;
        EXPECT_LE(v[0].second, v[1].first) << rank;
        EXPECT_LE(v[1].second, v[2].first) << rank;
        EXPECT_GE(loads[rank][0], v[0].first) << "rank " << rank << ": the read began before setup_shards";
        EXPECT_LE(loads[rank][1], v[2].second) << "rank " << rank << ": the read ended after it was waited for";
        continue;
      }
      EXPECT_TRUE(loads[rank].empty()) << rank;
      EXPECT_EQ(reader_track[rank], "reader") << rank;
      std::vector<int64_t> want;
      for (int64_t s = 1; s <= steps[rank]; s += w) want.push_back(s);
      std::sort(starts[rank].begin(), starts[rank].end());
      EXPECT_EQ(starts[rank], want) << "rank " << rank << ", windows of " << w << " steps";
    }
  }
}

namespace {

// Opens a file read-write and lets `edit` change it.
template <class F>
void edit_file(const std::string& path, F&& edit) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  edit(f);
  H5Fclose(f);
}

void drop_statistics(const std::string& path) {
  edit_file(path, [](hid_t f) { ASSERT_GE(H5Ldelete(f, "/statistics", H5P_DEFAULT), 0); });
}

// Feature `f` of rows [0, rows) of /features set to `value`: an edit made after the statistics were written.
void overwrite_feature(const std::string& path, hsize_t f, hsize_t rows, float value) {
  edit_file(path, [&](hid_t file) {
    const hid_t ds = H5Dopen2(file, "/features", H5P_DEFAULT);
    const hid_t space = H5Dget_space(ds);
    const hsize_t start[2] = {0, f}, count[2] = {rows, 1};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    const std::vector<float> v(rows, value);
    const hid_t mem = H5Screate_simple(1, &rows, nullptr);
    EXPECT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, v.data()), 0);
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(ds);
  });
}

std::string statistics_of(const std::string& path) { return h5dump_of("-g /statistics", path); }

}  // namespace

// The statistics gen stores in the file scale the data before it is read: the same model to the bit as a run that
// computes them (the file without them), resident and streamed. On one rank the stored ones are what the run would
// compute; on two, every run with them (resident, streamed) trains the same model and keeps the one-rank statistics.
// `inspect --write-statistics` puts back exactly what gen wrote.
TEST(DataPath, StoredStatisticsTrainTheSameModel) {
  Scratch d;
  gen(d, "with.h5", "--sequences 400 --features 5 --min-length 3 --max-length 40 --seed 3");
  const std::string with = d / "with.h5", without = d / "without.h5";
  std::filesystem::copy_file(with, without);
  drop_statistics(without);
  const std::string opts = " --epochs 2 --hidden 8 --batch-per-rank 3 --quiet";
  auto train = [&](int np, const std::string& data, const std::string& out, const std::string& extra) {
    const Result r = run(np, "train --data " + data + " --out " + d / out + opts + extra);
    EXPECT_EQ(r.rc, 0) << r.output;
    return model_of(d / out + "/checkpoint.h5");
  };
  const std::string want = train(1, without, "computed1", "");
  ASSERT_NE(want.find("DATASET"), std::string::npos) << want;
  EXPECT_EQ(read_json(d / "computed1/summary.json")["feature_statistics"], "computed");
  EXPECT_EQ(train(1, with, "stored1", ""), want);
  EXPECT_EQ(read_json(d / "stored1/summary.json")["feature_statistics"], "stored");
  EXPECT_EQ(train(1, with, "streamed1", " --max-memory 40K"), want);
  EXPECT_TRUE(read_json(d / "streamed1/summary.json")["streamed"].get<bool>());
  const std::string two = train(2, with, "stored2", "");
  EXPECT_EQ(train(2, with, "streamed2", " --max-memory 40K"), two);
  const auto norm = [&](const std::string& run_dir) {
    const std::string m = model_of(d / run_dir + "/checkpoint.h5");
    return m.substr(m.find("GROUP \"/normalization\""));
  };
  EXPECT_EQ(norm("stored2"), norm("computed1"));
  // Rewritten from the data by inspect: the same group, bit for bit.
  const Result r = run(0, "inspect " + without + " --write-statistics --quiet");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(statistics_of(without), statistics_of(with));
}

// A file whose features changed after its statistics were written: a resident run stops at set-up, a streamed one
// after its first epoch, every rank with exit 2, naming the file, the feature and the way out; inspect reports it
// (exit 2) and --write-statistics repairs it.
TEST(DataPath, StaleStoredStatisticsStopEveryRank) {
  Scratch d;
  gen(d, "train.h5", "--sequences 400 --features 5 --min-length 3 --max-length 40 --seed 3");
  const std::string file = d / "train.h5";
  overwrite_feature(file, 2, 500, 40.0f);
  const std::string opts = " --epochs 3 --hidden 8 --batch-per-rank 3 --quiet";
  for (const std::string extra : {"", " --max-memory 40K"}) {
    SCOPED_TRACE(extra);
    const std::string out = d / (extra.empty() ? "resident" : "streamed");
    const Result r = run(2, "train --data " + file + " --out " + out + opts + extra);
    EXPECT_EQ(r.rc, 2) << r.output;
    for (int rc : r.rank_rcs) EXPECT_EQ(rc, 2) << r.output;
    EXPECT_TRUE(contains(r.output, file) && contains(r.output, "/statistics") && contains(r.output, "feature 2") &&
                contains(r.output, "hint:") && contains(r.output, "--write-statistics"))
        << r.output;
    // Resident: stopped before the run folder was made; streamed: after the first epoch, before the second.
    if (extra.empty()) EXPECT_FALSE(std::filesystem::exists(out + "/metrics.jsonl"));
    else EXPECT_FALSE(contains(text_of(out + "/metrics.jsonl"), "\"epoch\":2"));
  }
  const Result stale = run(0, "inspect " + file);
  EXPECT_EQ(stale.rc, 2) << stale.output;
  EXPECT_TRUE(contains(stale.output, "stale") && contains(stale.output, "--write-statistics")) << stale.output;
  ASSERT_EQ(run(0, "inspect " + file + " --write-statistics --quiet").rc, 0);
  const Result ok = run(2, "train --data " + file + " --out " + d / "repaired" + opts);
  EXPECT_EQ(ok.rc, 0) << ok.output;
}

namespace {

// A test hook of the trainer set for one scope (the ranks mpirun starts inherit it).
struct EnvSet {
  std::string name;
  EnvSet(std::string n, const std::string& value) : name(std::move(n)) { ::setenv(name.c_str(), value.c_str(), 1); }
  ~EnvSet() { ::unsetenv(name.c_str()); }
  EnvSet(const EnvSet&) = delete;
  EnvSet& operator=(const EnvSet&) = delete;
};

// Where a run that started streamed became resident must be a window boundary counted from where it started
// (`first`), or the last step (the load was still running at the end: the switch came before the final checkpoint).
void expect_switch_at_boundary(int64_t resident_from, int64_t first, int64_t w, int64_t total) {
  EXPECT_GT(resident_from, first);
  EXPECT_LE(resident_from, total);
  EXPECT_TRUE(resident_from == total || (resident_from - first) % w == 0) << resident_from;
}

}  // namespace

// Start streamed, become resident (doc/hpc.md "Where the first step stands"): a shard that fits, with stored
// statistics, trains its first steps on windows read from the file (RAGTRAIN_TEST_WINDOW_STEPS: W small enough that
// a small set's first window is not its whole shard) while the whole shard is read, then switches to it at a window
// boundary on every rank together; the model is the plain resident run's to the bit, on 1 and 2 ranks, K = 1 and 4,
// when the load finishes late (RAGTRAIN_TEST_LOAD_DELAY_MS: several windows pass first) and resumed mid-epoch.
TEST(DataPath, ResidentShardStartsStreamedAndTrainsTheSameModel) {
  Scratch d;
  gen(d, "train.h5", "--sequences 400 --features 5 --min-length 3 --max-length 40 --seed 3");   // ~170 KB
  for (int np : {1, 2})
    for (int k : {1, 4}) {
      const std::string tag = std::to_string(np) + "_" + std::to_string(k);
      SCOPED_TRACE(tag);
      // --hidden 64: steps slow enough (about 0.5 ms on one core) that a load 100 ms late lands mid-run.
      const std::string opts = " --epochs 2 --hidden 64 --quiet --batch-per-rank " + std::to_string(k);
      const std::string resident = d / ("resident" + tag);
      const Result a = run(np, "train --data " + d / "train.h5" + " --out " + resident + opts);
      ASSERT_EQ(a.rc, 0) << a.output;
      const auto sa = read_json(resident + "/summary.json");
      EXPECT_FALSE(sa["started_streamed"].get<bool>());
      EXPECT_EQ(sa["resident_from_step"].get<int64_t>(), 0);
      const int64_t total = sa["steps"].get<int64_t>(), spe = total / 2;
      const std::string want = model_of(resident + "/checkpoint.h5");
      ASSERT_NE(want.find("DATASET"), std::string::npos) << want;

      const EnvSet w("RAGTRAIN_TEST_WINDOW_STEPS", "5");
      const std::string early = d / ("early" + tag);
      const Result b = run(np, "train --data " + d / "train.h5" + " --out " + early + opts +
                                   " --checkpoint-every " + std::to_string(spe / 2));
      ASSERT_EQ(b.rc, 0) << b.output;
      const auto sb = read_json(early + "/summary.json");
      EXPECT_TRUE(sb["started_streamed"].get<bool>());
      EXPECT_FALSE(sb["streamed"].get<bool>());
      EXPECT_EQ(sb["shard_placement"], "resident");
      EXPECT_EQ(sb["window_steps"].get<int64_t>(), 5);
      EXPECT_EQ(sb["feature_statistics"], "stored");
      // The windows' reads come on top of the shard's.
      EXPECT_GT(sb["read_bytes"].get<int64_t>(), sa["read_bytes"].get<int64_t>());
      expect_switch_at_boundary(sb["resident_from_step"].get<int64_t>(), 0, 5, total);
      EXPECT_EQ(model_of(early + "/checkpoint.h5"), want);

      {   // the load finishes long after the first windows: they go on until it has, then the switch
        const EnvSet late("RAGTRAIN_TEST_LOAD_DELAY_MS", "100");
        const std::string out = d / ("late" + tag);
        const Result c = run(np, "train --data " + d / "train.h5" + " --out " + out + opts);
        ASSERT_EQ(c.rc, 0) << c.output;
        const auto sc = read_json(out + "/summary.json");
        EXPECT_TRUE(sc["started_streamed"].get<bool>());
        const int64_t from = sc["resident_from_step"].get<int64_t>();
        // At a boundary, usually not the first (the load is 100 ms late); on a loaded machine five steps can take
        // longer than that, so the first is allowed: what matters is the model.
        expect_switch_at_boundary(from, 0, 5, total);
        if (k == 1) {
          EXPECT_LT(from, total) << "the longer runs switch before their end";
        }
        EXPECT_EQ(model_of(out + "/checkpoint.h5"), want);
      }

      // Resumed in the middle of the second epoch: starts streamed again, from the checkpoint's step.
      char name[64];
      std::snprintf(name, sizeof name, "/checkpoint-step%09lld.h5", static_cast<long long>(3 * (spe / 2)));
      ASSERT_TRUE(std::filesystem::exists(early + name)) << early + name;
      const std::string resumed = d / ("resumed" + tag);
      const Result r = run(np, "train --data " + d / "train.h5" + " --out " + resumed + opts + " --resume " + early + name);
      ASSERT_EQ(r.rc, 0) << r.output;
      const auto sr = read_json(resumed + "/summary.json");
      EXPECT_TRUE(sr["started_streamed"].get<bool>());
      expect_switch_at_boundary(sr["resident_from_step"].get<int64_t>(), 3 * (spe / 2), 5, total);
      EXPECT_EQ(model_of(resumed + "/checkpoint.h5"), want);
    }
}

// Where the scaling needs the data (--normalize feature, no statistics in the file) the first step waits for the
// whole shard, as before: nothing starts streamed.
TEST(DataPath, ComputedStatisticsKeepTheResidentStart) {
  Scratch d;
  gen(d, "train.h5", "--sequences 400 --features 5 --min-length 3 --max-length 40 --seed 3");
  drop_statistics(d / "train.h5");
  const EnvSet w("RAGTRAIN_TEST_WINDOW_STEPS", "5");
  const Result r = run(2, "train --data " + d / "train.h5" + " --out " + d / "run --epochs 1 --hidden 8 --quiet");
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto s = read_json(d / "run/summary.json");
  EXPECT_EQ(s["feature_statistics"], "computed");
  EXPECT_FALSE(s["started_streamed"].get<bool>());
  EXPECT_EQ(s["resident_from_step"].get<int64_t>(), 0);
}

// The same start on a backend with device memory of its own (the CPU backend's device reference,
// RAGTRAIN_CPU_DEVICE_MEMORY): the first windows are device windows; where the device holds the whole shard the
// switch closes them and the shard goes to the device, where it does not (--max-device-memory 40K) the device keeps
// its windows, gathered from the host's shard from the switch on. Both train the resident run's model to the bit.
TEST(DataPath, ResidentShardStartsStreamedOnTheDeviceToo) {
  Scratch d;
  gen(d, "train.h5", "--sequences 400 --features 5 --min-length 3 --max-length 40 --seed 3");
  const std::string opts = " --epochs 2 --hidden 64 --quiet --batch-per-rank 1";
  for (int np : {1, 2}) {
    const std::string n = std::to_string(np), resident = d / ("resident" + n);
    SCOPED_TRACE(np);
    const Result a = run(np, "train --data " + d / "train.h5" + " --out " + resident + opts);
    ASSERT_EQ(a.rc, 0) << a.output;
    const std::string want = model_of(resident + "/checkpoint.h5");
    ASSERT_NE(want.find("DATASET"), std::string::npos) << want;
    const int64_t total = read_json(resident + "/summary.json")["steps"].get<int64_t>();
    const EnvSet device("RAGTRAIN_CPU_DEVICE_MEMORY", "1G"), w("RAGTRAIN_TEST_WINDOW_STEPS", "5");
    for (const std::string delay : {"0", "100"}) {
      const EnvSet late("RAGTRAIN_TEST_LOAD_DELAY_MS", delay);
      for (const std::string extra : {"", " --max-device-memory 40K"}) {
        SCOPED_TRACE(delay + extra);
        const std::string out = d / ("dev" + n + "_" + delay + (extra.empty() ? "" : "_40K"));
        const Result r = run(np, "train --data " + d / "train.h5" + " --out " + out + opts + extra);
        ASSERT_EQ(r.rc, 0) << r.output;
        const auto s = read_json(out + "/summary.json");
        EXPECT_TRUE(s["started_streamed"].get<bool>());
        EXPECT_EQ(s["shard_placement"], extra.empty() ? "resident" : "device_window");
        expect_switch_at_boundary(s["resident_from_step"].get<int64_t>(), 0, 5, total);   // (late: as above)
        // Device windows after a switch before the end: W from the device's budget (40K: about 25 steps), no
        // longer the early W of 5.
        if (!extra.empty() && s["resident_from_step"].get<int64_t>() < total) {
          EXPECT_GT(s["device_window_steps"].get<int64_t>(), 5) << s.dump();
        }
        EXPECT_EQ(model_of(out + "/checkpoint.h5"), want);
      }
    }
  }
}

// Stored statistics that no longer match the data, in a run that started streamed: the whole shard is checked at
// the switch, and every rank stops there with exit 2 and the message of a resident run, no checkpoint written.
TEST(DataPath, StaleStoredStatisticsStopARunThatStartedStreamed) {
  Scratch d;
  gen(d, "train.h5", "--sequences 400 --features 5 --min-length 3 --max-length 40 --seed 3");
  const std::string file = d / "train.h5";
  overwrite_feature(file, 2, 500, 40.0f);
  const EnvSet w("RAGTRAIN_TEST_WINDOW_STEPS", "5");
  const Result r = run(2, "train --data " + file + " --out " + d / "run" + " --epochs 2 --hidden 8 --quiet");
  EXPECT_EQ(r.rc, 2) << r.output;
  for (int rc : r.rank_rcs) EXPECT_EQ(rc, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "/statistics") && contains(r.output, "feature 2") && contains(r.output, "hint:"))
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(d / "run/checkpoint.h5"));
}

// Open MPI's default shared-file-pointer lock is a semaphore per node named after the file's base name; one left at
// zero by a process killed while holding it made every later MPI_File_open of a file of that name wait forever
// (a whole CI run hung on a stale /dev/shm/sem.OMPIO_val.h5). ragtrain opens its data without that lock: a stale
// one of the data file's own name, made here, must not stop a two-rank run.
TEST(DataPath, AStaleNodeWideFileLockOfTheSameNameDoesNotHangTheRead) {
  Scratch d;
  const std::string file = "stale_lock_" + std::to_string(::getpid()) + ".h5";
  gen(d, file, "--sequences 40 --features 3 --seed 1");
  const std::string lock = "/OMPIO_" + file;
  sem_t* held = sem_open(lock.c_str(), O_CREAT | O_EXCL, 0600, 0);   // value 0: "held" by nobody alive
  ASSERT_NE(held, SEM_FAILED) << "cannot create the semaphore " << lock;
  struct Unlink {
    std::string name;
    ~Unlink() { sem_unlink(name.c_str()); }
  } unlink_at_end{lock};
  sem_close(held);
  const Result r = run(2, "train --data " + d / file + " --out " + d / "run" + " --epochs 1 --hidden 4 --quiet",
                       static_cast<int>(60 * time_scale()));
  EXPECT_EQ(r.rc, 0) << "exit " << r.rc << " after " << r.seconds << " s (124: it hung)\n" << r.output;
  EXPECT_EQ(r.rank_rcs, (std::vector<int>{0, 0})) << r.output;
}
