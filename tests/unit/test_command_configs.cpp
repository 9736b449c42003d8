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
  if (cmd == "tune") return {"tune", "--data", "a.h5", "--out", "d"};
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
  // bench takes --quiet (its table without the context lines), simulate prints only its table.
  EXPECT_EQ(of["bench"].count("quiet"), 1u);
  for (const char* cmd : {"bench", "simulate"}) EXPECT_EQ(of[cmd].count("verbose"), 0u) << cmd;
  EXPECT_EQ(of["simulate"].count("quiet"), 0u);
  for (const char* cmd : {"gen", "inspect", "plot"}) EXPECT_EQ(of[cmd].count("verbose"), 0u) << cmd;
}

TEST(CommandConfigs, Tune) {
  const TuneConfig t = tune_config(parse({"tune", "--data", "a.h5", "--val", "v.h5", "--out", "d", "--space", "s.ini",
                                          "--trials", "9", "--budget-minutes", "2.5", "--ranks-per-trial", "2",
                                          "--trials-per-gpu", "4", "--seed", "5", "--max-memory", "1G", "--folds", "3",
                                          "--quiet"})
                                         .config);
  EXPECT_EQ(t.source.data, "a.h5");
  EXPECT_EQ(t.source.max_memory, "1G");
  EXPECT_EQ(t.val, "v.h5");
  EXPECT_EQ(t.out, "d");
  EXPECT_EQ(t.tune.space, "s.ini");
  EXPECT_EQ(t.tune.trials, 9);
  EXPECT_EQ(t.tune.budget_minutes, 2.5);
  EXPECT_EQ(t.tune.ranks_per_trial, 2);
  EXPECT_EQ(t.tune.trials_per_gpu, 4);
  EXPECT_EQ(t.tune.folds, 3);
  EXPECT_EQ(t.seed, 5u);
  EXPECT_TRUE(t.talk.quiet);
  for (const auto& [args, option] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"tune", "--out", "d"}, "--data"},
           {{"tune", "--data", "a.h5"}, "--out"},
           {{"tune", "--data", "a.h5", "--val", "a.h5", "--out", "d"}, "--val"},
           {{"tune", "--data", "a.h5", "--out", "d", "--trials", "0"}, "--trials"},
           {{"tune", "--data", "a.h5", "--out", "d", "--ranks-per-trial", "0"}, "--ranks-per-trial"},
           {{"tune", "--data", "a.h5", "--out", "d", "--budget-minutes", "-1"}, "--budget-minutes"},
           {{"tune", "--data", "a.h5", "--out", "d", "--folds", "-1"}, "--folds"}})
    EXPECT_NE(user_error_of(args).find(option), std::string::npos) << option << ": " << user_error_of(args);
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
  EXPECT_TRUE(g.talk.quiet);
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
  EXPECT_EQ(c.convert.input, "dir");
  EXPECT_EQ(c.convert.output, "out.h5");
  EXPECT_EQ(c.convert.labels, "l.csv");
  EXPECT_TRUE(c.convert.regression);
  EXPECT_TRUE(c.talk.verbose);
  EXPECT_FALSE(c.talk.quiet);
  EXPECT_EQ(
      convert_config(parse({"convert", "a.npz", "b.h5", "--class-names-from", "t.h5"}).config).convert.class_names_from,
      "t.h5");
  EXPECT_EQ(c.convert.missing, MissingMode::Error);
  EXPECT_EQ(convert_config(parse({"convert", "a.ts", "b.h5", "--missing", "ffill"}).config).convert.missing,
            MissingMode::Ffill);
  const InspectConfig i = inspect_config(parse({"inspect", "f.h5", "--max-memory", "8G"}).config);
  EXPECT_EQ(i.source.data, "f.h5");
  EXPECT_EQ(i.source.max_memory, "8G");
  EXPECT_FALSE(i.talk.quiet);
  EXPECT_EQ(inspect_config(parse({"inspect", "f.h5"}).config).source.max_memory, "auto");
  EXPECT_TRUE(inspect_config(parse({"inspect", "f.h5", "--quiet"}).config).talk.quiet);
}

// --ranks and --lengths are parsed once, by the option table, into their types; a bad value names the option.
TEST(CommandConfigs, Simulate) {
  const SimulateConfig d = simulate_config(parse({"simulate"}).config);
  EXPECT_EQ(d.simulate.ranks.values, (std::vector<int64_t>{8, 64, 1024}));
  EXPECT_EQ(d.simulate.lengths.kind, LengthDistribution::Kind::Uniform);
  EXPECT_EQ(d.simulate.lengths.a, 60);
  EXPECT_EQ(d.simulate.lengths.b, 130);
  const RunConfig r = parse({"simulate", "--ranks", "2,3", "--lengths", "lognormal:100:0.6", "--epochs", "2",
                             "--batch-per-rank", "4", "--sequences-per-rank", "5", "--seed", "9", "--out", "r.json"})
                          .config;
  const SimulateConfig s = simulate_config(r);
  EXPECT_EQ(s.simulate.ranks.values, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(s.simulate.lengths.kind, LengthDistribution::Kind::Lognormal);
  EXPECT_EQ(s.simulate.lengths.a, 100);
  EXPECT_DOUBLE_EQ(s.simulate.lengths.b, 0.6);
  EXPECT_EQ(s.schedule.epochs, 2);
  EXPECT_EQ(s.schedule.batch_per_rank, 4);
  EXPECT_EQ(s.simulate.sequences_per_rank, 5);
  EXPECT_EQ(s.schedule.seed, 9u);
  EXPECT_EQ(s.out, "r.json");
  // The effective configuration prints the values as typed, so that it parses back to the same configuration.
  EXPECT_NE(r.provenance.effective.find("ranks = 2,3\n"), std::string::npos) << r.provenance.effective;
  EXPECT_NE(r.provenance.effective.find("lengths = lognormal:100:0.6\n"), std::string::npos) << r.provenance.effective;
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
  EXPECT_TRUE(p.talk.quiet);
}

TEST(CommandConfigs, Compare) {
  const CompareConfig c = compare_config(parse({"compare", "a", "b", "--out", "t.csv", "--quiet"}).config);
  EXPECT_EQ(c.runs, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c.out, "t.csv");
  EXPECT_TRUE(c.talk.quiet);
  EXPECT_TRUE(compare_config(parse({"compare", "a"}).config).out.empty());
}

// train takes every group of the Trainer, as the table bound them; each value lands in its group.
TEST(CommandConfigs, Train) {
  const RunConfig r =
      parse({"train", "--data", "a.h5", "--val", "v.h5", "--out", "d", "--max-memory", "2G", "--hidden", "8",
             "--layers", "2", "--bidirectional", "--pool", "max", "--dropout", "0.25", "--head-dropout", "0.5",
             "--optimizer", "sgd", "--momentum", "0.5", "--clip", "2", "--lr", "0.5", "--warmup-steps", "3",
             "--lr-decay", "linear", "--lr-final-fraction", "0.1", "--epochs", "4", "--batch-per-rank", "3", "--seed", "9", "--schedule",
             "random", "--normalize", "series", "--val-every", "5", "--select", "val_loss", "--early-stop", "2",
             "--resume", "d", "--keep", "4", "--log-every", "7", "--write-order", "--on-nonfinite", "skip",
             "--comm-timeout", "3", "--trace", "t.json", "--verbose"})
          .config;
  const TrainConfig t = train_config(r);
  EXPECT_EQ(t.source.data, "a.h5");
  EXPECT_EQ(t.source.max_memory, "2G");
  EXPECT_FALSE(t.synthetic.has_value());
  EXPECT_EQ(t.normalize, Normalization::Series);
  EXPECT_EQ(t.validation.data, "v.h5");
  EXPECT_EQ(t.validation.every, 5);
  EXPECT_EQ(t.validation.select, SelectMetric::ValLoss);
  EXPECT_EQ(t.validation.early_stop, 2);
  EXPECT_EQ(t.model.hidden, 8);
  EXPECT_EQ(t.model.layers, 2);
  EXPECT_TRUE(t.model.bidirectional);
  EXPECT_EQ(t.model.pool, Pool::Max);
  EXPECT_EQ(t.model.dropout.between, 0.25);
  EXPECT_EQ(t.model.dropout.head, 0.5);
  EXPECT_EQ(t.start.resume, "d");
  EXPECT_EQ(t.optimizer.kind, OptimizerKind::Sgd);
  EXPECT_EQ(t.optimizer.momentum, 0.5);
  EXPECT_EQ(t.optimizer.clip, 2.0);
  EXPECT_EQ(t.lr.lr, 0.5);
  EXPECT_EQ(t.lr.warmup, 3);
  EXPECT_EQ(t.lr.decay, LrDecay::Linear);
  EXPECT_EQ(t.lr.final_fraction, 0.1);
  EXPECT_EQ(t.schedule.epochs, 4);
  EXPECT_EQ(t.schedule.batch_per_rank, 3);
  EXPECT_EQ(t.schedule.seed, 9u);
  EXPECT_EQ(t.schedule.kind, ScheduleKind::Random);
  EXPECT_EQ(t.faults.on_nonfinite, NonfinitePolicy::Skip);
  EXPECT_EQ(t.faults.comm_timeout, 3.0);
  EXPECT_EQ(t.out, "d");
  EXPECT_EQ(t.trace, "t.json");
  EXPECT_EQ(t.records.keep, 4);
  EXPECT_EQ(t.records.log_every, 7);
  EXPECT_TRUE(t.records.write_order);
  EXPECT_TRUE(t.talk.verbose);
  EXPECT_EQ(t.provenance.effective, r.provenance.effective);
  EXPECT_NE(t.provenance.command_line.find("--hidden 8"), std::string::npos) << t.provenance.command_line;
}

// bench takes the groups of set-up and step; what it does not accept keeps the Trainer's own defaults, not the
// command line's: raw data (no normalisation) and a constant learning rate at --lr.
TEST(CommandConfigs, Bench) {
  const BenchConfig b = bench_config(parse({"bench", "--hidden", "8", "--pool", "last", "--optimizer", "adamw", "--lr",
                                            "0.5", "--batch-per-rank", "2", "--device", "cpu", "--steps", "3",
                                            "--warmup", "1", "--out", "r.json"})
                                         .config);
  EXPECT_EQ(b.run.model.hidden, 8);
  EXPECT_EQ(b.run.model.pool, Pool::Last);
  EXPECT_EQ(b.run.optimizer.kind, OptimizerKind::AdamW);
  EXPECT_EQ(b.run.optimizer.clip, 1.0) << "the command line's default clip";
  EXPECT_EQ(b.run.schedule.batch_per_rank, 2);
  EXPECT_EQ(b.run.lr.lr, 0.5);
  EXPECT_EQ(b.run.lr.decay, LrDecay::None);
  EXPECT_EQ(b.run.lr.warmup, 0);
  EXPECT_EQ(b.run.normalize, Normalization::None);
  EXPECT_EQ(b.run.faults.comm_timeout, 0.0) << "bench has no watchdog";
  EXPECT_TRUE(b.run.validation.data.empty());
  EXPECT_EQ(b.timing.steps, 3);
  EXPECT_EQ(b.timing.warmup, 1);
  EXPECT_EQ(b.out, "r.json");
  EXPECT_TRUE(b.run.out.empty()) << "bench's --out is its result file, not a run folder";
}

TEST(CommandConfigs, EvalAndPredict) {
  const EvalConfig e = eval_config(
      parse({"eval", "--checkpoint", "c.h5", "--data", "a.h5", "--max-memory", "1G", "--out", "m.json", "--verbose"})
          .config);
  EXPECT_EQ(e.checkpoint, "c.h5");
  EXPECT_EQ(e.source.data, "a.h5");
  EXPECT_EQ(e.source.max_memory, "1G");
  EXPECT_EQ(e.out, "m.json");
  EXPECT_EQ(e.device, Device::Cpu);
  EXPECT_TRUE(e.talk.verbose);
  const EvalConfig p = eval_config(parse({"predict", "--checkpoint", "c.h5", "--data", "a.h5", "--out", "p.csv",
                                          "--quiet"})
                                       .config);
  EXPECT_EQ(p.out, "p.csv");
  EXPECT_TRUE(p.talk.quiet);
}

TEST(CommandConfigs, RecordKeepingOptionsAreTrainOptions) {
  // compare leaves these out; a name that is no longer an option of train would leave nothing out.
  const std::set<std::string> train = listed_options("train");
  for (const std::string& name : record_keeping_options()) EXPECT_EQ(train.count(name), 1u) << name;
  for (const char* model : {"hidden", "layers", "lr", "data", "val", "seed", "epochs"})
    EXPECT_EQ(record_keeping_options().count(model), 0u) << model;
}
