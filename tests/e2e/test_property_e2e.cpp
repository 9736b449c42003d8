// Property of the command line: any combination of option values, for every subcommand, on small files, ends
// with exit code 0 or 2 on every rank — never 3 (an internal error: a user mistake reported as a bug), a signal
// or a hang. The options are read from each subcommand's --help (so new options are drawn too, and options a
// subcommand refuses are not drawn for it); values come from small pools of values that are valid on their own
// (the combinations, the files they name and a few missing files are where the user mistakes are). Deterministic:
// RAGTRAIN_PROPERTY_SEED (default below) and RAGTRAIN_PROPERTY_CASES (per subcommand) choose the cases; a failure
// prints the command line to run again.
#include <filesystem>
#include <map>
#include <random>
#include <regex>
#include <set>

#include "e2e_util.hpp"

using namespace e2e;

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kDefaultSeed = 20261203;
constexpr int kDefaultCasesPerCommand = 6;   // 60 runs (10 subcommands): about a minute on a busy 2-core machine

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// An option as `ragtrain CMD --help` lists it: a switch, or a value with its default ("" when it has none).
struct OptionSpec {
  std::string name;
  bool is_switch = false;
  std::string default_value;
};

std::vector<OptionSpec> options_of(const std::string& cmd) {
  const Result h = run(0, cmd + " --help");
  EXPECT_EQ(h.rc, 0) << h.output;
  std::vector<OptionSpec> out;
  // "  --hidden arg (=50)   ...", "  --data FILE.h5   ...", "  --quiet   ..." (help text starts after 2+ spaces)
  const std::regex line(R"(^  --([a-z0-9-]+)(?: ([A-Za-z0-9._|]+)(?: \(=([^)]*)\))?)?(?:  |$))");
  std::istringstream in(h.output);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (!std::regex_search(l, m, line) || m[1] == "help") continue;
    out.push_back({m[1].str(), !m[2].matched, m[3].matched ? m[3].str() : ""});
  }
  EXPECT_GT(out.size(), 3u) << "no options parsed from `ragtrain " << cmd << " --help`:\n" << h.output;
  return out;
}

// Small files every case draws from, made once per test binary (a few seconds).
class Files {
 public:
  static const Files& get() {
    static const Files files;
    return files;
  }
  std::string dir() const { return dir_.string(); }
  std::string operator/(const std::string& name) const { return (dir_ / name).string(); }
  ~Files() { fs::remove_all(dir_); }

 private:
  Files() : dir_(fs::temp_directory_path() / ("ragtrain_property_" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "empty");
    const std::string shape = " --features 3 --min-length 2 --max-length 10 --quiet";
    must("gen --out " + *this / "data.h5" + " --sequences 24 --classes 3 --seed 1" + shape);
    must("gen --out " + *this / "val.h5" + " --sequences 12 --classes 3 --seed 2" + shape);
    must("gen --out " + *this / "reg.h5" + " --sequences 16 --task regression --outputs 2 --seed 3" + shape);
    must("train --data " + *this / "data.h5" + " --val " + *this / "val.h5" + " --out " + *this / "run" +
         " --hidden 4 --epochs 2 --batch-per-rank 4 --checkpoint-every 3 --quiet");
    must("train --data " + *this / "reg.h5" + " --out " + *this / "regrun" + " --hidden 3 --epochs 1 --quiet");
    fs::create_directories(dir_ / "bench");
    must("bench --steps 2 --warmup 1 --sequences 8 --features 2 --min-length 2 --max-length 6 --hidden 3 --out " +
         *this / "bench/b.json");
    // A CSV folder with its labels, a small valid .ts file and config files (one with an unknown name).
    fs::create_directories(dir_ / "csv");
    std::ofstream labels(*this / "labels.csv");
    labels << "file,kind\n";
    for (int i = 0; i < 6; ++i) {
      std::ofstream f(*this / ("csv/s" + std::to_string(i) + ".csv"));
      for (int t = 0; t < 2 + i; ++t) f << t * 0.5 << "," << (i % 2 ? -t : t) << "\n";
      labels << "s" << i << ".csv," << (i % 2 ? "down" : "up") << "\n";
    }
    std::ofstream(*this / "small.ts") << "@problemName Small\n@univariate false\n@dimensions 2\n"
                                         "@classLabel true a b\n@data\n1.0,2.0,3.0:4.0,5.0,6.0:a\n"
                                         "1.5,2.5:3.5,4.5:b\n0.5,1.0,1.5,2.0:1.0,1.0,1.0,1.0:a\n";
    std::ofstream(*this / "good.ini") << "hidden = 3\nepochs = 1\nquiet = true\n";
    std::ofstream(*this / "unknown.ini") << "no-such-option = 1\n";
  }
  void must(const std::string& args) const {
    const Result r = run(0, args);
    if (r.rc != 0) ADD_FAILURE() << "fixture `ragtrain " << args << "` exited " << r.rc << ":\n" << r.output;
  }
  fs::path dir_;
};

// The values drawn for option `opt` of `cmd`, each valid on its own; `out` is a fresh path of this case.
std::vector<std::string> pool(const std::string& cmd, const OptionSpec& opt, const Files& f, const std::string& out) {
  const std::string& o = opt.name;
  const std::string missing = f / "missing.h5";
  if (o == "data") {
    if (cmd == "inspect") return {f / "data.h5", f / "reg.h5", f / "run/checkpoint.h5", f / "small.ts", missing};
    return {f / "data.h5", f / "data.h5", f / "val.h5", f / "reg.h5", missing};
  }
  if (o == "val") return {f / "val.h5", f / "val.h5", f / "reg.h5", f / "data.h5", missing};
  if (o == "out") {
    if (cmd == "gen") return {out + ".h5", out + ".h5", f / "missing-dir/x.h5"};
    if (cmd == "train" || cmd == "plot") return {out, out, f / "run/checkpoint.h5"};
    if (cmd == "predict") return {out + ".csv"};
    return {out + ".json", out + ".json", f / "missing-dir/x.json"};
  }
  if (o == "run") return {f / "run", f / "run", f / "bench", f / "empty", f / "missing-dir"};
  if (o == "runs") return {f / "run", f / "run " + f / "regrun", f / "regrun", f / "bench", f / "empty", f / "missing-dir"};
  if (o == "trace") return {out + "-trace.json", out + "-trace.json", f / "missing-dir/t.json"};
  if (o == "checkpoint") return {f / "run/checkpoint.h5", f / "run/checkpoint.h5", f / "run/checkpoint.h5",
                                 f / "regrun/checkpoint.h5", f / "data.h5", missing};
  if (o == "init-from") return {f / "run/checkpoint.h5", f / "regrun/checkpoint.h5", missing};
  if (o == "resume") return {f / "run", f / "run/checkpoint.h5", f / "regrun", f / "empty", missing};
  if (o == "input") return {f / "small.ts", f / "csv", repo_path("tests/fixtures/byod/seq_int_labels.npz"),
                            repo_path("tests/fixtures/byod/values_regression.npz"),
                            repo_path("tests/fixtures/byod/positional.npz"),
                            repo_path("tests/fixtures/byod/fortran.npz"),
                            repo_path("tests/fixtures/bad/ragged_channels.ts"), f / "missing.ts"};
  if (o == "output") return {out + ".h5", out + ".h5", f / "missing-dir/x.h5"};
  if (o == "labels") return {f / "labels.csv", f / "labels.csv", f / "labels.csv", f / "missing.csv"};
  if (o == "class-names-from") return {f / "data.h5", f / "missing.h5"};
  if (o == "config") return {f / "good.ini", f / "unknown.ini", f / "missing.ini"};
  static const std::map<std::string, std::vector<std::string>> values = {
      {"sequences", {"1", "3", "16"}},       {"features", {"1", "2", "3"}},
      {"min-length", {"1", "2", "5"}},       {"max-length", {"1", "6", "12"}},
      {"classes", {"2", "3", "5"}},          {"task", {"classification", "regression"}},
      {"outputs", {"1", "2"}},               {"seed", {"0", "1", "987654321"}},
      {"steps", {"1", "2"}},                 {"warmup", {"0", "1"}},
      {"layers", {"1", "2"}},                {"hidden", {"1", "3", "8"}},
      {"epochs", {"1", "2"}},                {"batch-per-rank", {"1", "4", "64"}},
      {"schedule", {"balanced", "random"}},  {"ranks", {"1", "2,8", "3,1000"}},
      {"lengths", {"uniform:1:10", "uniform:4:4", "lognormal:8:0.5"}},
      {"sequences-per-rank", {"1", "3"}},    {"optimizer", {"sgd", "adam", "adamw"}},
      {"lr", {"0.001", "0.1", "3"}},         {"momentum", {"0", "0.9"}},
      {"beta1", {"0", "0.9"}},               {"beta2", {"0", "0.999"}},
      {"eps", {"1e-08", "1"}},               {"weight-decay", {"0", "0.1"}},
      {"clip", {"0", "0.5"}},                {"warmup-steps", {"0", "2", "100"}},
      {"lr-decay", {"none", "linear", "cosine"}},
      {"lr-final-fraction", {"0", "0.5", "1"}},
      {"log-every", {"1", "3"}},             {"checkpoint-every", {"0", "1", "2"}},
      {"checkpoint-minutes", {"0", "0.001"}},
      {"signal-check-every", {"1", "4"}},    {"keep", {"1", "3"}},
      {"device", {"cpu", "cpu", "auto", "cuda"}},
      {"max-memory", {"auto", "8G", "1M", "64K"}},
      {"comm-timeout", {"0", "60"}},         {"on-nonfinite", {"stop", "skip"}},
      {"normalize", {"none", "feature", "series"}},
      {"pool", {"last", "mean", "max"}},     {"dropout", {"0", "0.3"}},
      {"head-dropout", {"0", "0.5"}},
  };
  if (auto it = values.find(o); it != values.end()) return it->second;
  // An option added since this list was written: its default, and small numbers beside a numeric default.
  if (opt.default_value.empty()) return {};
  if (std::regex_match(opt.default_value, std::regex("-?[0-9.e+-]+"))) return {opt.default_value, "0", "1", "2"};
  return {opt.default_value};
}

// Options that every case of `cmd` sets (to small values: the defaults are sized for real runs), and the
// positional arguments the subcommand takes.
const std::set<std::string>& always(const std::string& cmd) {
  static const std::map<std::string, std::set<std::string>> m = {
      {"gen", {"out", "sequences", "features", "min-length", "max-length"}},
      {"train", {"data", "out", "hidden", "epochs"}},
      {"eval", {"checkpoint", "data"}},
      {"predict", {"checkpoint", "data", "out"}},
      {"bench", {"steps", "warmup", "sequences", "features", "min-length", "max-length", "hidden"}},
      {"simulate", {"ranks", "sequences-per-rank", "epochs", "lengths"}},
  };
  static const std::set<std::string> none;
  auto it = m.find(cmd);
  return it == m.end() ? none : it->second;
}
std::vector<std::string> positionals(const std::string& cmd) {
  if (cmd == "convert") return {"input", "output"};
  if (cmd == "inspect") return {"data"};
  if (cmd == "plot") return {"run"};
  if (cmd == "compare") return {"runs"};
  return {};
}

struct Case {
  std::string args;
  int np = 0;
};

Case draw(const std::string& cmd, const std::vector<OptionSpec>& opts, std::mt19937_64& rng, const Files& f,
          const std::string& out) {
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  auto chance = [&](int percent) { return static_cast<int>(rng() % 100) < percent; };
  Case c;
  c.args = cmd;
  const std::vector<std::string> pos = positionals(cmd);
  for (const std::string& p : pos) {   // a positional is left out now and then (usage error)
    const std::vector<std::string> v = pool(cmd, {p, false, ""}, f, out);
    if (!chance(95)) continue;
    const std::string value = pick(v);
    c.args += " " + value;
    // A CSV folder comes with its labels file (the other inputs hold their labels).
    if (value == f / "csv" && chance(95)) c.args += " --labels " + pick(pool(cmd, {"labels", false, ""}, f, out));
  }
  for (const OptionSpec& o : opts) {
    if (std::find(pos.begin(), pos.end(), o.name) != pos.end() || o.name == "labels") continue;
    const bool required = always(cmd).count(o.name) > 0;
    // --print-config ends the run before it starts, and --config draws a bad file two times in three: both
    // rarely, so that the runs themselves are exercised.
    const int percent = required ? 95 : o.name == "print-config" ? 5 : o.name == "config" ? 10 : 20;
    if (!chance(percent)) continue;
    if (o.is_switch) {
      c.args += " --" + o.name;
      continue;
    }
    const std::vector<std::string> v = pool(cmd, o, f, out);
    if (!v.empty()) c.args += " --" + o.name + " " + pick(v);
  }
  c.np = chance(25) ? 2 : 0;   // a quarter on two ranks: every rank must agree on the code
  return c;
}

class AnyOptions : public ::testing::TestWithParam<std::string> {};

TEST_P(AnyOptions, EndWithZeroOrTwoOnEveryRank) {
  const std::string cmd = GetParam();
  const Files& files = Files::get();
  ASSERT_FALSE(HasFailure()) << "the fixture files could not be made";
  const std::vector<OptionSpec> opts = options_of(cmd);
  const uint64_t seed = env_u64("RAGTRAIN_PROPERTY_SEED", kDefaultSeed);
  const int cases = static_cast<int>(env_u64("RAGTRAIN_PROPERTY_CASES", kDefaultCasesPerCommand));
  // One stream per subcommand, so that a filter or a new subcommand leaves the others' cases as they were.
  std::mt19937_64 rng(seed ^ std::hash<std::string>{}(cmd));
  const int timeout = static_cast<int>(90 * time_scale());
  int ok = 0, user_errors = 0;
  std::set<std::string> messages;   // the first error line of each case that ended 2
  for (int i = 0; i < cases; ++i) {
    const std::string out = files / (cmd + "-case" + std::to_string(i));
    const Case c = draw(cmd, opts, rng, files, out);
    const Result r = run(c.np, c.args, timeout);
    const std::string again = (c.np ? "mpirun -np 2 " : "") + bin() + " " + c.args;
    bool good = r.rc == 0 || r.rc == 2;
    for (int rc : r.rank_rcs) good = good && rc == r.rc;
    EXPECT_TRUE(good) << "exit " << r.rc << " (ranks:" << ::testing::PrintToString(r.rank_rcs)
                      << "; 124 is the timeout of " << timeout << " s) for\n  " << again << "\n"
                      << r.output;
    // A user mistake names itself and says what to do.
    if (r.rc == 2) {
      EXPECT_TRUE(contains(r.output, "ragtrain: error") && contains(r.output, "hint:"))
          << "exit 2 without an error and a hint line for\n  " << again << "\n" << r.output;
    }
    if (r.rc == 2) {
      const size_t at = r.output.find("ragtrain: error");
      if (at != std::string::npos) messages.insert(r.output.substr(at, r.output.find('\n', at) - at));
    }
    ok += r.rc == 0;
    user_errors += r.rc == 2;
    for (const char* suffix : {"", ".h5", ".json", ".csv", "-trace.json"}) fs::remove_all(out + suffix);
  }
  // How the cases ended, to see that the pools still reach both the runs and the user mistakes.
  std::cout << "[ property ] " << cmd << ": " << ok << " ended 0, " << user_errors << " ended 2 (seed " << seed
            << ")\n";
  for (const std::string& m : messages) std::cout << "[ property ]   " << m << "\n";
}

INSTANTIATE_TEST_SUITE_P(Property, AnyOptions,
                         ::testing::Values("gen", "convert", "inspect", "train", "eval", "predict", "bench",
                                           "simulate", "plot", "compare"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
