// Each subcommand's typed configuration, built from the one option table: the values it carries, and the options
// a subcommand does not list refused instead of accepted and ignored.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "options_test_util.hpp"

using namespace ragtrain;
using ragtrain::test::parse;
using ragtrain::test::user_error_of;

namespace {

// The long option names `ragtrain CMD --help` lists (without --help itself).
std::set<std::string> listed_options(const std::string& cmd) {
  const Invocation inv = parse({cmd, "--help"});
  std::set<std::string> names;
  std::istringstream in(inv.help_text);
  const std::regex line(R"(^  --([a-z0-9-]+))");
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line) && m[1] != "help") names.insert(m[1]);
  }
  return names;
}

// The smallest valid command line of each subcommand, to which one option is added.
std::vector<std::string> minimal(const std::string& cmd) {
  if (cmd == "gen") return {"gen", "--out", "x.h5"};
  if (cmd == "convert") return {"convert", "in.ts", "out.h5"};
  if (cmd == "inspect") return {"inspect", "f.h5"};
  if (cmd == "train") return {"train", "--data", "a.h5", "--out", "d"};
  if (cmd == "eval" || cmd == "predict") return {cmd, "--checkpoint", "c.h5", "--data", "a.h5", "--out", "p.csv"};
  if (cmd == "plot") return {"plot", "run"};
  if (cmd == "compare") return {"compare", "run_a", "run_b"};
  return {cmd};
}

}  // namespace

TEST(CommandConfigs, EveryCommandRefusesTheOptionsItDoesNotList) {
  std::set<std::string> every;
  std::map<std::string, std::set<std::string>> of;
  for (const std::string& cmd : subcommands()) {
    of[cmd] = listed_options(cmd);
    ASSERT_FALSE(of[cmd].empty()) << cmd;
    every.insert(of[cmd].begin(), of[cmd].end());
  }
  int refused = 0;
  for (const std::string& cmd : subcommands()) {
    ASSERT_EQ(user_error_of(minimal(cmd)), "") << cmd << ": the minimal command line does not parse";
    for (const std::string& opt : every) {
      // Boost takes an unambiguous prefix of a listed option for that option (--warmup for train's --warmup-steps).
      bool prefix = false;
      for (const std::string& mine : of[cmd]) prefix = prefix || mine.rfind(opt, 0) == 0;
      if (prefix) continue;
      std::vector<std::string> args = minimal(cmd);
      args.push_back("--" + opt);
      args.push_back("1");
      const std::string e = user_error_of(args);
      EXPECT_NE(e.find("unrecognised option '--" + opt + "'"), std::string::npos) << cmd << " --" << opt << ": " << e;
      ++refused;
    }
  }
  EXPECT_GT(refused, 100);
  // The talkative options only where the command has something to say besides its result.
  for (const char* cmd : {"bench", "simulate"}) {
    EXPECT_EQ(of[cmd].count("quiet"), 0u) << cmd;
    EXPECT_EQ(of[cmd].count("verbose"), 0u) << cmd;
  }
  for (const char* cmd : {"gen", "inspect", "plot"}) EXPECT_EQ(of[cmd].count("verbose"), 0u) << cmd;
}

TEST(CommandConfigs, Gen) {
  const GenConfig g = gen_config(parse({"gen", "--out", "x.h5", "--sequences", "7", "--features", "2", "--min-length",
                                        "3", "--max-length", "9", "--task", "regression", "--outputs", "2", "--seed",
                                        "5", "--quiet"})
                                     .config);
  EXPECT_EQ(g.out, "x.h5");
  EXPECT_EQ(g.spec.sequences, 7);
  EXPECT_EQ(g.spec.features, 2);
  EXPECT_EQ(g.spec.min_length, 3);
  EXPECT_EQ(g.spec.max_length, 9);
  EXPECT_EQ(g.spec.task, Task::Regression);
  EXPECT_EQ(g.spec.outputs, 2);
  EXPECT_EQ(g.spec.seed, 5u);
  EXPECT_TRUE(g.quiet);
  // bench without --data builds the same synthetic set from the same options.
  const BenchConfig b = bench_config(parse({"bench", "--sequences", "7", "--features", "2", "--min-length", "3",
                                            "--max-length", "9", "--task", "regression", "--outputs", "2", "--seed",
                                            "5"})
                                         .config);
  ASSERT_TRUE(b.run.synthetic.has_value());
  EXPECT_EQ(b.run.synthetic->sequences, g.spec.sequences);
  EXPECT_EQ(b.run.synthetic->max_length, g.spec.max_length);
  EXPECT_EQ(b.run.synthetic->task, g.spec.task);
  EXPECT_EQ(b.run.synthetic->seed, g.spec.seed);
  EXPECT_FALSE(bench_config(parse({"bench", "--data", "a.h5"}).config).run.synthetic.has_value());
}

TEST(CommandConfigs, ConvertAndInspect) {
  const ConvertConfig c = convert_config(
      parse({"convert", "dir", "--labels", "l.csv", "out.h5", "--regression", "--verbose"}).config);
  EXPECT_EQ(c.input, "dir");
  EXPECT_EQ(c.output, "out.h5");
  EXPECT_EQ(c.labels, "l.csv");
  EXPECT_TRUE(c.regression);
  EXPECT_TRUE(c.verbose);
  EXPECT_FALSE(c.quiet);
  EXPECT_EQ(convert_config(parse({"convert", "a.npz", "b.h5", "--class-names-from", "t.h5"}).config).class_names_from,
            "t.h5");
  EXPECT_EQ(c.missing, MissingMode::Error);
  EXPECT_EQ(convert_config(parse({"convert", "a.ts", "b.h5", "--missing", "ffill"}).config).missing, MissingMode::Ffill);
  const InspectConfig i = inspect_config(parse({"inspect", "f.h5", "--max-memory", "8G"}).config);
  EXPECT_EQ(i.data, "f.h5");
  EXPECT_EQ(i.max_memory, "8G");
  EXPECT_FALSE(i.quiet);
  EXPECT_EQ(inspect_config(parse({"inspect", "f.h5"}).config).max_memory, "auto");
  EXPECT_TRUE(inspect_config(parse({"inspect", "f.h5", "--quiet"}).config).quiet);
}

// --ranks and --lengths are parsed once, by the option table, into their types; a bad value names the option.
TEST(CommandConfigs, Simulate) {
  const SimulateConfig d = simulate_config(parse({"simulate"}).config);
  EXPECT_EQ(d.ranks, (std::vector<int64_t>{8, 64, 1024}));
  EXPECT_EQ(d.lengths.kind, LengthDistribution::Kind::Uniform);
  EXPECT_EQ(d.lengths.a, 60);
  EXPECT_EQ(d.lengths.b, 130);
  const RunConfig r = parse({"simulate", "--ranks", "2,3", "--lengths", "lognormal:100:0.6", "--epochs", "2",
                             "--batch-per-rank", "4", "--sequences-per-rank", "5", "--seed", "9", "--out", "r.json"})
                          .config;
  const SimulateConfig s = simulate_config(r);
  EXPECT_EQ(s.ranks, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(s.lengths.kind, LengthDistribution::Kind::Lognormal);
  EXPECT_EQ(s.lengths.a, 100);
  EXPECT_DOUBLE_EQ(s.lengths.b, 0.6);
  EXPECT_EQ(s.epochs, 2);
  EXPECT_EQ(s.batch_per_rank, 4);
  EXPECT_EQ(s.sequences_per_rank, 5);
  EXPECT_EQ(s.seed, 9u);
  EXPECT_EQ(s.out, "r.json");
  // The effective configuration prints the values as typed, so that it parses back to the same configuration.
  EXPECT_NE(r.effective.find("ranks = 2,3\n"), std::string::npos) << r.effective;
  EXPECT_NE(r.effective.find("lengths = lognormal:100:0.6\n"), std::string::npos) << r.effective;
  for (const char* bad : {"0", "8,,64", "8,x", "-1", ""})
    EXPECT_NE(user_error_of({"simulate", "--ranks", bad}).find("option --ranks"), std::string::npos) << bad;
  for (const char* bad : {"uniform:5", "uniform:9:3", "uniform:0:3", "lognormal:0:1", "lognormal:5:-1", "poisson:3:4",
                          "uniform:a:b"})
    EXPECT_NE(user_error_of({"simulate", "--lengths", bad}).find("option --lengths"), std::string::npos) << bad;
}

TEST(CommandConfigs, Plot) {
  EXPECT_EQ(plot_config(parse({"plot", "runs/a"}).config).out, "runs/a/plots");
  const PlotConfig p = plot_config(parse({"plot", "runs/a", "--out", "figs", "--quiet"}).config);
  EXPECT_EQ(p.run, "runs/a");
  EXPECT_EQ(p.out, "figs");
  EXPECT_TRUE(p.quiet);
}
