// Output safety in one process: path identity through links, atomic writes that leave nothing partial, what an
// existing path holds, the run lock (held, released, stale, reused pid, another host), and metrics.jsonl records
// that stay whole with two writers on one file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ragtrain/checkpoint/run_lock.hpp"
#include "ragtrain/cli/output_guard.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/output_file.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/synthetic.hpp"
#include "ragtrain/metrics/metrics.hpp"

namespace fs = std::filesystem;
using namespace ragtrain;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("ragtrain_unit_safety_" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string host() {
  char h[256] = {};
  ::gethostname(h, sizeof h - 1);
  return h;
}

}  // namespace

TEST(OutputFile, SameFileSeesLinksAndOtherSpellings) {
  TempDir d;
  std::ofstream(d / "a.txt") << "a";
  std::ofstream(d / "b.txt") << "a";
  fs::create_symlink(d / "a.txt", d / "sym.txt");
  fs::create_hard_link(d / "a.txt", d / "hard.txt");
  fs::create_directories(d / "sub");
  EXPECT_TRUE(same_file(d / "a.txt", d / "sym.txt"));
  EXPECT_TRUE(same_file(d / "a.txt", d / "hard.txt"));
  EXPECT_TRUE(same_file(d / "a.txt", d / "sub/../a.txt"));
  EXPECT_FALSE(same_file(d / "a.txt", d / "b.txt"));      // equal bytes, another file
  EXPECT_FALSE(same_file(d / "a.txt", d / "missing.txt"));
}

TEST(OutputFile, AnUncommittedWriteLeavesThePreviousFileAndNoTemporary) {
  TempDir d;
  write_text_atomic(d / "out.json", "old\n");
  {
    AtomicOutput out(d / "out.json");
    std::ofstream(out.temp_path()) << "half of the new";
    // no commit(): an exception or a kill before the rename
  }
  EXPECT_EQ(slurp(d / "out.json"), "old\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path), fs::directory_iterator()), 1);
  write_text_atomic(d / "out.json", "new\n");
  EXPECT_EQ(slurp(d / "out.json"), "new\n");
  EXPECT_THROW(write_text_atomic(d / "no-such-folder/out.json", "x"), UserError);
}

TEST(OutputGuard, WhatIsAtTellsDataSetsCheckpointsRunFoldersAndFiles) {
  TempDir d;
  SyntheticSpec spec;
  spec.sequences = 4;
  spec.features = 2;
  spec.min_length = 2;
  spec.max_length = 3;
  spec.classes = 2;
  write_dataset(d / "data.h5", make_synthetic(spec));
  EXPECT_EQ(what_is_at(d / "data.h5").kind, Holding::DataSet);
  EXPECT_NE(what_is_at(d / "data.h5").what.find("data set"), std::string::npos);
  std::ofstream(d / "r.json") << "{\"a\": 1}\n";
  EXPECT_EQ(what_is_at(d / "r.json").kind, Holding::File);
  EXPECT_NE(what_is_at(d / "r.json").what.find("JSON"), std::string::npos);
  EXPECT_EQ(what_is_at(d / "none").kind, Holding::Nothing);
  fs::create_directories(d / "run");
  EXPECT_EQ(what_is_at(d / "run").kind, Holding::Folder);
  std::ofstream(d / "run/metrics.jsonl") << "\n";
  EXPECT_EQ(what_is_at(d / "run").kind, Holding::RunFolder);
}

TEST(RunLock, HeldUntilReleasedAndTheFolderItCreatedGoesIfEmpty) {
  TempDir d;
  {
    RunLock lock = RunLock::acquire(d / "run", "test");
    EXPECT_TRUE(lock.held());
    const LockStatus s = inspect_run_lock(d / "run");
    EXPECT_EQ(s.state, LockState::Live);
    EXPECT_EQ(s.holder.pid, ::getpid());
    EXPECT_EQ(s.holder.command, "test");
    EXPECT_THROW(RunLock::acquire(d / "run", "second"), UserError);
    EXPECT_THROW(refuse_if_held(s, "--out", d / "run"), UserError);
  }
  EXPECT_FALSE(fs::exists(d / "run")) << "an empty folder made for the lock is removed with it";
  fs::create_directories(d / "kept");
  { RunLock lock = RunLock::acquire(d / "kept", "test"); }
  EXPECT_TRUE(fs::exists(d / "kept")) << "a folder that existed before stays";
  EXPECT_FALSE(fs::exists(d / "kept/ragtrain.lock"));
}

TEST(RunLock, StaleLocksOfThisHostAreTakenOverOthersAreRefused) {
  TempDir d;
  auto write_lock = [&](const std::string& dir, const std::string& h, int64_t pid, uint64_t ticks) {
    fs::create_directories(d / dir);
    std::ofstream(d / (dir + "/ragtrain.lock")) << R"({"host":")" << h << R"(","pid":)" << pid << R"(,"start_ticks":)"
                                                << ticks << R"(,"started":"then","command":"old run"})" << "\n";
  };
  // pid 1 runs, but started at another time than the lock says: the pid was reused.
  write_lock("reused", host(), 1, 123456789012345);
  EXPECT_EQ(inspect_run_lock(d / "reused").state, LockState::Stale);
  { RunLock lock = RunLock::acquire(d / "reused", "new"); EXPECT_TRUE(lock.held()); }
  // A pid beyond pid_max never ran.
  write_lock("gone", host(), 1 << 30, 5);
  EXPECT_EQ(inspect_run_lock(d / "gone").state, LockState::Stale);
  // Another host: cannot be judged from here.
  write_lock("far", "another-host-" + host(), 1, 1);
  const LockStatus far = inspect_run_lock(d / "far");
  EXPECT_EQ(far.state, LockState::OtherHost);
  try {
    RunLock::acquire(d / "far", "new");
    ADD_FAILURE() << "took another host's lock";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("another host"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("remove"), std::string::npos) << e.hint();
  }
  std::ofstream(d / "far/ragtrain.lock") << "not json";
  EXPECT_EQ(inspect_run_lock(d / "far").state, LockState::Unreadable);
  EXPECT_THROW(RunLock::acquire(d / "far", "new"), UserError);
}

TEST(JsonlWriter, TwoWritersOnOneFileLeaveOnlyWholeRecords) {
  TempDir d;
  JsonlWriter a, b;
  a.open(d / "m.jsonl");
  b.open(d / "m.jsonl", /*append=*/true);
  const std::string big(20000, 'x');   // larger than any stream buffer: an ofstream would split it
  for (int i = 0; i < 200; ++i) {
    a.write(Json{{"writer", "a"}, {"i", i}, {"pad", big}});
    b.write(Json{{"writer", "b"}, {"i", i}, {"pad", big}});
  }
  std::ifstream in(d / "m.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    ASSERT_FALSE(Json::parse(line, nullptr, false).is_discarded()) << "line " << lines;
  }
  EXPECT_EQ(lines, 400);
}
