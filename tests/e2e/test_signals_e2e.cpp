// Ctrl-C and stops during set-up, through the real binary started without a launcher (as a user types it): SIGINT
// does what SIGTERM does (checkpoint, exit 75, the folder's lock released), a second one ends the run at once, and
// a signal during set-up stops it before any step (exit 75, nothing saved). Plus the CLI answers that must not
// start MPI (help, --version, --print-config).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "e2e_util.hpp"

using namespace e2e;
namespace fs = std::filesystem;

namespace {

// `ragtrain ARGS` started directly (no mpirun, no shell) with `env` added, stdout+stderr to `log`.
class Plain {
 public:
  Plain(const std::string& args, const std::string& log, const std::vector<std::string>& env = {},
        bool sigint_ignored = false) {
    pid_ = ::fork();
    if (pid_ == 0) {
      for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
      FILE* f = std::freopen(log.c_str(), "w", stdout);
      if (f == nullptr || ::dup2(::fileno(stdout), 2) < 0) ::_exit(120);
      // As a shell gives a foreground command, or (ignored) a command started in the background of a script.
      ::signal(SIGINT, sigint_ignored ? SIG_IGN : SIG_DFL);
      ::execl("/bin/sh", "sh", "-c", ("exec " + bin() + " " + args).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~Plain() {   // a test that failed before wait(): the run must not outlive it
    if (pid_ > 0 && ::kill(pid_, SIGKILL) == 0) ::waitpid(pid_, nullptr, 0);
  }
  void signal(int sig) const { ASSERT_EQ(::kill(pid_, sig), 0); }
  // The exit code, or 128 + the signal that ended it (as a shell reports it); -1 after `seconds` (killed then,
  // unless `keep`).
  int wait(double seconds, bool keep = false) {
    for (int i = 0; i < static_cast<int>(seconds * time_scale() * 100); ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (keep) return -1;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return -1;
  }

 private:
  pid_t pid_ = -1;
};

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

bool wait_for_text(const std::string& path, const std::string& needle, double seconds) {
  for (int i = 0; i < static_cast<int>(seconds * time_scale() * 100); ++i) {
    if (contains(text_of(path), needle)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

void make_data(const Scratch& d) {
  ASSERT_EQ(run(0, "gen --out " + d / "train.h5" + " --sequences 240 --features 6 --min-length 5 --max-length 40 "
                   "--classes 3 --quiet").rc, 0);
}

std::string train(const Scratch& d, const std::string& extra) {
  return "train --data " + d / "train.h5" + " --out " + d / "run" + " --hidden 16 --log-every 10 --epochs 400 " + extra;
}

}  // namespace

TEST(CtrlC, SigintOnAPlainRunCheckpointsExits75ReleasesTheLockAndResumeContinues) {
  Scratch d;
  make_data(d);
  Plain run1(train(d, ""), d / "log1");
  ASSERT_TRUE(wait_for_text(d / "run/metrics.jsonl", "\"event\":\"step\"", 60)) << text_of(d / "log1");
  run1.signal(SIGINT);
  EXPECT_EQ(run1.wait(60), 75) << text_of(d / "log1");
  EXPECT_TRUE(contains(text_of(d / "log1"), "stopped by SIGINT")) << text_of(d / "log1");
  EXPECT_TRUE(fs::exists(d / "run/checkpoint.h5"));
  EXPECT_FALSE(fs::exists(d / "run/ragtrain.lock"));
  const Result e = run(0, "eval --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "train.h5");
  EXPECT_EQ(e.rc, 0) << e.output;
  // compare takes the stopped run (no summary.json) from its checkpoint and metrics.jsonl, and says it stopped.
  const Result c = run(0, "compare " + d / "run" + " --out " + d / "cmp.json");
  EXPECT_EQ(c.rc, 0) << c.output;
  EXPECT_TRUE(contains(c.output, "stopped by SIGINT at step")) << c.output;
  const nlohmann::json row = read_json(d / "cmp.json")["runs"][0];
  EXPECT_EQ(row["ranks"], 1);
  EXPECT_GT(row["steps"].get<int>(), 0);
  EXPECT_TRUE(row["train_loss"].is_number()) << row.dump();
}

TEST(CtrlC, ASecondSigintEndsTheRunAtOnce) {
  Scratch d;
  make_data(d);
  // No step-boundary check before the end: only the second signal can end this run early.
  Plain run1(train(d, "--signal-check-every 1000000"), d / "log");
  ASSERT_TRUE(wait_for_text(d / "run/metrics.jsonl", "\"event\":\"step\"", 60)) << text_of(d / "log");
  run1.signal(SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));   // two separate deliveries, as two key presses
  run1.signal(SIGINT);
  EXPECT_EQ(run1.wait(10), 128 + SIGINT) << text_of(d / "log");
}

TEST(CtrlC, ASigintIgnoredFromTheStartStaysIgnored) {
  Scratch d;
  make_data(d);
  Plain run1(train(d, ""), d / "log", {}, /*sigint_ignored=*/true);
  ASSERT_TRUE(wait_for_text(d / "run/metrics.jsonl", "\"event\":\"step\"", 60)) << text_of(d / "log");
  run1.signal(SIGINT);
  EXPECT_EQ(run1.wait(1.5, /*keep=*/true), -1) << "a background job's SIGINT stopped it\n" << text_of(d / "log");
  run1.signal(SIGTERM);   // the run still takes a stop request
  EXPECT_EQ(run1.wait(60), 75) << text_of(d / "log");
  EXPECT_TRUE(contains(text_of(d / "log"), "stopped by SIGTERM")) << text_of(d / "log");
}

TEST(CtrlC, SignalDuringSetUpStopsBeforeAnyStepWithoutACheckpoint) {
  Scratch d;
  make_data(d);
  // The hook holds set-up for 4 s before the data read, as reading a large data set would.
  Plain run1(train(d, ""), d / "log", {"RAGTRAIN_TEST_SETUP_PAUSE=4"});
  ASSERT_TRUE(wait_for_text(d / "log", "paused in set-up", 20)) << text_of(d / "log");
  const auto t0 = std::chrono::steady_clock::now();
  run1.signal(SIGTERM);
  EXPECT_EQ(run1.wait(60), 75) << text_of(d / "log");
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(waited, 15 * time_scale()) << "the pause is 4 s; the stop must follow it, not a step later";
  EXPECT_TRUE(contains(text_of(d / "log"), "stopped by SIGTERM during set-up (data read), before any step"))
      << text_of(d / "log");
  EXPECT_FALSE(fs::exists(d / "run/checkpoint.h5"));
  EXPECT_FALSE(fs::exists(d / "run/ragtrain.lock"));
  const std::string log = text_of(d / "run/metrics.jsonl");
  EXPECT_FALSE(contains(log, "\"event\":\"step\"")) << log;
}

TEST(CliWithoutMpi, HelpVersionAndPrintConfigDoNotStartMpi) {
  Scratch d;
  // An MPI that cannot start: MPI_Init fails with this component missing, so only answers without MPI succeed.
  const auto without_mpi = [](const std::string& args) {
    const std::string cmd = "OMPI_MCA_pml=no_such_component timeout 60 " + bin() + " " + args + " 2>&1";
    Result r;
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
    const int status = pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  };
  for (const std::string& args : {std::string("--help"), std::string("--version"), std::string("train --help"),
                                  std::string("help train"),
                                  "train --data " + d / "x.h5" + " --out " + d / "r" + " --print-config"}) {
    const Result r = without_mpi(args);
    EXPECT_EQ(r.rc, 0) << args << "\n" << r.output;
    EXPECT_FALSE(contains(r.output, "MPI_Init")) << args << "\n" << r.output;
  }
  // A command that works does start MPI, and fails there: the environment above does stop MPI.
  const Result r = without_mpi("inspect " + d / "x.h5");
  EXPECT_NE(r.rc, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "no such file")) << r.output;
}

TEST(CliWithoutMpi, PlainRagtrainIsAUsageErrorAndHelpCommandShowsThatCommand) {
  const Result none = run(0, "");
  EXPECT_EQ(none.rc, 2) << none.output;
  EXPECT_TRUE(contains(none.output, "usage: ragtrain COMMAND")) << none.output;
  EXPECT_TRUE(contains(none.output, "no command given")) << none.output;
  const Result help = run(0, "help train");
  EXPECT_EQ(help.rc, 0) << help.output;
  EXPECT_TRUE(contains(help.output, "usage: ragtrain train --data")) << help.output;
  const Result two = run(2, "help eval");
  EXPECT_EQ(two.rc, 0) << two.output;
  const size_t first = two.output.find("usage: ragtrain eval");
  ASSERT_NE(first, std::string::npos) << two.output;
  EXPECT_EQ(two.output.find("usage: ragtrain eval", first + 1), std::string::npos) << "printed by one rank only";
}
