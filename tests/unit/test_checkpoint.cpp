// Checkpoint format v2 (round trip, CRC-32 per tensor), rotation of step files, resume compatibility, the
// metrics.jsonl trim of a resumed run, and scaling efficiency — everything of issue 5 that needs no MPI job.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "ragtrain/checkpoint/checkpoint.hpp"
#include "ragtrain/checkpoint/checksum.hpp"
#include "ragtrain/checkpoint/resume.hpp"
#include "ragtrain/checkpoint/rotation.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/data/h5.hpp"
#include "ragtrain/metrics/metrics.hpp"
#include "ragtrain/metrics/scaling.hpp"

using namespace ragtrain;
namespace fs = std::filesystem;

namespace {

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / (std::string("ragtrain_unit_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

std::string user_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return std::string(e.what()) + " | hint: " + e.hint();
  }
  return "";
}

const char* kConfig = "# ragtrain train\nhidden = 4\nlayers = 1\noptimizer = adam\nlr = 0.01\nseed = 7\nschedule = balanced\n";

// A small version-2 checkpoint with distinct values everywhere, so a mix-up shows.
Checkpoint sample(int64_t step = 30) {
  Checkpoint c;
  c.shape = ModelShape{3, 4, 1, 2, Task::Classification};
  const int64_t P = ParamLayout(c.shape).total();
  for (int64_t i = 0; i < P; ++i) {
    c.params.push_back(0.01f * static_cast<float>(i) - 0.3f);
    c.opt_m.push_back(1e-3f * static_cast<float>(i));
    c.opt_v.push_back(1e-6f * static_cast<float>(i + 1));
  }
  c.step = step;
  c.epoch = step / 10;
  c.config = kConfig;
  c.optimizer = "adam";
  c.optimizer_steps = step;
  c.normalization = "feature";
  c.feature_mean = {0.5f, -1.0f, 2.0f};
  c.feature_std = {1.5f, 0.25f, 3.0f};
  c.resumable = true;
  c.position.steps_per_epoch = 10;
  c.position.global_batch = 4;
  c.position.world_size = 2;
  c.position.batch_per_rank = 2;
  c.position.epochs = 5;
  c.position.seed = 0xFFFFFFFFFFFFFFF1ull;   // above INT64_MAX: must survive the file
  c.position.schedule = "balanced";
  c.position.data_sequences = 40;
  c.position.data_lengths_crc32 = 0xDEADBEEFu;
  c.accumulators.epoch_loss_sum = 1.0 / 3.0;
  c.accumulators.epoch_count = 12;
  c.accumulators.epoch_correct = 5;
  c.accumulators.interval_loss_sum = std::nextafter(2.0, 3.0);
  c.accumulators.interval_count = 4;
  c.accumulators.first_loss = 1.0986;
  c.accumulators.skipped_steps = 2;
  return c;
}

ResumeTarget target_for(const Checkpoint& c) {
  ResumeTarget t;
  t.shape = c.shape;
  t.position = c.position;
  t.position.complete = false;
  t.effective_config = c.config;
  return t;
}

}  // namespace

TEST(Checksum, Crc32MatchesZlib) {
  const char* s = "123456789";
  EXPECT_EQ(crc32(s, 9), 0xCBF43926u);   // the CRC-32 check value; zlib.crc32(b"123456789")
  EXPECT_EQ(crc32(s + 4, 5, crc32(s, 4)), 0xCBF43926u) << "continuing a CRC";
  const float one = 1.0f;
  EXPECT_EQ(crc32_floats(&one, 1), crc32("\x00\x00\x80\x3f", 4));   // little-endian float32 bytes
}

TEST(Checkpoint, Version2RoundTripIsExact) {
  TempDir d;
  const Checkpoint c = sample();
  write_checkpoint(d / "c.h5", c);
  const Checkpoint r = read_checkpoint(d / "c.h5");
  EXPECT_EQ(r.version, kCheckpointVersion);
  EXPECT_TRUE(r.resumable);
  EXPECT_EQ(r.params, c.params);
  EXPECT_EQ(r.opt_m, c.opt_m);
  EXPECT_EQ(r.opt_v, c.opt_v);
  EXPECT_EQ(r.feature_std, c.feature_std);
  EXPECT_EQ(r.step, 30);
  EXPECT_EQ(r.optimizer_steps, 30);
  EXPECT_EQ(r.position.seed, c.position.seed);
  EXPECT_EQ(r.position.data_lengths_crc32, 0xDEADBEEFu);
  EXPECT_EQ(r.position.global_batch, 4);
  EXPECT_EQ(r.position.schedule, "balanced");
  // Doubles come back bit for bit: a resumed run continues the same sums.
  EXPECT_EQ(std::memcmp(&r.accumulators, &c.accumulators, sizeof(TrainAccumulators)), 0);
  EXPECT_FALSE(fs::exists(d / "c.h5.tmp." + std::to_string(::getpid()))) << "temporary file left behind";
}

// The model options round-trip, with the _reverse tensors under PyTorch's names; a file written before they
// existed (no bidirectional/pool/dropout attributes) loads as the model it was: unidirectional, last, no dropout.
TEST(Checkpoint, ModelOptionsRoundTripAndOldFilesLoadAsBefore) {
  TempDir d;
  Checkpoint c = sample();
  c.shape.bidirectional = true;
  c.shape.pool = Pool::Max;
  c.shape.layers = 2;
  c.dropout = DropoutRates{0.25, 0.5};
  const int64_t P = ParamLayout(c.shape).total();
  c.params.resize(static_cast<size_t>(P));
  for (int64_t i = 0; i < P; ++i) c.params[static_cast<size_t>(i)] = 0.001f * static_cast<float>(i);
  c.opt_m.assign(static_cast<size_t>(P), 0.5f);
  c.opt_v.assign(static_cast<size_t>(P), 0.25f);
  write_checkpoint(d / "bi.h5", c);
  const Checkpoint r = read_checkpoint(d / "bi.h5");
  EXPECT_TRUE(r.shape == c.shape);
  EXPECT_EQ(r.dropout.between, 0.25);
  EXPECT_EQ(r.dropout.head, 0.5);
  EXPECT_EQ(r.params, c.params);
  {
    H5Handle f = h5_file(H5Fopen((d / "bi.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    EXPECT_GT(H5Lexists(f.get(), "params/lstm.weight_hh_l1_reverse", H5P_DEFAULT), 0);
  }

  write_checkpoint(d / "old.h5", sample());
  {
    H5Handle f = h5_file(H5Fopen((d / "old.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    for (const char* a : {"bidirectional", "pool", "dropout", "head_dropout"}) ASSERT_GE(H5Adelete(f.get(), a), 0) << a;
  }
  const Checkpoint old = read_checkpoint(d / "old.h5");
  EXPECT_FALSE(old.shape.bidirectional);
  EXPECT_EQ(old.shape.pool, Pool::Last);
  EXPECT_EQ(old.dropout.between, 0.0);
  EXPECT_EQ(old.dropout.head, 0.0);
  EXPECT_EQ(old.params, sample().params);
}

TEST(Checkpoint, DamagedTensorFailsItsChecksum) {
  TempDir d;
  write_checkpoint(d / "c.h5", sample());
  // Overwrite bytes of params/fc.bias in the file itself, as a disk or a copy would damage it.
  haddr_t offset = 0;
  {
    const hid_t f = H5Fopen((d / "c.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t ds = H5Dopen2(f, "params/fc.bias", H5P_DEFAULT);
    offset = H5Dget_offset(ds);
    H5Dclose(ds);
    H5Fclose(f);
  }
  ASSERT_NE(offset, HADDR_UNDEF);
  {
    std::fstream io(d / "c.h5", std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(offset) + 2);
    io.put('\x5a');
  }
  const std::string msg = user_error_of([&] { read_checkpoint(d / "c.h5"); });
  EXPECT_NE(msg.find("params/fc.bias"), std::string::npos) << msg;
  EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
  EXPECT_NE(msg.find("c.h5"), std::string::npos) << msg;
}

TEST(Checkpoint, TruncatedFileIsAUserError) {
  TempDir d;
  write_checkpoint(d / "c.h5", sample());
  fs::resize_file(d / "c.h5", fs::file_size(d / "c.h5") / 2);
  const std::string msg = user_error_of([&] { read_checkpoint(d / "c.h5"); });
  EXPECT_NE(msg.find("c.h5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("hint"), std::string::npos) << msg;
}

TEST(Rotation, KeepsTheNewestAndLatestNameIsTheNewest) {
  TempDir d;
  for (int64_t step : {10, 20, 30, 40, 50}) save_checkpoint(d.str(), sample(step), 2);
  const auto files = list_step_checkpoints(d.str());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].step, 40);
  EXPECT_EQ(files[1].step, 50);
  EXPECT_EQ(fs::path(files[1].path).filename(), "checkpoint-step000000050.h5");
  EXPECT_EQ(read_checkpoint(d / kLatestCheckpointName).step, 50);
  EXPECT_EQ(resolve_resume_path(d.str()), d / kLatestCheckpointName);
  fs::remove(d / kLatestCheckpointName);
  EXPECT_EQ(resolve_resume_path(d.str()), files[1].path) << "without checkpoint.h5 the newest step file";
  EXPECT_EQ(resolve_resume_path(d / "x.h5"), d / "x.h5") << "a file is taken as it is";
  // Leftovers of a killed write are removed by the next save.
  std::ofstream(d / "checkpoint-step000000060.h5.tmp.12345") << "partial";
  save_checkpoint(d.str(), sample(60), 2);
  EXPECT_FALSE(fs::exists(d / "checkpoint-step000000060.h5.tmp.12345"));
}

// A run killed between the rename of the step file and the switch of checkpoint.h5: the step file is complete
// and newer, so --resume of the folder takes it.
TEST(Rotation, AStepFileNewerThanCheckpointH5IsTheResumePoint) {
  TempDir d;
  save_checkpoint(d.str(), sample(10), 3);
  write_checkpoint(d / step_checkpoint_name(20), sample(20));   // as save_checkpoint leaves it when killed there
  EXPECT_EQ(read_checkpoint(d / kLatestCheckpointName).step, 10);
  EXPECT_EQ(resolve_resume_path(d.str()), d / step_checkpoint_name(20));
  save_checkpoint(d.str(), sample(30), 3);
  EXPECT_EQ(resolve_resume_path(d.str()), d / kLatestCheckpointName) << "the usual case: checkpoint.h5 is the newest";
}

// The writer under a full disk: a tmpfs too small for the checkpoint (root only; skipped otherwise).
TEST(Checkpoint, FullDiskIsAUserErrorAndLeavesTheOldFileAndNoTemporary) {
  TempDir d;
  const std::string mnt = d / "small";
  fs::create_directories(mnt);
  if (std::system(("mount -t tmpfs -o size=48k tmpfs " + mnt + " 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << "cannot mount a tmpfs on " << mnt << " (needs root)";
  struct Unmount {
    std::string dir;
    ~Unmount() { EXPECT_EQ(std::system(("umount " + dir).c_str()), 0); }
  } unmount{mnt};
  Checkpoint small = sample(10);
  write_checkpoint(mnt + "/c.h5", small);
  Checkpoint big = sample(20);   // H=64: about 3 x 17,000 floats, more than the space left
  big.shape.hidden = 64;
  const int64_t P = ParamLayout(big.shape).total();
  big.params.assign(static_cast<size_t>(P), 0.5f);
  big.opt_m.assign(static_cast<size_t>(P), 0.25f);
  big.opt_v.assign(static_cast<size_t>(P), 0.125f);
  const std::string msg = user_error_of([&] { write_checkpoint(mnt + "/c.h5", big); });
  EXPECT_NE(msg.find("no space left on device"), std::string::npos) << msg;
  EXPECT_NE(msg.find(mnt + "/c.h5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("hint: free space"), std::string::npos) << msg;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(mnt)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"c.h5"}) << "the temporary file was not removed";
  EXPECT_EQ(read_checkpoint(mnt + "/c.h5").params, small.params) << "the previous file is intact";
}

TEST(Rotation, EmptyFolderIsAUserError) {
  TempDir d;
  const std::string msg = user_error_of([&] { resolve_resume_path(d.str()); });
  EXPECT_NE(msg.find(d.str()), std::string::npos) << msg;
  EXPECT_NE(msg.find("checkpoint"), std::string::npos) << msg;
}

TEST(Resume, SameRunContinuesWhereItStopped) {
  const Checkpoint c = sample(34);
  const ResumePlan p = plan_resume("c.h5", c, target_for(c));
  EXPECT_EQ(p.step, 34);
  EXPECT_EQ(p.epoch, 3);
  EXPECT_EQ(p.step_in_epoch, 4);
  EXPECT_FALSE(p.layout_changed);
  EXPECT_FALSE(p.finished);
}

TEST(Resume, OtherRankCountWithTheSameGlobalBatchIsAllowedAndSaid) {
  const Checkpoint c = sample();
  ResumeTarget t = target_for(c);
  t.position.world_size = 4;
  t.position.batch_per_rank = 1;
  const ResumePlan p = plan_resume("c.h5", c, t);
  EXPECT_TRUE(p.layout_changed);
  EXPECT_NE(p.message.find("rank layout changed"), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("2 ranks x 2"), std::string::npos) << p.message;
}

TEST(Resume, WhatWouldChangeTheRunIsRefused) {
  const Checkpoint c = sample();
  ResumeTarget g = target_for(c);
  g.position.world_size = 3;
  g.position.batch_per_rank = 1;
  std::string msg = user_error_of([&] { plan_resume("c.h5", c, g); });
  EXPECT_NE(msg.find("global batch of 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--batch-per-rank"), std::string::npos) << msg;

  ResumeTarget lr = target_for(c);
  lr.effective_config = std::string(kConfig).replace(std::string(kConfig).find("lr = 0.01"), 9, "lr = 0.02");
  msg = user_error_of([&] { plan_resume("c.h5", c, lr); });
  EXPECT_NE(msg.find("--lr 0.01"), std::string::npos) << msg;

  ResumeTarget data = target_for(c);
  data.position.data_lengths_crc32 = 1;
  msg = user_error_of([&] { plan_resume("c.h5", c, data); });
  EXPECT_NE(msg.find("data set"), std::string::npos) << msg;

  ResumeTarget shape = target_for(c);
  shape.shape.hidden = 8;
  msg = user_error_of([&] { plan_resume("c.h5", c, shape); });
  EXPECT_NE(msg.find("H=4"), std::string::npos) << msg;

  ResumeTarget bidi = target_for(c);
  bidi.shape.bidirectional = true;
  msg = user_error_of([&] { plan_resume("c.h5", c, bidi); });
  EXPECT_NE(msg.find("bidirectional"), std::string::npos) << msg;

  ResumeTarget drop = target_for(c);
  drop.dropout.head = 0.2;
  msg = user_error_of([&] { plan_resume("c.h5", c, drop); });
  EXPECT_NE(msg.find("--head-dropout 0.2"), std::string::npos) << msg;

  ResumeTarget seed = target_for(c);
  seed.position.seed = 8;
  EXPECT_NE(user_error_of([&] { plan_resume("c.h5", c, seed); }).find("--seed"), std::string::npos);

  ResumeTarget shorter = target_for(c);
  shorter.position.epochs = 2;   // 20 steps < 30 done
  msg = user_error_of([&] { plan_resume("c.h5", c, shorter); });
  EXPECT_NE(msg.find("raise --epochs to at least 3"), std::string::npos) << msg;

  Checkpoint v1 = c;
  v1.resumable = false;
  v1.version = 1;
  msg = user_error_of([&] { plan_resume("old.h5", v1, target_for(c)); });
  EXPECT_NE(msg.find("no training position"), std::string::npos) << msg;
}

// --normalize none | feature | series: the mode is stored; files from before the modes hold mean and std exactly
// when trained with the switch, which now reads as `feature` (and without them as `none`).
TEST(Checkpoint, NormalizationModeRoundTripsAndOlderFilesRead) {
  TempDir d;
  Checkpoint series = sample();
  series.normalization = "series";
  series.feature_mean.clear();
  series.feature_std.clear();
  write_checkpoint(d / "series.h5", series);
  Checkpoint r = read_checkpoint(d / "series.h5");
  EXPECT_EQ(r.normalization, "series");
  EXPECT_TRUE(r.feature_mean.empty());

  Checkpoint none = series;
  none.normalization = "none";
  write_checkpoint(d / "none.h5", none);
  EXPECT_EQ(read_checkpoint(d / "none.h5").normalization, "none");

  const Checkpoint feature = sample();
  write_checkpoint(d / "old.h5", feature);
  r = read_checkpoint(d / "old.h5");
  EXPECT_EQ(r.normalization, "feature");
  EXPECT_EQ(r.feature_mean, feature.feature_mean);
  // An older file: /normalization holds mean and std but no mode attribute.
  const hid_t f = H5Fopen((d / "old.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  ASSERT_GE(H5Adelete_by_name(f, "normalization", "mode", H5P_DEFAULT), 0);
  H5Fclose(f);
  r = read_checkpoint(d / "old.h5");
  EXPECT_EQ(r.normalization, "feature");
  EXPECT_EQ(r.feature_std, feature.feature_std);

  // A mode this ragtrain does not know is a damaged (or newer) file, not a crash.
  Checkpoint odd = series;
  write_checkpoint(d / "odd.h5", odd);
  const hid_t g = H5Fopen((d / "odd.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(g, 0);
  ASSERT_GE(H5Adelete_by_name(g, "normalization", "mode", H5P_DEFAULT), 0);
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate_by_name(g, "normalization", "mode", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const char* value = "quantile";
  H5Awrite(a, type, &value);
  H5Aclose(a);
  H5Sclose(space);
  H5Tclose(type);
  H5Fclose(g);
  const std::string msg = user_error_of([&] { read_checkpoint(d / "odd.h5"); });
  EXPECT_NE(msg.find("quantile"), std::string::npos) << msg;
}

TEST(Resume, NormalizeTrueOfOlderRunsIsFeature) {
  Checkpoint c = sample();
  c.config = std::string(kConfig) + "normalize = true\n";
  ResumeTarget t = target_for(c);
  t.effective_config = std::string(kConfig) + "normalize = feature\n";
  EXPECT_NO_THROW(plan_resume("c.h5", c, t));
  t.effective_config = std::string(kConfig) + "normalize = series\n";
  const std::string msg = user_error_of([&] { plan_resume("c.h5", c, t); });
  EXPECT_NE(msg.find("--normalize feature"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--normalize series"), std::string::npos) << msg;
}

TEST(Resume, AtTheLastStepThereIsNothingToDo) {
  const Checkpoint c = sample(50);
  EXPECT_TRUE(plan_resume("c.h5", c, target_for(c)).finished);
  ResumeTarget longer = target_for(c);
  longer.position.epochs = 8;
  const ResumePlan p = plan_resume("c.h5", c, longer);
  EXPECT_FALSE(p.finished);
  EXPECT_NE(p.message.find("--epochs changed from 5 to 8"), std::string::npos) << p.message;
}

TEST(MetricsLog, ResumeKeepsRecordsThroughItsStep) {
  TempDir d;
  {
    std::ofstream f(d / "m.jsonl");
    f << R"({"event":"step","step":10,"loss":1})" << '\n'
      << R"({"event":"checkpoint","step":20})" << '\n'
      << R"({"event":"step","step":30,"loss":0.5})" << '\n'
      << R"({"event":"step","step":40,"lo)";   // torn by a kill
  }
  EXPECT_EQ(keep_records_through_step(d / "m.jsonl", 20), 2);
  std::ifstream f(d / "m.jsonl");
  std::string a, b, c;
  std::getline(f, a);
  std::getline(f, b);
  EXPECT_FALSE(std::getline(f, c));
  EXPECT_EQ(a, R"({"event":"step","step":10,"loss":1})");
  EXPECT_EQ(b, R"({"event":"checkpoint","step":20})");
  EXPECT_EQ(keep_records_through_step(d / "none.jsonl", 5), 0);
}

TEST(Scaling, EfficiencyAgainstTheFewestRanks) {
  std::vector<std::pair<std::string, Json>> recs = {
      {"b4.json", Json{{"world_size", 4}, {"sequences_per_second", 300.0}}},
      {"b1.json", Json{{"world_size", 1}, {"sequences_per_second", 100.0}, {"valid", true}}},
      {"b2.json", Json{{"world_size", 2}, {"sequences_per_second", 180.0}, {"valid", false}}}};
  const auto rows = scaling_rows(recs);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].ranks, 1);
  EXPECT_DOUBLE_EQ(rows[1].speedup, 1.8);
  EXPECT_DOUBLE_EQ(rows[1].efficiency, 0.9);
  EXPECT_DOUBLE_EQ(rows[2].efficiency, 0.75);
  EXPECT_FALSE(rows[1].valid);
  const std::string table = format_scaling_table(rows);
  EXPECT_NE(table.find("efficiency"), std::string::npos) << table;
  EXPECT_NE(table.find("0.750"), std::string::npos) << table;
  recs.push_back({"again.json", Json{{"world_size", 2}, {"sequences_per_second", 1.0}}});
  EXPECT_NE(user_error_of([&] { scaling_rows(recs); }).find("both ran on 2 ranks"), std::string::npos);
}

TEST(Checkpoint, EffectiveConfigParses) {
  const auto kv = parse_effective_config(kConfig);
  ASSERT_EQ(kv.size(), 6u);
  EXPECT_EQ(kv[0].first, "hidden");
  EXPECT_EQ(kv[3].second, "0.01");
}

// The best validation so far travels in the checkpoint (train --select, --early-stop), exactly; a checkpoint
// without one (no --val, or an older file) reads back as "none".
TEST(Checkpoint, BestSoFarRoundTrips) {
  TempDir d;
  Checkpoint c = sample();
  write_checkpoint(d / "none.h5", c);
  EXPECT_EQ(read_checkpoint(d / "none.h5").best.step, -1);
  c.best = BestSoFar{20, 3, 0.123456789012345, 2.0 / 3.0, 4};
  write_checkpoint(d / "best.h5", c);
  const BestSoFar b = read_checkpoint(d / "best.h5").best;
  EXPECT_EQ(b.step, 20);
  EXPECT_EQ(b.epoch, 3);
  EXPECT_EQ(b.val_loss, 0.123456789012345);
  EXPECT_EQ(b.val_accuracy, 2.0 / 3.0);
  EXPECT_EQ(b.validations_since, 4);
}

// eval/predict --checkpoint DIR: best.h5 when the run kept one, else checkpoint.h5; a file as it is.
TEST(Rotation, ARunFolderMeansItsBestModelElseItsLatest) {
  TempDir d;
  EXPECT_NE(user_error_of([&] { resolve_model_path(d.str()); }).find("neither best.h5 nor checkpoint.h5"),
            std::string::npos);
  save_checkpoint(d.str(), sample(10), 2);
  EXPECT_EQ(resolve_model_path(d.str()), d / kLatestCheckpointName);
  write_checkpoint(d / kBestCheckpointName, sample(5));
  EXPECT_EQ(resolve_model_path(d.str()), d / kBestCheckpointName);
  save_checkpoint(d.str(), sample(20), 1);
  EXPECT_TRUE(fs::exists(d / kBestCheckpointName)) << "rotation leaves best.h5 alone";
  EXPECT_EQ(resolve_model_path(d / "x.h5"), d / "x.h5");
}
