// Numerical faults through the real binary: a regression target of 3e38 (finite, so the file is valid) makes one
// sequence's squared error overflow to Inf in the forward pass. --on-nonfinite stop (the default) ends every rank
// with exit code 2 and a message naming the step, the rank and the sequence, and keeps the last good checkpoint;
// --on-nonfinite skip drops that step on every rank, counts it, warns once, and the ranks stay identical.
#include <hdf5.h>

#include <cmath>
#include <filesystem>

#include "e2e_util.hpp"

using namespace e2e;
namespace fs = std::filesystem;

namespace {

const char* kArgs = " --hidden 8 --lr 0.01 --log-every 5 --quiet";
constexpr int64_t kStep = 7;   // the poisoned sequence is trained at this (1-based) step of every epoch

// 60 regression sequences with two targets each, made once per test process.
struct DataCache {
  std::string dir = fs::temp_directory_path() / ("ragtrain_e2e_nonfinite_data_" + std::to_string(::getpid()));
  DataCache() {
    fs::create_directories(dir);
    EXPECT_EQ(run(0, "gen --out " + dir + "/train.h5 --sequences 60 --seed 3 --features 4 --min-length 5 "
                     "--max-length 20 --task regression --outputs 2").rc, 0);
  }
  ~DataCache() { fs::remove_all(dir); }
};

std::string clean_data() {
  static const DataCache cache;
  return cache.dir + "/train.h5";
}

// The sequence that rank `rank` trains at step kStep of the first epoch on `np` ranks x 1, from --write-order
// (order.csv: epoch,step,slot,sequence; slot j belongs to rank j / batch-per-rank).
int64_t sequence_at(const Scratch& d, int np, int rank) {
  const std::string out = d / ("order" + std::to_string(np));
  const Result r = run(np, "train --data " + clean_data() + " --out " + out + kArgs + " --epochs 1 --write-order");
  EXPECT_EQ(r.rc, 0) << r.output;
  std::ifstream in(out + "/order.csv");
  std::string line;
  std::getline(in, line);   // header
  long long epoch = 0, step = 0, slot = 0, seq = 0;
  char c1, c2, c3;
  while (in >> epoch >> c1 >> step >> c2 >> slot >> c3 >> seq)
    if (epoch == 0 && step == kStep - 1 && slot == rank) return seq;
  ADD_FAILURE() << "no sequence at step " << kStep << " slot " << rank << " in " << out << "/order.csv";
  return -1;
}

// A copy of the training data whose sequence `seq` has the finite target 3e38: its squared error is Inf.
std::string poisoned(const Scratch& d, int64_t seq) {
  const std::string path = d / ("bad" + std::to_string(seq) + ".h5");
  fs::copy_file(clean_data(), path, fs::copy_options::overwrite_existing);
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t ds = H5Dopen2(f, "labels", H5P_DEFAULT);
  const hid_t space = H5Dget_space(ds);
  const hsize_t start[2] = {static_cast<hsize_t>(seq), 0}, count[2] = {1, 1};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  const hid_t mem = H5Screate_simple(2, count, nullptr);
  const float huge = 3e38f;
  EXPECT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, &huge), 0);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(ds);
  H5Fclose(f);
  return path;
}

// Every parameter tensor of a checkpoint, and its step.
std::vector<float> checkpoint_params(const std::string& path, int64_t& step) {
  std::vector<float> all;
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return all;
  const hid_t a = H5Aopen(f, "step", H5P_DEFAULT);
  H5Aread(a, H5T_NATIVE_INT64, &step);
  H5Aclose(a);
  for (const char* name : {"params/lstm.weight_ih_l0", "params/lstm.weight_hh_l0", "params/lstm.bias_ih_l0",
                           "params/lstm.bias_hh_l0", "params/fc.weight", "params/fc.bias"}) {
    const hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    const hid_t sp = H5Dget_space(ds);
    std::vector<float> v(static_cast<size_t>(H5Sget_simple_extent_npoints(sp)));
    H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    all.insert(all.end(), v.begin(), v.end());
    H5Sclose(sp);
    H5Dclose(ds);
  }
  H5Fclose(f);
  return all;
}

std::vector<nlohmann::json> events(const std::string& metrics, const std::string& kind) {
  std::vector<nlohmann::json> out;
  for (const auto& r : read_jsonl(metrics))
    if (r["event"] == kind) out.push_back(r);
  return out;
}

int count_of(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(Nonfinite, StopNamesStepRankAndSequenceAndKeepsTheLastGoodCheckpoint) {
  Scratch d;
  for (int np : {1, 3}) {
    const int rank = np - 1;   // on 3 ranks the last one: the message must name it, not rank 0
    const int64_t seq = sequence_at(d, np, rank);
    ASSERT_GE(seq, 0);
    const std::string out = d / ("stop" + std::to_string(np));
    const Result r = run(np, "train --data " + poisoned(d, seq) + " --out " + out + kArgs +
                                 " --epochs 2 --checkpoint-every 5");
    SCOPED_TRACE("np " + std::to_string(np) + "\n" + r.output);
    EXPECT_EQ(r.rc, 2);
    for (size_t k = 0; k < r.rank_rcs.size(); ++k) EXPECT_EQ(r.rank_rcs[k], 2) << "rank " << k;
    const std::string expect = "step " + std::to_string(kStep) + ": non-finite loss on rank " + std::to_string(rank) +
                               ", sequence " + std::to_string(seq);
    EXPECT_TRUE(contains(r.output, expect)) << "message lacks '" << expect << "'";
    for (const char* s : {"hint:", "--lr", "--clip", "--on-nonfinite skip", "checkpoint.h5 (step 5)"})
      EXPECT_TRUE(contains(r.output, s)) << "message lacks '" << s << "'";
    EXPECT_EQ(count_of(r.output, "non-finite loss on rank"), 1) << "printed once, not by every rank";

    // Nothing was written from the bad state: checkpoint.h5 is step 5's, finite, and evaluates.
    EXPECT_FALSE(fs::exists(out + "/summary.json"));
    EXPECT_FALSE(fs::exists(out + "/checkpoint-step000000010.h5"));
    int64_t step = -1;
    const std::vector<float> params = checkpoint_params(out + "/checkpoint.h5", step);
    EXPECT_EQ(step, 5);
    ASSERT_FALSE(params.empty());
    for (float v : params) ASSERT_TRUE(std::isfinite(v));
    const Result e = run(1, "eval --checkpoint " + out + "/checkpoint.h5 --data " + clean_data());
    EXPECT_EQ(e.rc, 0) << e.output;
    const auto ev = events(out + "/metrics.jsonl", "nonfinite");
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0]["step"], kStep);
    EXPECT_EQ(ev[0]["rank"], rank);
    EXPECT_EQ(ev[0]["sequence"], seq);
    EXPECT_EQ(ev[0]["action"], "stop");
  }
}

TEST(Nonfinite, SkipDropsTheStepOnEveryRankCountsItAndWarnsOnce) {
  Scratch d;
  for (int np : {1, 3}) {
    const int rank = np == 3 ? 1 : 0;
    const int64_t seq = sequence_at(d, np, rank);
    ASSERT_GE(seq, 0);
    const std::string out = d / ("skip" + std::to_string(np));
    const Result r = run(np, "train --data " + poisoned(d, seq) + " --out " + out + kArgs +
                                 " --epochs 3 --on-nonfinite skip");
    SCOPED_TRACE("np " + std::to_string(np) + "\n" + r.output);
    ASSERT_EQ(r.rc, 0);
    for (size_t k = 0; k < r.rank_rcs.size(); ++k) EXPECT_EQ(r.rank_rcs[k], 0) << "rank " << k;
    EXPECT_EQ(count_of(r.output, "warning:"), 1) << "warned once, on one rank";
    EXPECT_TRUE(contains(r.output, "non-finite loss on rank " + std::to_string(rank) + ", sequence " +
                                       std::to_string(seq)));

    // The balanced schedule deals each sequence to the same rank every epoch: one skip per epoch, same culprit.
    const auto s = read_json(out + "/summary.json");
    EXPECT_EQ(s["skipped_steps"], 3);
    EXPECT_EQ(s["validity"]["ranks_agree"], true) << "the ranks diverged: the skip was not on every rank";
    EXPECT_EQ(s["validity"]["loss_finite"], true);
    ASSERT_TRUE(s["train_loss"].is_number());
    const auto ev = events(out + "/metrics.jsonl", "nonfinite");
    ASSERT_EQ(ev.size(), 3u);
    for (const auto& e : ev) {
      EXPECT_EQ(e["rank"], rank);
      EXPECT_EQ(e["sequence"], seq);
      EXPECT_EQ(e["action"], "skip");
    }
    EXPECT_EQ(ev[0]["step"], kStep);
    int64_t step = -1;
    for (float v : checkpoint_params(out + "/checkpoint.h5", step)) ASSERT_TRUE(std::isfinite(v));
    const auto steps = events(out + "/metrics.jsonl", "step");
    ASSERT_FALSE(steps.empty());
    EXPECT_EQ(steps.back()["skipped_steps"], 3);
  }
}
