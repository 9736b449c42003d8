// The data path's record (issue 34): summary.json says how many bytes the ranks read, how fast, how long until the
// first step, how long the loop waited for data and the largest rank's peak memory; a rank holds its shard once
// (the reader wrote a file-order copy and scattered it, twice the shard at the peak, before).
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
  EXPECT_GT(s["max_rss_bytes"].get<int64_t>(), int64_t{1} << 20);
  int step_records = 0;
  for (const auto& rec : read_jsonl(d / "run/metrics.jsonl"))
    if (rec["event"] == "step") {
      ++step_records;
      EXPECT_TRUE(rec.contains("io_wait_s")) << rec.dump();
    }
  EXPECT_GT(step_records, 0);
}

// Peak memory grows by the shard, not twice the shard: two runs that differ only in the data's size (100 MB
// more of features), peak RSS compared. The old reader (file-order copy + scatter) grew by ~2x here.
TEST(DataPath, ARankHoldsItsShardOnce) {
  Scratch d;
  const std::string g = " --features 36 --min-length 60 --max-length 130 --seed 2";
  gen(d, "small.h5", "--sequences 200" + g);
  gen(d, "large.h5", "--sequences 8000" + g);
  const std::string opts = " --epochs 1 --hidden 2 --batch-per-rank 512 --normalize none --log-every 1000 --quiet";
  const Result a = run(1, "train --data " + d / "small.h5" + " --out " + d / "a" + opts);
  const Result b = run(1, "train --data " + d / "large.h5" + " --out " + d / "b" + opts, 300);
  ASSERT_EQ(a.rc, 0) << a.output;
  ASSERT_EQ(b.rc, 0) << b.output;
  const auto sa = read_json(d / "a/summary.json"), sb = read_json(d / "b/summary.json");
  const double grew = static_cast<double>(sb["max_rss_bytes"].get<int64_t>() - sa["max_rss_bytes"].get<int64_t>());
  const double shard = static_cast<double>(sb["read_bytes"].get<int64_t>() - sa["read_bytes"].get<int64_t>());
  ASSERT_GT(shard, 90e6);
  EXPECT_LT(grew, 1.1 * shard + 16e6) << "peak RSS grew by " << grew << " bytes for " << shard << " bytes more data";
}
