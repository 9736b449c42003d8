// Data safety through the real binary (issue 17, doc/reliability.md): every option that names an output, pointed
// at one of the command's inputs (also through a symlink, a hard link, another spelling), at a data set, at a
// checkpoint, and into a folder held by a running train, is refused with exit 2 and a message, and every file
// that existed before is byte-identical afterwards (nothing new appears either). --force replaces an ordinary
// file, never a data set by another kind of file, never a checkpoint. Two trains started together into one folder
// (1 and 2 ranks each): exactly one runs, the other names it, metrics.jsonl parses. A SIGKILLed run's lock does
// not block its --resume. `inspect --write-statistics` replaces the data file whole, or leaves it as it was.
#include <hdf5.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <thread>

#include "e2e_util.hpp"

using namespace e2e;
namespace fs = std::filesystem;

namespace {

const std::string kGen = " --sequences 40 --features 3 --min-length 3 --max-length 9 --classes 3 --quiet";
const std::string kModel = " --hidden 4 --quiet";

// Every regular file under `root` (links not followed) -> its bytes: "before" and "after" must be equal.
std::map<std::string, std::string> snapshot(const std::string& root, const std::string& skip = "") {
  std::map<std::string, std::string> files;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = fs::relative(it->path(), root).string();
    if (!skip.empty() && rel.rfind(skip, 0) == 0) continue;
    // FILE.locktest.N: made and removed by Open MPI's MPI-IO (OMPIO's sharedfp "lockedfile" component) while a
    // process opens FILE; a run opening its data in the background can leave one between two snapshots.
    if (rel.find(".locktest.") != std::string::npos) continue;
    if (it->is_symlink()) {
      files[rel] = "-> " + fs::read_symlink(it->path()).string();
    } else if (it->is_regular_file()) {
      std::ifstream in(it->path(), std::ios::binary);
      std::stringstream s;
      s << in.rdbuf();
      files[rel] = s.str();
    } else if (it->is_directory()) {
      files[rel + "/"] = "";
    }
  }
  return files;
}

// What differs between two snapshots, for the failure message.
std::string diff(const std::map<std::string, std::string>& a, const std::map<std::string, std::string>& b) {
  std::string out;
  for (const auto& [k, v] : a)
    if (!b.count(k)) out += " removed:" + k;
    else if (b.at(k) != v) out += " changed:" + k;
  for (const auto& [k, v] : b)
    if (!a.count(k)) out += " new:" + k;
  return out;
}

// The files every case starts from.
void make_inputs(const Scratch& d) {
  ASSERT_EQ(run(0, "gen --out " + d / "data.h5 --seed 1" + kGen).rc, 0);
  ASSERT_EQ(run(0, "gen --out " + d / "other.h5 --seed 2" + kGen).rc, 0);
  ASSERT_EQ(run(0, "train --data " + d / "data.h5 --out " + d / "run --epochs 1" + kModel).rc, 0);
  fs::copy_file(d / "run/checkpoint.h5", d / "ckpt.h5");
  fs::copy_file(repo_path("inputs/japanese-vowels/JapaneseVowels_TEST.ts"), d / "in.ts");
  std::ofstream(d / "note.txt") << "my notes\n";
  std::ofstream(d / "cfg.ini") << "seed = 3\n";
  fs::create_symlink(d / "data.h5", d / "link-data.h5");
  fs::create_symlink(d / "run/checkpoint.h5", d / "link-ckpt.h5");
  fs::create_hard_link(d / "in.ts", d / "hard-in.ts");
  fs::create_directories(d / "sub");
}

struct Case {
  std::string what;   // for the failure message
  int np;
  std::string args;
  std::vector<std::string> expect;   // words the message must hold
};

// Runs each case, expecting exit 2 on every rank, the words, and the folder unchanged.
void expect_refused(const Scratch& d, const std::vector<Case>& cases, const std::string& skip = "") {
  for (const Case& c : cases) {
    const auto before = snapshot(d.str(), skip);
    const Result r = run(c.np, c.args, 60);
    SCOPED_TRACE(c.what + ": ragtrain " + c.args + "\n" + r.output);
    EXPECT_EQ(r.rc, 2);
    for (size_t k = 0; k < r.rank_rcs.size(); ++k) EXPECT_EQ(r.rank_rcs[k], 2) << "rank " << k;
    EXPECT_TRUE(contains(r.output, "hint:"));
    for (const std::string& w : c.expect) EXPECT_TRUE(contains(r.output, w)) << "message lacks '" << w << "'";
    EXPECT_EQ(diff(before, snapshot(d.str(), skip)), "");
  }
}

// Starts `ragtrain ARGS` in the background (no mpirun) and returns its pid; the process is SIGKILLed when the
// returned guard goes, so a failed assertion never leaves a long run behind.
struct Background {
  pid_t pid = 0;
  ~Background() {
    if (pid > 0) ::kill(pid, SIGKILL);
  }
};
void start_background(const Scratch& d, const std::string& args, Background& bg) {
  const std::string pidfile = d / "background.pid";
  const std::string cmd = "sh -c 'echo $$ > " + pidfile + "; exec " + bin() + " " + args + "' >/dev/null 2>&1 &";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  for (int i = 0; i < 500 && bg.pid <= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream(pidfile) >> bg.pid;
  }
  ASSERT_GT(bg.pid, 0);
}

// Waits (time-scaled, at most `seconds`) until `path` exists, or with `gone` until it does not.
bool wait_for(const std::string& path, double seconds, bool gone = false) {
  const int rounds = static_cast<int>(50 * seconds * time_scale());
  for (int i = 0; i < rounds; ++i) {
    if (fs::exists(path) != gone) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return fs::exists(path) != gone;
}

std::string eval_args(const Scratch& d, const std::string& cmd, const std::string& out, const std::string& extra = "") {
  return cmd + " --checkpoint " + d / "run/checkpoint.h5" + " --data " + d / "data.h5" + " --out " + out +
         " --quiet " + extra;
}

}  // namespace

TEST(DataSafety, AnOutputThatIsAnInputIsRefusedEvenThroughAnotherName) {
  Scratch d;
  make_inputs(d);
  const std::string via_dots = d / "sub/../data.h5";
  expect_refused(
      d, {
             {"gen onto its config", 0, "gen --config " + d / "cfg.ini" + " --out " + d / "cfg.ini", {"--config", "--out"}},
             {"convert onto its input", 0, "convert " + d / "in.ts " + d / "in.ts", {"OUTPUT", "INPUT"}},
             {"convert onto a hard link of its input", 0, "convert " + d / "in.ts " + d / "hard-in.ts",
              {"same file", "INPUT"}},
             {"convert onto --class-names-from", 0,
              "convert " + d / "in.ts --force --class-names-from " + d / "data.h5 " + d / "data.h5",
              {"--class-names-from"}},
             {"train --out onto --data", 0, "train --data " + d / "data.h5 --out " + d / "data.h5" + kModel,
              {"--out", "--data"}},
             {"train --out onto a link to --data", 2, "train --data " + d / "data.h5 --out " + d / "link-data.h5" + kModel,
              {"same file", "--data"}},
             {"eval onto --data", 0, eval_args(d, "eval", d / "data.h5"), {"--out", "--data"}},
             {"eval onto --data, other spelling", 2, eval_args(d, "eval", via_dots), {"same file", "--data"}},
             {"eval onto --checkpoint by a link", 0, eval_args(d, "eval", d / "link-ckpt.h5"), {"--checkpoint"}},
             {"predict onto --data", 2, eval_args(d, "predict", d / "data.h5"), {"--out", "--data"}},
             {"predict onto --checkpoint", 0, eval_args(d, "predict", d / "run/checkpoint.h5", "--force"),
              {"--checkpoint", "--force never"}},
             {"predict onto a link to --data", 0, eval_args(d, "predict", d / "link-data.h5"), {"same file"}},
             {"bench onto --data", 0, "bench --steps 2 --warmup 0 --hidden 4 --data " + d / "data.h5 --out " + d / "data.h5",
              {"--data"}},
             {"simulate onto --data by a link", 0, "simulate --data " + d / "data.h5 --out " + d / "link-data.h5 --force",
              {"same file", "--data"}},
             {"plot onto the run's metrics", 0, "plot " + d / "run --out " + d / "run/metrics.jsonl", {"RUN"}},
         });
}

TEST(DataSafety, ADataSetOrACheckpointIsNeverReplacedByAnotherKindOfFileEvenWithForce) {
  Scratch d;
  make_inputs(d);
  std::vector<Case> cases;
  for (const std::string force : {"", " --force"}) {
    const std::string f = force.empty() ? "" : " (--force)";
    cases.push_back({"eval onto a data set" + f, 0, eval_args(d, "eval", d / "other.h5", force), {"data set", "never"}});
    cases.push_back({"predict onto a data set" + f, 2, eval_args(d, "predict", d / "other.h5", force), {"data set"}});
    cases.push_back({"bench onto a data set" + f, 0, "bench --steps 2 --warmup 0 --hidden 4 --out " + d / "other.h5" + force,
                     {"data set", "never"}});
    cases.push_back({"simulate onto a data set" + f, 0, "simulate --out " + d / "other.h5" + force, {"data set"}});
    cases.push_back({"train into a data set" + f, 0, "train --data " + d / "data.h5 --out " + d / "other.h5" + kModel + force,
                     {"data set", "not a folder"}});
    cases.push_back({"plot into a data set" + f, 0, "plot " + d / "run --out " + d / "other.h5" + force, {"data set"}});
    for (const std::string target : {"ckpt.h5", "link-ckpt.h5"}) {
      cases.push_back({"gen onto a checkpoint" + f, 0, "gen --out " + d / target + kGen + force, {"checkpoint", "never"}});
      cases.push_back({"convert onto a checkpoint" + f, 0, "convert " + d / "in.ts " + d / target + force,
                       {"checkpoint", "never"}});
      cases.push_back({"eval onto a checkpoint" + f, 0, eval_args(d, "eval", d / target, force), {"checkpoint"}});
      cases.push_back({"predict onto a checkpoint" + f, 0, eval_args(d, "predict", d / target, force), {"checkpoint"}});
      cases.push_back({"bench onto a checkpoint" + f, 0, "bench --steps 2 --warmup 0 --hidden 4 --out " + d / target + force,
                       {"checkpoint"}});
      cases.push_back({"simulate onto a checkpoint" + f, 0, "simulate --out " + d / target + force, {"checkpoint"}});
    }
    cases.push_back({"a fresh train into a run with checkpoints" + f, 2,
                     "train --data " + d / "data.h5 --out " + d / "run" + kModel + force, {"earlier run", "--resume"}});
    // --resume continues its own folder; another run's folder keeps its checkpoints and records.
    cases.push_back({"a resume of one run into another run's folder" + f, 2,
                     "train --data " + d / "data.h5 --out " + d / "run-b --epochs 2 --resume " + d / "run" + kModel + force,
                     {"earlier run"}});
    cases.push_back({"a fresh train whose --val is its --out's best.h5" + f, 0,
                     "train --data " + d / "data.h5 --val " + d / "val-in-out/best.h5 --out " + d / "val-in-out" + kModel +
                         force,
                     {"same file", "--val"}});
  }
  ASSERT_EQ(run(0, "train --data " + d / "data.h5 --out " + d / "run-b --epochs 1 --seed 5" + kModel).rc, 0);
  fs::create_directories(d / "best-only");
  fs::copy_file(d / "ckpt.h5", d / "best-only/best.h5");
  fs::create_directories(d / "val-in-out");
  fs::copy_file(d / "other.h5", d / "val-in-out/best.h5");
  cases.push_back({"a fresh train into a folder holding an earlier run's best.h5, without --force", 0,
                   "train --data " + d / "data.h5 --out " + d / "best-only" + kModel, {"best model of an earlier run", "--force"}});
  cases.push_back({"gen onto a data set without --force", 0, "gen --out " + d / "other.h5" + kGen, {"data set", "--force"}});
  cases.push_back({"convert onto a data set without --force", 0, "convert " + d / "in.ts " + d / "other.h5",
                   {"data set", "--force"}});
  cases.push_back({"eval onto an ordinary file without --force", 0, eval_args(d, "eval", d / "note.txt"), {"--force", "text"}});
  cases.push_back({"train over a run folder's metrics without --force", 0,
                   "train --data " + d / "data.h5 --out " + d / "runs-no-ckpt" + kModel, {"--force"}});
  fs::create_directories(d / "runs-no-ckpt");
  std::ofstream(d / "runs-no-ckpt/metrics.jsonl") << "{\"event\":\"step\",\"step\":1}\n";
  expect_refused(d, cases);

  // --force replaces an ordinary file, and a data set by a data set; the result is the new content.
  EXPECT_EQ(run(0, eval_args(d, "eval", d / "note.txt", "--force")).rc, 0);
  EXPECT_EQ(read_json(d / "note.txt")["sequences"], 40);
  EXPECT_EQ(run(0, "gen --out " + d / "other.h5 --force --sequences 41 --features 3 --classes 3 --quiet").rc, 0);
  const Result inspect = run(0, "inspect " + d / "other.h5");
  EXPECT_TRUE(contains(inspect.output, "41")) << inspect.output;
  EXPECT_EQ(run(0, "train --data " + d / "data.h5 --out " + d / "runs-no-ckpt --force --epochs 1" + kModel).rc, 0);
  std::stringstream metrics;
  metrics << std::ifstream(d / "runs-no-ckpt/metrics.jsonl").rdbuf();
  EXPECT_FALSE(contains(metrics.str(), "{\"event\":\"step\",\"step\":1}")) << "the old record stayed";
  EXPECT_TRUE(fs::exists(d / "runs-no-ckpt/checkpoint.h5"));
  EXPECT_FALSE(fs::exists(d / "runs-no-ckpt/ragtrain.lock")) << "the lock outlived its run";
  // ... and an earlier run's best.h5 (a run killed before its first checkpoint: train.sbatch restarts it afresh).
  EXPECT_EQ(run(0, "train --data " + d / "data.h5 --out " + d / "best-only --force --epochs 1" + kModel).rc, 0);
  EXPECT_TRUE(fs::exists(d / "best-only/checkpoint.h5"));
  EXPECT_FALSE(fs::exists(d / "best-only/best.h5")) << "the earlier run's best model would pass for this one's";
}

TEST(DataSafety, NothingWritesIntoAFolderHeldByARunningTrain) {
  Scratch d;
  make_inputs(d);
  // A long run in held/, started in the background; stopped with SIGTERM at the end (exit 75).
  Background holder;
  start_background(d, "train --data " + d / "data.h5" + " --out " + d / "held" + " --epochs 100000" + kModel, holder);
  ASSERT_TRUE(wait_for(d / "held/ragtrain.lock", 10));
  const pid_t pid = holder.pid;

  const std::string held = d / "held";
  const std::vector<std::string> holder_words = {"in use by a running training run", "pid " + std::to_string(pid)};
  auto with = [&](std::vector<std::string> w) {
    w.insert(w.end(), holder_words.begin(), holder_words.end());
    return w;
  };
  expect_refused(
      d,
      {
          {"gen into it", 0, "gen --out " + held + "/x.h5" + kGen, with({"--out"})},
          {"convert into it", 0, "convert " + d / "in.ts " + held + "/x.h5", with({"OUTPUT"})},
          {"a second train, 1 rank", 0, "train --data " + d / "data.h5 --out " + held + kModel, with({"--out"})},
          {"a second train, 2 ranks", 2, "train --data " + d / "data.h5 --out " + held + kModel, with({"--out"})},
          {"a second train, --force", 0, "train --data " + d / "data.h5 --out " + held + kModel + " --force", with({})},
          {"eval into it", 0, eval_args(d, "eval", held + "/e.json"), with({})},
          {"predict into it", 2, eval_args(d, "predict", held + "/p.csv", "--force"), with({})},
          {"bench into it", 0, "bench --steps 2 --warmup 0 --hidden 4 --out " + held + "/b.json", with({})},
          {"simulate into it", 0, "simulate --out " + held + "/s.json", with({})},
          {"plot into it", 0, "plot " + d / "run --out " + held, with({})},
      },
      "held");
  for (const char* f : {"x.h5", "e.json", "p.csv", "b.json", "s.json", "loss.png", "steps.tsv"})
    EXPECT_FALSE(fs::exists(held + "/" + f)) << f;
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_TRUE(wait_for(d / "held/ragtrain.lock", 10, /*gone=*/true)) << "a run stopped by SIGTERM released its lock";
  for (int i = 0; i < 500 && ::kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (::kill(pid, 0) != 0) holder.pid = 0;   // gone: nothing for the guard to kill (its pid may be reused)
}

// Two trains into one folder, started together: one runs to the end, the other is refused at once naming it.
void two_trains_together(int np) {
  Scratch d;
  make_inputs(d);
  const int epochs = 300;   // some seconds: the two start well within the first one's run
  const std::string args =
      "train --data " + d / "data.h5 --out " + d / "both --log-every 1 --epochs " + std::to_string(epochs) + kModel;
  Result a, b;
  std::thread ta([&] { a = run(np, args, 120); });
  std::thread tb([&] { b = run(np, args, 120); });
  ta.join();
  tb.join();
  SCOPED_TRACE("first:\n" + a.output + "\nsecond:\n" + b.output);
  EXPECT_TRUE((a.rc == 0 && b.rc == 2) || (a.rc == 2 && b.rc == 0)) << a.rc << " " << b.rc;
  const Result& loser = a.rc == 2 ? a : b;
  EXPECT_TRUE(contains(loser.output, "in use by a running training run"));
  for (int rc : loser.rank_rcs) EXPECT_EQ(rc, 2);
  int steps = 0;
  std::ifstream in(d / "both/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const auto rec = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(rec.is_discarded()) << "unparseable record: " << line;
    steps += rec["event"] == "step";
  }
  const int steps_per_epoch = 40 / np;
  EXPECT_EQ(steps, epochs * steps_per_epoch) << "one run's records, each step once";
  EXPECT_FALSE(fs::exists(d / "both/ragtrain.lock"));
}

TEST(DataSafety, TwoTrainsStartedTogetherIntoOneFolderOneRank) { two_trains_together(1); }
TEST(DataSafety, TwoTrainsStartedTogetherIntoOneFolderTwoRanks) { two_trains_together(2); }

TEST(DataSafety, ALockLeftByAKilledRunDoesNotBlockItsResumeAndForeignLocksAreNamed) {
  Scratch d;
  make_inputs(d);
  Background killed;
  start_background(d, "train --data " + d / "data.h5" + " --out " + d / "k --epochs 100000 --checkpoint-every 200" + kModel,
                   killed);
  ASSERT_TRUE(wait_for(d / "k/checkpoint.h5", 20));
  const pid_t pid = killed.pid;
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  for (int i = 0; i < 250 && ::kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (::kill(pid, 0) != 0) killed.pid = 0;
  ASSERT_TRUE(fs::exists(d / "k/ragtrain.lock")) << "SIGKILL leaves the lock behind";

  // The resume takes the stale lock over, says so, and trains one more epoch after the newest checkpoint (40
  // steps per epoch; step checkpoints every 200 steps fall on epoch boundaries).
  int64_t last_step = 0;
  for (const auto& e : fs::directory_iterator(d / "k")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("checkpoint-step", 0) == 0) last_step = std::max<int64_t>(last_step, std::stoll(name.substr(15, 9)));
  }
  ASSERT_GT(last_step, 0);
  const std::string epochs = std::to_string(last_step / 40 + 1);
  const Result r = run(1, "train --data " + d / "data.h5 --out " + d / "k --resume " + d / "k --epochs " + epochs +
                              " --checkpoint-every 200" + kModel);
  SCOPED_TRACE(r.output);
  EXPECT_EQ(r.rc, 0);
  EXPECT_TRUE(contains(r.output, "took over the run lock"));
  EXPECT_TRUE(contains(r.output, "that process is gone"));
  EXPECT_TRUE(fs::exists(d / "k/summary.json"));
  EXPECT_FALSE(fs::exists(d / "k/ragtrain.lock"));

  // Another host's lock cannot be judged from here: refused, naming it and how to clear it.
  fs::create_directories(d / "foreign");
  std::ofstream(d / "foreign/ragtrain.lock")
      << R"({"host":"node-that-is-not-here","pid":4242,"start_ticks":1,"boot_id":"x","started":"2026-01-01T00:00:00Z","command":"ragtrain train","slurm_job":"77 restart 0"})"
      << "\n";
  // The pid of a live process, but another start time: the pid was reused, the holder is gone.
  fs::create_directories(d / "reused");
  std::ofstream(d / "reused/ragtrain.lock") << R"({"host":")" << [] {
    char h[256] = {};
    ::gethostname(h, sizeof h - 1);
    return std::string(h);
  }() << R"(","pid":1,"start_ticks":999999999999,"boot_id":"","started":"2026-01-01T00:00:00Z","command":"old"})"
      << "\n";
  expect_refused(d, {{"a lock of another host", 0, "train --data " + d / "data.h5 --out " + d / "foreign" + kModel,
                      {"another host", "node-that-is-not-here", "pid 4242", "Slurm job 77", "remove"}}},
                 "k");
  const Result reused = run(0, "train --data " + d / "data.h5 --out " + d / "reused --epochs 1" + kModel);
  EXPECT_EQ(reused.rc, 0) << reused.output;
  EXPECT_TRUE(contains(reused.output, "took over")) << reused.output;
  EXPECT_FALSE(fs::exists(d / "reused/ragtrain.lock"));
}

// A refused train leaves nothing behind, not even the parents of a nested --out it created (its lock's folders).
TEST(DataSafety, ARefusedTrainRemovesTheFoldersItCreated) {
  Scratch d;
  ASSERT_EQ(run(0, "gen --out " + d / "data.h5 --seed 1" + kGen).rc, 0);
  const Result r = run(2, "train --data " + d / "data.h5 --out " + d / "x/y/z --epochs 1 --layers 1000000000" + kModel);
  EXPECT_EQ(r.rank_rcs, (std::vector<int>{2, 2})) << r.output;
  EXPECT_FALSE(fs::exists(d / "x")) << r.output;
  ASSERT_EQ(run(0, "train --data " + d / "data.h5 --out " + d / "x/y/z --epochs 1" + kModel).rc, 0);
  EXPECT_TRUE(fs::exists(d / "x/y/z/checkpoint.h5"));
}

namespace {

// Removes /statistics from a data file, as a file written by another tool would lack them.
void drop_statistics(const std::string& path) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  EXPECT_GE(H5Ldelete(f, "/statistics", H5P_DEFAULT), 0) << path;
  H5Fclose(f);
}

// Gives a folder back its owner's write permission at the end of the scope (before Scratch removes it), whatever
// the test asserted in between.
struct WritableAgain {
  std::string dir;
  ~WritableAgain() { fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add); }
};

}  // namespace

// `inspect --write-statistics` replaces the file whole (a copy in its folder, renamed over it), never in place: a
// kill midway left the file without its statistics, or with half of them. Afterwards the file is valid, with
// statistics that match its data, its mode kept and nothing else left in its folder. In a folder that cannot be
// written, while the file itself can (the in-place rewrite succeeded there), it stops with exit 2, naming the file,
// with a hint, and the folder is byte-identical. As root, who writes anywhere, that command runs as user nobody.
TEST(DataSafety, WriteStatisticsReplacesTheWholeFileOrNothing) {
  Scratch d;
  const std::string dir = d / "data", file = dir + "/train.h5";
  fs::create_directories(dir);
  ASSERT_EQ(run(0, "gen --out " + file + kGen).rc, 0);
  drop_statistics(file);
  const fs::perms mode = fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read;   // 0640
  fs::permissions(file, mode);
  const Result w = run(0, "inspect " + file + " --write-statistics");
  ASSERT_EQ(w.rc, 0) << w.output;
  EXPECT_TRUE(contains(w.output, "valid: yes")) << w.output;
  const Result after = run(0, "inspect " + file);
  EXPECT_EQ(after.rc, 0) << after.output;
  EXPECT_TRUE(contains(after.output, "stored, they match the data")) << after.output;
  EXPECT_EQ(fs::status(file).permissions(), mode);
  EXPECT_EQ(snapshot(dir).size(), 1u) << "a temporary file left beside the data";

  const bool root = ::geteuid() == 0;
  if (root && std::system("command -v setpriv >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "as root the read-only folder needs setpriv (util-linux) to run inspect as another user";
  drop_statistics(file);
  fs::permissions(file, root ? fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                   fs::perms::group_write | fs::perms::others_read | fs::perms::others_write
                             : mode);
  const WritableAgain restore{dir};
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);   // 0555
  const auto before = snapshot(dir);
  const std::string log = d / "readonly.log";
  const std::string as = root ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  const int status = std::system((as + bin() + " inspect " + file + " --write-statistics > " + log + " 2>&1").c_str());
  std::ifstream in(log);
  const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status << "\n" << out;
  EXPECT_TRUE(contains(out, file) && contains(out, "folder") && contains(out, "hint:")) << out;
  EXPECT_EQ(snapshot(dir), before) << "the file changed, or a temporary file was left, in a read-only folder";
}
