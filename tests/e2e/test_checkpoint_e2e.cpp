// Checkpoints, resume, signals and provenance through the real binary: a resumed run equals the uninterrupted
// one bit for bit on the same rank count (and to rounding on another), SIGUSR1/SIGTERM on any one rank stop
// every rank with a checkpoint and exit code 75 (also while the shard streams), a hard kill leaves a loadable
// checkpoint, bad resumes exit 2 on every rank, and summary.json / bench JSON carry provenance and a validity flag.
// Plus `ragtrain plot`.
#include <hdf5.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "e2e_util.hpp"

using namespace e2e;
namespace fs = std::filesystem;

namespace {

const char* kArgs = " --hidden 16 --lr 0.01 --clip 1 --log-every 10 --quiet";

// 240 training and 60 validation sequences, generated once per test process (removed when it exits) and
// copied into each test.
struct DataCache {
  std::string dir = fs::temp_directory_path() / ("ragtrain_e2e_ckpt_data_" + std::to_string(::getpid()));
  DataCache() {
    fs::create_directories(dir);
    const std::string common = " --features 6 --min-length 5 --max-length 40 --classes 3";
    EXPECT_EQ(run(0, "gen --out " + dir + "/train.h5 --sequences 240 --seed 1" + common).rc, 0);
    EXPECT_EQ(run(0, "gen --out " + dir + "/val.h5 --sequences 60 --seed 2" + common).rc, 0);
  }
  ~DataCache() { fs::remove_all(dir); }
};

void data(const Scratch& d) {
  static const DataCache cache;
  fs::copy_file(cache.dir + "/train.h5", d / "train.h5", fs::copy_options::overwrite_existing);
  fs::copy_file(cache.dir + "/val.h5", d / "val.h5", fs::copy_options::overwrite_existing);
}

// `ragtrain train` on the test's data; 4 epochs unless `extra` says otherwise.
std::string train(const Scratch& d, const std::string& out, const std::string& extra = "") {
  const std::string epochs = contains(extra, "--epochs") ? "" : " --epochs 4";
  return "train --data " + d / "train.h5" + " --val " + d / "val.h5" + " --out " + d / out + kArgs + epochs + " " + extra;
}

// The numbers a run ends with, compared exactly: JSON numbers print with 17 significant digits.
std::string result(const std::string& dir) {
  const auto s = read_json(dir + "/summary.json");
  return "train_loss=" + s["train_loss"].dump() + " val_loss=" + s["val_loss"].dump() +
         " params_crc32=" + s["validity"]["params_crc32"].dump();
}

// Loss records (step and epoch) of a metrics.jsonl, for comparing two runs' curves.
std::vector<std::string> loss_curve(const std::string& path) {
  std::vector<std::string> out;
  for (const auto& r : read_jsonl(path))
    if (r["event"] == "step") out.push_back(std::to_string(r["step"].get<int>()) + ":" + r["loss"].dump());
    else if (r["event"] == "epoch") out.push_back("epoch" + r["epoch"].dump() + ":" + r["train_loss"].dump() + "/" + r["val_loss"].dump());
  return out;
}

// A run in the background whose ranks can be signalled one by one: each rank records its pid, then its exit code.
class Background {
 public:
  Background(const Scratch& d, int np, const std::string& args, const std::string& tag) : dir_(d / tag) {
    fs::create_directories(dir_);
    const std::string inner = bin() + " " + args;
    const std::string rank_cmd = inner + " & p=$!; echo $p > " + dir_ + "/pid.$OMPI_COMM_WORLD_RANK; wait $p; rc=$?; " +
                                 record_exit_code(dir_, np);
    const std::string cmd = "(timeout " + std::to_string(static_cast<int>(120 * time_scale())) + " " + mpirun(np) +
                            " sh -c '" + rank_cmd + "'; echo $? > " + dir_ + "/mpirun.rc) > " + dir_ +
                            "/output.log 2>&1 &";
    np_ = np;
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  pid_t pid(int rank) const {
    const std::string f = dir_ + "/pid." + std::to_string(rank);
    for (int i = 0; i < 3000 * time_scale() && !fs::exists(f); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in(f);
    pid_t p = 0;
    in >> p;
    return p;
  }
  void signal(int rank, int sig) const { ASSERT_EQ(::kill(pid(rank), sig), 0) << "rank " << rank; }
  // SIGKILL to rank `first`, then to every other rank still running: the whole job killed, as a lost node or
  // `scancel --signal=KILL` ends it. Rank `first` alone would leave the others waiting for it in their next
  // collective until the watchdog ends them (--comm-timeout, 20 s by default): 20 s of each such test, spent
  // on nothing it checks.
  void kill_job(int first) const {
    signal(first, SIGKILL);
    for (int r = 0; r < np_; ++r)
      if (r != first) ::kill(pid(r), SIGKILL);   // no check: the rank may have ended already
  }
  // Waits for mpirun; returns its exit code and fills every rank's (-1: killed before recording one).
  int wait(std::vector<int>& rank_rcs) const {
    const std::string f = dir_ + "/mpirun.rc";
    for (int i = 0; i < 1200 * time_scale() && !fs::exists(f); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));   // the writer of mpirun.rc finishes its line
    rank_rcs.clear();
    for (int r = 0; r < np_; ++r) {
      std::ifstream in(dir_ + "/rc." + std::to_string(r));
      int v = -1;
      rank_rcs.push_back((in >> v) ? v : -1);
    }
    std::ifstream in(f);
    int rc = -1;
    in >> rc;
    return rc;
  }
  std::string output() const {
    std::ifstream in(dir_ + "/output.log");
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

 private:
  std::string dir_;
  int np_ = 0;
};

// Signals one rank of a 2-rank run with `sig`, then expects every rank to stop with exit 75, saying so.
void expect_stopped_by(const Background& run, int rank, int sig, const std::string& name) {
  run.signal(rank, sig);
  std::vector<int> rcs;
  EXPECT_EQ(run.wait(rcs), 75) << run.output();
  EXPECT_EQ(rcs, (std::vector<int>{75, 75})) << run.output();
  EXPECT_TRUE(contains(run.output(), "stopped by " + name)) << run.output();
}

// Waits until `needle` occurs `count` times in the file at `path` (at most `seconds` x time_scale()).
bool wait_for_text(const std::string& path, const std::string& needle, int count, double seconds) {
  for (int i = 0; i < static_cast<int>(seconds * time_scale() * 100); ++i) {
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    int n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    if (n >= count) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Waits until `path` exists (at most `seconds` x time_scale()).
bool wait_for(const std::string& path, double seconds) {
  for (int i = 0; i < static_cast<int>(seconds * time_scale() * 100) && !fs::exists(path); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return fs::exists(path);
}

}  // namespace

TEST(Checkpoints, ResumeOnTheSameRanksIsBitwiseIdentical) {
  Scratch d;
  data(d);
  // 240 sequences / (2 ranks x 2) = 60 steps per epoch, 240 steps; step checkpoints every 50 steps.
  const Result a = run(2, train(d, "a", "--batch-per-rank 2 --checkpoint-every 50 --keep 10"));
  ASSERT_EQ(a.rc, 0) << a.output;
  for (const char* f : {"checkpoint-step000000050.h5", "checkpoint-step000000100.h5", "checkpoint-step000000150.h5",
                        "checkpoint-step000000200.h5", "checkpoint-step000000240.h5", "checkpoint.h5"})
    EXPECT_TRUE(fs::exists(d / ("a/" + std::string(f)))) << f;

  // Step 50 is in the middle of epoch 1 and of a log interval: the accumulators must continue too.
  const Result b = run(2, train(d, "b", "--batch-per-rank 2 --resume " + d / "a/checkpoint-step000000050.h5"));
  ASSERT_EQ(b.rc, 0) << b.output;
  EXPECT_EQ(result(d / "b"), result(d / "a"));
  std::vector<std::string> from_a = loss_curve(d / "a/metrics.jsonl"), from_b = loss_curve(d / "b/metrics.jsonl");
  from_a.erase(from_a.begin(), from_a.begin() + 5);   // steps 10..50: before the resume point
  EXPECT_EQ(from_b, from_a);
  const auto s = read_json(d / "b/summary.json");
  EXPECT_EQ(s["resumed_from"]["step"], 50);
  EXPECT_EQ(s["valid"], true);

  // --keep: the two newest step files stay, checkpoint.h5 is the newest.
  ASSERT_EQ(run(2, train(d, "k", "--batch-per-rank 2 --checkpoint-every 50 --keep 2")).rc, 0);
  int step_files = 0;
  for (const auto& e : fs::directory_iterator(d / "k")) step_files += e.path().filename().string().rfind("checkpoint-step", 0) == 0;
  EXPECT_EQ(step_files, 2);
  EXPECT_TRUE(fs::exists(d / "k/checkpoint-step000000240.h5"));
}

TEST(Checkpoints, ResumeOnOtherRanksWithTheSameGlobalBatchContinuesAndSaysSo) {
  Scratch d;
  data(d);
  ASSERT_EQ(run(2, train(d, "a", "--batch-per-rank 2 --checkpoint-every 100")).rc, 0);
  const Result one = run(1, "train --data " + d / "train.h5" + " --val " + d / "val.h5" + " --out " + d / "one" +
                                " --hidden 16 --epochs 4 --lr 0.01 --clip 1 --log-every 10 --batch-per-rank 4 --resume " +
                                d / "a/checkpoint-step000000100.h5");
  ASSERT_EQ(one.rc, 0) << one.output;
  EXPECT_TRUE(contains(one.output, "rank layout changed")) << one.output;
  EXPECT_TRUE(contains(one.output, "2 ranks x 2 per rank")) << one.output;
  const auto a = read_json(d / "a/summary.json"), b = read_json(d / "one/summary.json");
  for (const char* k : {"train_loss", "val_loss"})
    EXPECT_NEAR(b[k].get<double>(), a[k].get<double>(), 1e-5 * std::fabs(a[k].get<double>())) << k;
}

// (A truncated file, another data set and each trajectory option are checked without MPI in test_checkpoint.cpp.)
TEST(Checkpoints, BadResumesExitTwoOnEveryRank) {
  Scratch d;
  data(d);
  ASSERT_EQ(run(2, train(d, "a", "--batch-per-rank 2 --checkpoint-every 100")).rc, 0);
  const std::string ckpt = d / "a/checkpoint-step000000100.h5";
  fs::copy_file(ckpt, d / "damaged.h5");
  {
    const hid_t f = H5Fopen((d / "damaged.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t ds = H5Dopen2(f, "params/lstm.weight_hh_l0", H5P_DEFAULT);
    const haddr_t off = H5Dget_offset(ds);
    H5Dclose(ds);
    H5Fclose(f);
    std::fstream io(d / "damaged.h5", std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(off) + 100);
    io.put('\x7f');
  }
  fs::copy_file(ckpt, d / "truncated.h5");
  fs::resize_file(d / "truncated.h5", fs::file_size(d / "truncated.h5") * 2 / 3);
  fs::create_directories(d / "damaged_dir");   // a run folder whose checkpoint.h5 is the damaged file
  fs::copy_file(d / "damaged.h5", d / "damaged_dir/checkpoint.h5");
  fs::create_directories(d / "blocked/checkpoint-step000000050.h5");   // a folder where a checkpoint must go

  struct Case {
    std::string name;
    int np;
    std::string args;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {"damaged tensor", 2, train(d, "o1", "--batch-per-rank 2 --resume " + d / "damaged.h5"),
       {"damaged.h5", "params/lstm.weight_hh_l0", "checksum", "hint:"}},
      {"truncated file", 2, train(d, "o2", "--batch-per-rank 2 --resume " + d / "truncated.h5"),
       {"truncated.h5", "truncated", "hint:"}},
      {"run folder with a damaged checkpoint.h5", 2, train(d, "o5", "--batch-per-rank 2 --resume " + d / "damaged_dir"),
       {"damaged_dir/checkpoint.h5", "checksum", "hint:"}},
      {"other global batch", 3, train(d, "o3", "--batch-per-rank 1 --resume " + ckpt),
       {"global batch of 4", "--batch-per-rank", "hint:"}},
      {"other learning rate", 2, train(d, "o4", "--batch-per-rank 2 --lr 0.02 --resume " + ckpt), {"--lr", "hint:"}},
      {"empty folder", 2, train(d, "o6", "--batch-per-rank 2 --resume " + d / "blocked/checkpoint-step000000050.h5"),
       {"no checkpoint.h5", "hint:"}},
      {"fresh run over another run's checkpoints", 2, train(d, "a", "--batch-per-rank 2"),
       {"earlier run", "--resume", "hint:"}},
      {"unwritable checkpoint", 2, train(d, "blocked", "--batch-per-rank 2 --checkpoint-every 50"),
       {"checkpoint-step000000050.h5", "hint:"}},
  };
  for (const Case& c : cases) {
    const Result r = run(c.np, c.args, 60);
    SCOPED_TRACE(c.name + ": ragtrain " + c.args + "\n" + r.output);
    EXPECT_EQ(r.rc, 2);
    for (size_t k = 0; k < r.rank_rcs.size(); ++k) EXPECT_EQ(r.rank_rcs[k], 2) << "rank " << k;
    for (const std::string& s : c.expect) EXPECT_TRUE(contains(r.output, s)) << "message lacks '" << s << "'";
  }
}

TEST(Signals, AnyRankSignalledStopsEveryRankWithACheckpointThenResumeFinishesTheSameRun) {
  Scratch d;
  data(d);
  const std::string args = "--batch-per-rank 2 --epochs 40 --signal-check-every 1";   // 2,400 steps
  ASSERT_EQ(run(2, train(d, "ref", args)).rc, 0);

  // SIGUSR1 to rank 1 only: both ranks agree at a step boundary, rank 0 saves, all exit 75. metrics.jsonl exists
  // once the inputs are read, long after main() installed the handlers: signalled then, the run has hardly begun,
  // however fast this machine is (where it stops does not matter: the result must be the same).
  Background first(d, 2, train(d, "run", args), "first");
  ASSERT_TRUE(wait_for(d / "run/metrics.jsonl", 30));
  expect_stopped_by(first, 1, SIGUSR1, "SIGUSR1");
  ASSERT_TRUE(fs::exists(d / "run/checkpoint.h5"));
  const Result e = run(1, "eval --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "val.h5");
  EXPECT_EQ(e.rc, 0) << e.output;

  // Resumed into the same folder, SIGTERM to rank 0 this time.
  Background second(d, 2, train(d, "run", args + " --resume " + d / "run"), "second");
  ASSERT_TRUE(wait_for_text(d / "run/metrics.jsonl", "\"event\":\"resume\"", 1, 30));
  expect_stopped_by(second, 0, SIGTERM, "SIGTERM");

  const Result third = run(2, train(d, "run", args + " --resume " + d / "run"));
  ASSERT_EQ(third.rc, 0) << third.output;
  EXPECT_EQ(result(d / "run"), result(d / "ref"));
  // metrics.jsonl kept every record: the same loss curve as the uninterrupted run, plus stop/resume events.
  EXPECT_EQ(loss_curve(d / "run/metrics.jsonl"), loss_curve(d / "ref/metrics.jsonl"));
  int stops = 0, resumes = 0;
  for (const auto& r : read_jsonl(d / "run/metrics.jsonl")) {
    stops += r["event"] == "stop";
    resumes += r["event"] == "resume";
  }
  EXPECT_EQ(stops, 2);
  EXPECT_EQ(resumes, 2);
}

// SIGTERM while the shard streams (a window of two steps, the background reader fetching the next ones): every rank
// stops at a step boundary with a checkpoint and exit 75, as in a resident run, and the resumed run, still streaming,
// ends with the uninterrupted streamed run's parameters to the bit.
TEST(Signals, SigtermWhileTheShardStreamsCheckpointsExits75AndResumeFinishesTheSameRun) {
  Scratch d;
  ASSERT_EQ(run(0, "gen --out " + d / "train.h5" + " --sequences 400 --features 5 --min-length 3 --max-length 40 "
                   "--seed 3 --quiet").rc, 0);   // 90 KiB a rank on 2 ranks
  const std::string args = " --data " + d / "train.h5" +
                           " --hidden 8 --batch-per-rank 3 --epochs 100 --max-memory 48K --signal-check-every 1" +
                           " --quiet";
  const Result ref = run(2, "train --out " + d / "ref" + args);
  ASSERT_EQ(ref.rc, 0) << ref.output;
  ASSERT_TRUE(read_json(d / "ref/summary.json")["streamed"].get<bool>()) << "the shard should not fit 48K";

  Background first(d, 2, "train --out " + d / "run" + args, "first");
  ASSERT_TRUE(wait_for(d / "run/metrics.jsonl", 30));
  expect_stopped_by(first, 0, SIGTERM, "SIGTERM");
  ASSERT_TRUE(fs::exists(d / "run/checkpoint.h5"));

  const Result resumed = run(2, "train --out " + d / "run" + args + " --resume " + d / "run");
  ASSERT_EQ(resumed.rc, 0) << resumed.output;
  const auto s = read_json(d / "run/summary.json");
  EXPECT_TRUE(s["streamed"].get<bool>());
  EXPECT_EQ(s["validity"]["params_crc32"], read_json(d / "ref/summary.json")["validity"]["params_crc32"]);
  EXPECT_EQ(result(d / "run"), result(d / "ref"));
}

TEST(Signals, HardKillAndSecondSignalLeaveALoadableCheckpoint) {
  Scratch d;
  data(d);
  // A checkpoint at every step: a kill at a random moment is likely to land inside a write.
  const std::string args = "--batch-per-rank 2 --epochs 40 --checkpoint-every 1 --keep 2";
  Background killed(d, 2, train(d, "run", args), "killed");
  ASSERT_TRUE(wait_for_text(d / "run/metrics.jsonl", "\"event\":\"checkpoint\"", 20, 60));
  killed.kill_job(0);   // rank 0 writes the checkpoints
  std::vector<int> rcs;
  EXPECT_NE(killed.wait(rcs), 0);
  Result e = run(1, "eval --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "val.h5");
  EXPECT_EQ(e.rc, 0) << e.output;

  // Two signals in a row: the second ends the rank at once, while rank 0 writes a checkpoint every step, and the
  // checkpoint on disk stays whole. The step-boundary check is off (--signal-check-every), so the first signal
  // cannot stop the run in good order first, and the two are 300 ms apart, two deliveries (back to back they merge
  // into one). Rank 0 then waits for rank 1 in a collective until its watchdog ends the job: after 5 s
  // (--comm-timeout), not 20.
  Background twice(d, 2,
                   train(d, "run", args + " --comm-timeout 5 --signal-check-every 1000000 --resume " + d / "run"),
                   "twice");
  ASSERT_TRUE(wait_for_text(d / "run/metrics.jsonl", "\"event\":\"resume\"", 1, 30));
  const pid_t p = twice.pid(1);
  ::kill(p, SIGUSR1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(p, SIGUSR1);
  EXPECT_NE(twice.wait(rcs), 0);
  ASSERT_EQ(rcs.size(), 2u);
  EXPECT_EQ(rcs[1], 128 + SIGUSR1) << twice.output();
  e = run(1, "eval --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "val.h5");
  EXPECT_EQ(e.rc, 0) << e.output;

  const Result done = run(2, train(d, "run", "--batch-per-rank 2 --epochs 40 --resume " + d / "run"));
  ASSERT_EQ(done.rc, 0) << done.output;
  EXPECT_EQ(read_json(d / "run/summary.json")["valid"], true);
}

TEST(Checkpoints, OpenUnderPyTorchNamesWithVersionAndChecksums) {
  Scratch d;
  data(d);
  // --checkpoint-minutes 0.0001 (6 ms of rank 0's clock): timed checkpoints, agreed on by both ranks.
  ASSERT_EQ(run(2, train(d, "a", "--batch-per-rank 2 --epochs 8 --checkpoint-minutes 0.0001")).rc, 0);
  int timed = 0;
  for (const auto& r : read_jsonl(d / "a/metrics.jsonl")) timed += r["event"] == "checkpoint" && r["reason"] == "minutes";
  EXPECT_GE(timed, 1);
  const hid_t f = H5Fopen((d / "a/checkpoint.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const std::vector<std::pair<std::string, std::vector<hsize_t>>> tensors = {
      {"params/lstm.weight_ih_l0", {64, 6}}, {"params/lstm.weight_hh_l0", {64, 16}}, {"params/lstm.bias_ih_l0", {64}},
      {"params/lstm.bias_hh_l0", {64}},      {"params/fc.weight", {3, 16}},         {"params/fc.bias", {3}}};
  for (const auto& [name, shape] : tensors) {
    const hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    ASSERT_GE(ds, 0) << name;
    const hid_t sp = H5Dget_space(ds);
    std::vector<hsize_t> dims(static_cast<size_t>(H5Sget_simple_extent_ndims(sp)));
    H5Sget_simple_extent_dims(sp, dims.data(), nullptr);
    EXPECT_EQ(dims, shape) << name;
    EXPECT_GT(H5Aexists(ds, "crc32"), 0) << name;
    H5Sclose(sp);
    H5Dclose(ds);
  }
  for (const char* attr : {"version", "step", "epoch", "rng_seed", "global_batch", "steps_per_epoch", "config", "checksum"})
    EXPECT_GT(H5Aexists(f, attr), 0) << attr;
  for (const char* obj : {"optimizer/m", "optimizer/v", "train_state"}) EXPECT_GT(H5Lexists(f, obj, H5P_DEFAULT), 0) << obj;
  int64_t version = 0;
  const hid_t a = H5Aopen(f, "version", H5P_DEFAULT);
  H5Aread(a, H5T_NATIVE_INT64, &version);
  H5Aclose(a);
  EXPECT_EQ(version, 2);
  H5Fclose(f);
}

TEST(Provenance, SummaryAndBenchRecordWhereAndHow) {
  Scratch d;
  data(d);
  ASSERT_EQ(run(2, train(d, "a", "--batch-per-rank 2")).rc, 0);
  const auto s = read_json(d / "a/summary.json");
  const auto& p = s["provenance"];
  EXPECT_TRUE(contains(p["command_line"].get<std::string>(), "train --data")) << p["command_line"];
  EXPECT_TRUE(contains(p["config"].get<std::string>(), "hidden = 16"));
  EXPECT_FALSE(p["git_revision"].get<std::string>().empty());
  EXPECT_TRUE(contains(p["versions"]["mpi"].get<std::string>(), "MPI")) << p["versions"];
  EXPECT_TRUE(p["versions"].contains("hdf5"));
  EXPECT_EQ(p["layout"]["world_size"], 2);
  EXPECT_EQ(p["layout"]["ranks"].size(), 2u);
  EXPECT_EQ(p["layout"]["nodes"], 1);
  EXPECT_EQ(s["per_rank"].size(), 2u);
  EXPECT_EQ(s["validity"]["ranks_agree"], true);
  EXPECT_EQ(s["validity"]["loss_falling"], true);
  for (const char* m : {"min", "median", "max"}) EXPECT_TRUE(s["timings"]["compute_s"].contains(m));

  const Result b = run(2, "bench --hidden 16 --features 6 --min-length 5 --max-length 40 --sequences 200 --steps 60 "
                          "--warmup 5 --lr 0.01 --out " + d / "bench.json");
  ASSERT_EQ(b.rc, 0) << b.output;
  const auto j = read_json(d / "bench.json");
  EXPECT_EQ(j["provenance"]["layout"]["world_size"], 2);
  EXPECT_TRUE(j["provenance"]["versions"].contains("mpi"));
  EXPECT_TRUE(j["validity"].contains("ranks_agree"));
  EXPECT_EQ(j["backend_description"], "cpu backend");   // the CUDA backend's names the GPU and the LSTM path
  EXPECT_TRUE(contains(b.output, "# validity:")) << b.output;
}

TEST(Plot, RunFolderAndBenchFolderBecomePngs) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot is not installed";
  Scratch d;
  data(d);
  ASSERT_EQ(run(2, train(d, "a", "--batch-per-rank 2")).rc, 0);
  const Result p = run(0, "plot " + d / "a");
  ASSERT_EQ(p.rc, 0) << p.output;
  auto is_png = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {0};
    in.read(magic, 4);
    return in && magic[1] == 'P' && magic[2] == 'N' && magic[3] == 'G';
  };
  for (const char* f : {"loss.png", "accuracy.png", "throughput.png", "ranks.png"})
    EXPECT_TRUE(is_png(d / ("a/plots/" + std::string(f)))) << f;
  // Redrawn (a live run): RUN/plots is plot's own folder, so its earlier drawings are replaced; a folder named
  // with --out is the user's, where an existing file needs --force.
  const Result again = run(0, "plot " + d / "a");
  EXPECT_EQ(again.rc, 0) << again.output;
  const Result named = run(0, "plot " + d / "a" + " --out " + d / "a/plots");
  EXPECT_EQ(named.rc, 2) << named.output;
  EXPECT_TRUE(contains(named.output, "--force")) << named.output;

  fs::create_directories(d / "scaling");
  for (int np : {1, 2})
    ASSERT_EQ(run(np, "bench --hidden 8 --features 6 --sequences 100 --min-length 5 --max-length 20 --steps 20 --warmup 2 "
                      "--out " + d / ("scaling/bench-np" + std::to_string(np) + ".json")).rc, 0);
  const Result s = run(0, "plot " + d / "scaling" + " --out " + d / "scaling");
  ASSERT_EQ(s.rc, 0) << s.output;
  EXPECT_TRUE(contains(s.output, "efficiency")) << s.output;
  EXPECT_TRUE(is_png(d / "scaling/scaling.png"));

  const Result none = run(0, "plot " + d.str() + " --quiet");
  EXPECT_EQ(none.rc, 2) << none.output;
  EXPECT_TRUE(contains(none.output, "no metrics.jsonl")) << none.output;
}

namespace {

// The step attribute of a checkpoint (-1 if it cannot be read).
int64_t step_of(const std::string& path) {
  int64_t step = -1;
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return -1;
  const hid_t a = H5Aopen(f, "step", H5P_DEFAULT);
  if (a >= 0) {
    H5Aread(a, H5T_NATIVE_INT64, &step);
    H5Aclose(a);
  }
  H5Fclose(f);
  return step;
}

// Names in `dir` that contain ".tmp." (temporary files of a write).
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (contains(e.path().filename().string(), ".tmp.")) out.push_back(e.path().filename().string());
  return out;
}

// Sets the test hook of the checkpoint writer (checkpoint.hpp) for the runs started while it lives: mpirun's
// local ranks inherit the environment.
class PauseHook {
 public:
  explicit PauseHook(const std::string& value) { ::setenv("RAGTRAIN_TEST_CHECKPOINT_PAUSE", value.c_str(), 1); }
  ~PauseHook() { ::unsetenv("RAGTRAIN_TEST_CHECKPOINT_PAUSE"); }
};

// A tmpfs of `size` mounted on `dir` for the guard's lifetime (root only); skipped() says why it is not.
class Tmpfs {
 public:
  Tmpfs(const std::string& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    const std::string cmd = "mount -t tmpfs -o size=" + size + " tmpfs " + dir + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) why_.append(buf, n);
    mounted_ = pclose(p) == 0;
    if (!mounted_) why_ = "cannot mount a tmpfs (needs root): " + cmd + ": " + why_;
  }
  ~Tmpfs() {
    if (mounted_) {
      EXPECT_EQ(std::system(("umount " + dir_).c_str()), 0) << "umount " << dir_;
    }
  }
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }

 private:
  std::string dir_, why_;
  bool mounted_ = false;
};

}  // namespace

// A SIGKILL that really lands inside a checkpoint write (rank 0's; the job's other rank is killed after it), twice,
// made deterministic by the writer's test hook (RAGTRAIN_TEST_CHECKPOINT_PAUSE): first half-way through the
// temporary file of step 50, then between the rename of the complete step-100 file and the switch of checkpoint.h5.
// Each time the previous checkpoint loads, and --resume of the folder continues from the newest complete one to the
// very result of an uninterrupted run.
TEST(Signals, SigkillInsideACheckpointWriteKeepsThePreviousOneAndResumeFinishesTheSameRun) {
  Scratch d;
  data(d);
  const std::string args = "--batch-per-rank 2 --checkpoint-every 10 --keep 20";   // 240 steps
  ASSERT_EQ(run(2, train(d, "ref", args)).rc, 0);
  std::vector<int> rcs;
  {
    PauseHook hook("50:write");
    Background killed(d, 2, train(d, "run", args), "write");
    ASSERT_TRUE(wait_for_text(d / "write/output.log", "paused in the write of the step 50 checkpoint", 1, 60))
        << killed.output();
    const std::vector<std::string> torn = temporaries(d / "run");
    ASSERT_EQ(torn.size(), 1u) << "the half-written temporary file of step 50";
    EXPECT_EQ(torn[0].rfind("checkpoint-step000000050.h5.tmp.", 0), 0u) << torn[0];
    killed.kill_job(0);
    EXPECT_NE(killed.wait(rcs), 0) << killed.output();
  }
  EXPECT_FALSE(fs::exists(d / "run/checkpoint-step000000050.h5"));
  EXPECT_EQ(step_of(d / "run/checkpoint.h5"), 40);
  Result e = run(1, "eval --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "val.h5");
  EXPECT_EQ(e.rc, 0) << e.output;
  {
    PauseHook hook("100:link");
    Background killed(d, 2, train(d, "run", args + " --resume " + d / "run"), "link");
    ASSERT_TRUE(wait_for_text(d / "link/output.log", "paused in the link of the step 100 checkpoint", 1, 60))
        << killed.output();
    killed.kill_job(0);
    EXPECT_NE(killed.wait(rcs), 0) << killed.output();
  }
  EXPECT_EQ(step_of(d / "run/checkpoint.h5"), 90) << "checkpoint.h5 was not switched yet";
  EXPECT_EQ(step_of(d / "run/checkpoint-step000000100.h5"), 100) << "the step file is complete";
  e = run(1, "eval --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "val.h5");
  EXPECT_EQ(e.rc, 0) << e.output;

  const Result done = run(2, train(d, "run", args + " --resume " + d / "run"));
  ASSERT_EQ(done.rc, 0) << done.output;
  nlohmann::json resumed;
  for (const auto& rec : read_jsonl(d / "run/metrics.jsonl"))
    if (rec["event"] == "resume") resumed = rec;
  EXPECT_EQ(resumed["step"], 100) << "resumed from the newest complete checkpoint: " << resumed;
  EXPECT_EQ(resumed["checkpoint"], d / "run/checkpoint-step000000100.h5");
  EXPECT_EQ(result(d / "run"), result(d / "ref"));
  EXPECT_TRUE(temporaries(d / "run").empty()) << "leftovers of the killed writes are removed by the next save";
}

// A full disk during a checkpoint write: --out on a small tmpfs that holds a few checkpoints but not all of them.
// Every rank exits 2 with a message naming the file and "no space left on device"; the previous checkpoint is
// intact and loads; no temporary file is left; with space freed, --resume finishes the same run.
TEST(Checkpoints, FullDiskStopsEveryRankKeepsThePreviousCheckpointAndLeavesNoTemporaryFile) {
  Scratch d;
  data(d);
  // A checkpoint of this model is ~35 KB (9 pages); 160 KiB hold four of them and metrics.jsonl, not a fifth.
  const Tmpfs disk(d / "disk", "160k");
  if (!disk.mounted()) GTEST_SKIP() << disk.why();
  const std::string out = d / "disk/run";
  const std::string args = "--batch-per-rank 2 --checkpoint-every 10";
  const std::string cmd = "train --data " + d / "train.h5" + " --val " + d / "val.h5" + " --out " + out + kArgs +
                          " --epochs 4 " + args;
  const Result r = run(2, cmd + " --keep 100");
  SCOPED_TRACE(r.output);
  EXPECT_EQ(r.rc, 2);
  for (size_t k = 0; k < r.rank_rcs.size(); ++k) EXPECT_EQ(r.rank_rcs[k], 2) << "rank " << k;
  const std::vector<std::string> names = [&] {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(out)) v.push_back(e.path().filename().string());
    return v;
  }();
  SCOPED_TRACE(::testing::PrintToString(names));
  EXPECT_TRUE(temporaries(out).empty()) << "the partial file was not removed";
  EXPECT_TRUE(contains(r.output, "no space left on device")) << "message lacks the reason";
  EXPECT_TRUE(contains(r.output, "hint: free space")) << "message lacks the hint";
  EXPECT_FALSE(fs::exists(out + "/summary.json"));

  // The file it could not write is named, and is the step after the newest complete one.
  std::vector<std::pair<int64_t, std::string>> steps;
  for (const auto& n : names)
    if (n.rfind("checkpoint-step", 0) == 0) steps.emplace_back(std::stoll(n.substr(15, 9)), out + "/" + n);
  std::sort(steps.begin(), steps.end());
  ASSERT_GE(steps.size(), 1u) << "the tmpfs is too small for even one checkpoint";
  const int64_t last = steps.back().first;
  char failed[64];
  std::snprintf(failed, sizeof failed, "checkpoint-step%09lld.h5", static_cast<long long>(last + 10));
  EXPECT_TRUE(contains(r.output, failed)) << "message does not name " << failed;
  EXPECT_TRUE(contains(r.output, "the last complete one is " + steps.back().second + " (step " + std::to_string(last)))
      << "the hint names the checkpoint that survived";
  EXPECT_EQ(step_of(out + "/checkpoint.h5"), last);
  const Result e = run(1, "eval --checkpoint " + out + "/checkpoint.h5 --data " + d / "val.h5");
  EXPECT_EQ(e.rc, 0) << e.output;

  // Space freed (all but the newest step file, which checkpoint.h5 shares), --resume finishes the same run as
  // one on an ample disk.
  for (size_t i = 0; i + 1 < steps.size(); ++i) fs::remove(steps[i].second);
  const Result resumed = run(2, cmd + " --keep 1 --resume " + out);
  ASSERT_EQ(resumed.rc, 0) << resumed.output;
  ASSERT_EQ(run(2, train(d, "ref", args)).rc, 0);
  EXPECT_EQ(result(out), result(d / "ref"));
}
