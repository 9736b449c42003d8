// Dead and stuck ranks, for real: a rank of a 3-rank training run is SIGKILLed or SIGSTOPped in the middle of
// training. The job must end within 30 s of that (x RAGTRAIN_TEST_TIME_SCALE under sanitizers), with a message naming
// rank 1, leave the last checkpoint loadable, and leave no process behind. (The watchdog's naming protocol on its own: tests/mpi/test_watchdog_mpi.cpp.)
#include <signal.h>
#include <sys/types.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <thread>

#include "e2e_util.hpp"

using namespace e2e;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// A training run in the background whose ranks record their pids (the shell execs ragtrain, so the pid is the
// rank's own and a signal reaches ragtrain itself); mpirun's exit code lands in mpirun.rc.
class Job {
 public:
  Job(const Scratch& d, int np, const std::string& args) : dir_(d / "job"), np_(np) {
    fs::create_directories(dir_);
    const std::string rank_cmd = "echo $$ > " + dir_ + "/pid.$OMPI_COMM_WORLD_RANK; exec " + bin() + " " + args;
    const std::string cmd = "(timeout " + std::to_string(static_cast<int>(150 * time_scale())) + " mpirun --oversubscribe -np " + std::to_string(np) + " sh -c '" + rank_cmd +
                            "'; echo $? > " + dir_ + "/mpirun.rc) > " + dir_ + "/output.log 2>&1 &";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  ~Job() {
    // Whatever the outcome, no rank of this test outlives it (a stopped one would otherwise linger).
    for (int r = 0; r < np_; ++r)
      if (const pid_t p = pid(r, 0); p > 0 && ::kill(p, 0) == 0) {
        ::kill(p, SIGKILL);
        ::kill(p, SIGCONT);
      }
  }
  pid_t pid(int rank, double wait_s = 30) const {
    const std::string f = dir_ + "/pid." + std::to_string(rank);
    for (const auto t0 = Clock::now(); !fs::exists(f) && Clock::now() - t0 < std::chrono::duration<double>(wait_s);)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in(f);
    pid_t p = 0;
    in >> p;
    return p;
  }
  // Waits (at most `seconds`) for mpirun to end; its exit code, or -1 if it did not end in time.
  int wait(double seconds) const {
    const std::string f = dir_ + "/mpirun.rc";
    for (const auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::duration<double>(seconds);) {
      std::ifstream in(f);
      int rc = -1;
      if (in >> rc) return rc;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  // The ranks still running `seconds` after the job ended (mpirun may exit a moment before its children).
  std::vector<int> survivors(double seconds) const {
    std::vector<int> alive;
    for (const auto t0 = Clock::now();; std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
      alive.clear();
      for (int r = 0; r < np_; ++r)
        if (const pid_t p = pid(r, 0); p > 0 && (::kill(p, 0) == 0 || errno != ESRCH)) alive.push_back(r);
      if (alive.empty() || Clock::now() - t0 > std::chrono::duration<double>(seconds)) return alive;
    }
  }
  std::string output() const {
    std::ifstream in(dir_ + "/output.log");
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

 private:
  std::string dir_;
  int np_;
};

// Waits until `needle` occurs `count` times in the file at `path` (at most `seconds`).
bool wait_for_text(const std::string& path, const std::string& needle, int count, double seconds) {
  for (const auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::duration<double>(seconds);) {
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    int n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    if (n >= count) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// 240 training and 60 validation sequences; 400 epochs of 80 steps on 3 ranks run for minutes, so the run is
// always in the middle of training when the signal comes. A checkpoint every 5 steps.
std::string train_args(const Scratch& d, const std::string& extra) {
  const std::string common = " --features 6 --min-length 5 --max-length 40 --classes 3";
  EXPECT_EQ(run(0, "gen --out " + d / "train.h5" + " --sequences 240 --seed 1" + common).rc, 0);
  EXPECT_EQ(run(0, "gen --out " + d / "val.h5" + " --sequences 60 --seed 2" + common).rc, 0);
  return "train --data " + d / "train.h5" + " --val " + d / "val.h5" + " --out " + d / "run" +
         " --hidden 16 --epochs 400 --quiet --checkpoint-every 5 --keep 2 " + extra;
}

// The run's newest checkpoint loads and evaluates.
void expect_checkpoint_intact(const Scratch& d) {
  ASSERT_TRUE(fs::exists(d / "run/checkpoint.h5"));
  const Result e = run(1, "eval --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "val.h5");
  EXPECT_EQ(e.rc, 0) << e.output;
}

}  // namespace

TEST(Faults, KilledRankEndsTheJobWithin30sNamingItAndTheCheckpointLoads) {
  Scratch d;
  Job job(d, 3, train_args(d, ""));
  ASSERT_TRUE(wait_for_text(d / "run/metrics.jsonl", "\"event\":\"checkpoint\"", 3, 60 * time_scale())) << job.output();
  ASSERT_EQ(::kill(job.pid(1), SIGKILL), 0);
  const auto killed = Clock::now();
  const int rc = job.wait(60 * time_scale());
  const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  std::printf("[ INFO     ] SIGKILL of rank 1 -> job ended after %.1f s, mpirun exit code %d\n", seconds, rc);
  EXPECT_NE(rc, -1) << "the job did not end within " << 60 * time_scale() << " s of the kill\n" << job.output();
  EXPECT_LT(seconds, 30.0 * time_scale()) << job.output();
  EXPECT_NE(rc, 0) << job.output();
  // Open MPI's own failure handling names the rank: "mpirun noticed that process rank 1 ... exited on signal 9".
  EXPECT_TRUE(contains(job.output(), "process rank 1 ")) << job.output();
  EXPECT_TRUE(contains(job.output(), "signal 9")) << job.output();
  EXPECT_EQ(job.survivors(5), std::vector<int>{}) << job.output();
  expect_checkpoint_intact(d);
}

TEST(Faults, StoppedRankIsNamedByTheWatchdogWithin30sAndTheCheckpointLoads) {
  Scratch d;
  Job job(d, 3, train_args(d, "--comm-timeout 5"));
  ASSERT_TRUE(wait_for_text(d / "run/metrics.jsonl", "\"event\":\"checkpoint\"", 3, 60 * time_scale())) << job.output();
  ASSERT_EQ(::kill(job.pid(1), SIGSTOP), 0);
  const auto stopped = Clock::now();
  const int rc = job.wait(60 * time_scale());
  const double seconds = std::chrono::duration<double>(Clock::now() - stopped).count();
  std::printf("[ INFO     ] SIGSTOP of rank 1 (--comm-timeout 5) -> job ended after %.1f s, mpirun exit code %d\n",
              seconds, rc);
  EXPECT_NE(rc, -1) << "the job did not end within " << 60 * time_scale() << " s of the stop\n" << job.output();
  EXPECT_LT(seconds, 30.0 * time_scale()) << job.output();
  // Not before the time-out: a stopped rank is only declared missing once --comm-timeout has passed.
  EXPECT_GE(seconds, 5.0) << job.output();
  EXPECT_EQ(rc, 76) << "kExitPeerFailure\n" << job.output();   // MPI_Abort's code is mpirun's exit code
  // Rank 2, its right neighbour, asked it and got no answer.
  EXPECT_TRUE(contains(job.output(), "ragtrain: error (rank 2 on ")) << job.output();
  EXPECT_TRUE(contains(job.output(), "rank 1 (on ")) << job.output();
  EXPECT_TRUE(contains(job.output(), "within 5 s and does not answer: it died or is stuck")) << job.output();
  EXPECT_TRUE(contains(job.output(), "--resume")) << job.output();
  EXPECT_EQ(job.survivors(10), std::vector<int>{}) << job.output();   // the stopped rank too
  expect_checkpoint_intact(d);
}
