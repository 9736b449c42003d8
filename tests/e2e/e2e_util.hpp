// Helpers for end-to-end tests: run the ragtrain binary as a user would (under mpirun), capture output,
// record every rank's exit code, and make scratch folders.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace e2e {

inline std::string bin() {
  const char* b = std::getenv("RAGTRAIN_BIN");
  return std::filesystem::absolute(b ? b : "build/bin/ragtrain").string();
}

inline std::string repo_path(const std::string& rel) { return std::filesystem::absolute(rel).string(); }

// How much slower than a plain build this one runs: scripts/run-tests.sh sets RAGTRAIN_TEST_TIME_SCALE for
// sanitizer builds (ASan and LSan make every process several times slower), and time bounds scale with it.
inline double time_scale() {
  const char* s = std::getenv("RAGTRAIN_TEST_TIME_SCALE");
  const double v = s != nullptr ? std::atof(s) : 1.0;
  return v > 1.0 ? v : 1.0;
}

// Whether the ragtrain under test is built with AddressSanitizer (SANITIZE=address; detected as scripts/run-tests.sh
// does): its shadow memory and its quarantine of freed blocks move a process's peak RSS by far more than the bounds
// that the memory tests check, so those tests skip there.
inline bool binary_has_asan() {
  static const bool has = std::system(("ldd " + bin() + " 2>/dev/null | grep -q libasan").c_str()) == 0;
  return has;
}

struct Result {
  int rc = -1;                 // mpirun's (or the shell's) exit status
  std::vector<int> rank_rcs;   // every rank's own exit code, in rank order
  std::string output;          // stdout + stderr
  double seconds = 0;
};

// A scratch folder removed at the end of the test.
class Scratch {
 public:
  Scratch() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            (std::string("ragtrain_e2e_") + info->test_suite_name() + "_" + info->name() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~Scratch() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// Shell commands for a rank under mpirun (no single quotes: they go inside sh -c '...'): record the exit code $rc
// in DIR/rc.RANK and, when it is not 0, wait until all `np` ranks have recorded theirs before exiting: mpirun kills
// the remaining ranks as soon as one exits non-zero, and a fixed linger (a second, before) lost that race to a
// rank slowed by a busy machine. The wait is bounded (30 s x time_scale()) for a rank that died without a record.
inline std::string record_exit_code(const std::string& dir, int np) {
  const int tenths = static_cast<int>(300 * time_scale());
  return "echo $rc > " + dir + "/rc.$OMPI_COMM_WORLD_RANK; if [ $rc -ne 0 ]; then i=0; while [ $(ls " + dir +
         " | grep -c \"^rc\\.\") -lt " + std::to_string(np) + " ] && [ $i -lt " + std::to_string(tenths) +
         " ]; do sleep 0.1; i=$((i+1)); done; fi; exit $rc";
}

// The launcher of the e2e jobs whose ranks record their exit codes (record_exit_code): `mpirun -np NP`, without the
// grace of odls_base_sigkill_timeout (1 s by default) that mpirun gives, between SIGTERM and SIGKILL, the processes
// it ends after a rank exited non-zero. That grace made every failing job 1-2 s longer (`mpirun -np 1 sh -c 'exit
// 2'`: 2.1 s, 0.1 s without it), and most e2e jobs are meant to fail. It buys these tests nothing: no rank exits
// non-zero before every rank has recorded its exit code, so what mpirun still ends then are shells done with their
// ranks (or, after record_exit_code's bound, a rank that never recorded one, which the test reports as -1).
inline std::string mpirun(int np) {
  return "mpirun --oversubscribe --mca odls_base_sigkill_timeout 0 -np " + std::to_string(np);
}

// Runs `ragtrain ARGS` on `np` ranks (np = 0: without mpirun). Each rank writes its exit code to a file so
// that the test can check that every rank, not only the first, exited with the documented code.
inline Result run(int np, const std::string& args, int timeout_s = 120) {
  const std::string rcdir = std::filesystem::temp_directory_path() / ("ragtrain_rc_" + std::to_string(::getpid()) + "_" +
                                                                    std::to_string(std::rand()));
  std::filesystem::create_directories(rcdir);
  std::string inner = bin() + " " + args;
  std::string cmd;
  if (np == 0) {
    cmd = "timeout " + std::to_string(timeout_s) + " sh -c '" + inner + "; rc=$?; echo $rc > " + rcdir + "/rc.0; exit $rc'";
  } else {
    cmd = "timeout " + std::to_string(timeout_s) + " " + mpirun(np) + " sh -c '" +
          inner + "; rc=$?; " + record_exit_code(rcdir, np) + "'";
  }
  cmd += " 2>&1";
  Result r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  for (int k = 0; k < std::max(np, 1); ++k) {
    std::ifstream f(rcdir + "/rc." + std::to_string(k));
    int v = -1;
    if (f >> v) r.rank_rcs.push_back(v);
    else r.rank_rcs.push_back(-1);
  }
  std::filesystem::remove_all(rcdir);
  return r;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

inline bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

}  // namespace e2e
