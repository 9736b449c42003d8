// The options behind the terminal experience and convert: --print-config, --verbose, --labels and friends.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ragtrain/cli/options.hpp"
#include "ragtrain/core/error.hpp"
#include "options_test_util.hpp"

using namespace ragtrain;
using ragtrain::test::parse;
using ragtrain::test::user_error_of;

TEST(CliUx, PrintConfigIsAConfigFileThatGivesTheSameConfiguration) {
  const RunConfig c = parse({"train", "--data", "a.h5", "--out", "d", "--hidden", "64", "--lr", "0.01",
                             "--print-config"}).config;
  EXPECT_TRUE(c.print_config);
  EXPECT_EQ(c.provenance.effective.find("print-config"), std::string::npos)
      << "it would make the file print instead of run";
  EXPECT_NE(c.provenance.effective.find("hidden = 64\n"), std::string::npos);
  const std::string ini = "/tmp/ragtrain_cli_ux_" + std::to_string(::getpid()) + ".ini";
  std::ofstream(ini) << c.provenance.effective;
  const RunConfig again = parse({"train", "--config", ini}).config;
  std::remove(ini.c_str());
  EXPECT_EQ(again.provenance.effective, c.provenance.effective);
  EXPECT_EQ(again.model.hidden, 64);
  EXPECT_DOUBLE_EQ(again.lr.lr, 0.01);
}

TEST(CliUx, PrintConfigStillValidates) {
  EXPECT_NE(user_error_of({"train", "--print-config"}).find("--data"), std::string::npos);
}

TEST(CliUx, QuietAndVerboseExcludeEachOther) {
  EXPECT_TRUE(parse({"eval", "--checkpoint", "c.h5", "--data", "d.h5", "--verbose"}).config.talk.verbose);
  const std::string e = user_error_of({"eval", "--checkpoint", "c.h5", "--data", "d.h5", "--verbose", "--quiet"});
  EXPECT_NE(e.find("--verbose"), std::string::npos) << e;
  EXPECT_NE(e.find("--quiet"), std::string::npos) << e;
}

TEST(CliUx, ConvertOptionsAndEvalOut) {
  const RunConfig c = parse({"convert", "dir", "--labels", "labels.csv", "out.h5", "--class-names-from", "t.h5"}).config;
  EXPECT_EQ(c.convert.input, "dir");
  EXPECT_EQ(c.convert.output, "out.h5");
  EXPECT_EQ(c.convert.labels, "labels.csv");
  EXPECT_EQ(c.convert.class_names_from, "t.h5");
  EXPECT_TRUE(parse({"convert", "a.npz", "b.h5", "--regression"}).config.convert.regression);
  EXPECT_NE(user_error_of({"convert", "a.npz", "b.h5", "--regression", "--class-names-from", "t.h5"})
                .find("--class-names-from"),
            std::string::npos);
  EXPECT_EQ(parse({"eval", "--checkpoint", "c.h5", "--data", "d.h5", "--out", "m.json"}).config.out, "m.json");
  EXPECT_NE(user_error_of({"train", "--data", "a.h5", "--out", "d", "--labels", "x.csv"}).find("labels"),
            std::string::npos);
}

namespace {

// The effective configuration as command-line words: `name = value` -> `--name value`, as a user copies it.
std::vector<std::string> as_words(const std::string& command, const std::string& effective) {
  std::vector<std::string> words = {command};
  std::istringstream in(effective);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find(" = ");
    if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
    words.push_back("--" + line.substr(0, eq));
    words.push_back(line.substr(eq + 3));
  }
  return words;
}

}  // namespace

TEST(CliUx, EverySwitchTakesTheTrueOrFalseThatPrintConfigWrites) {
  const RunConfig c = parse({"train", "--data", "a.h5", "--out", "d", "--bidirectional", "--write-order"}).config;
  EXPECT_TRUE(c.model.bidirectional);
  // The configuration printed, given back on the command line word for word (`--quiet false`, ...).
  const RunConfig again = parse(as_words("train", c.provenance.effective)).config;
  EXPECT_EQ(again.provenance.effective, c.provenance.effective);
  EXPECT_TRUE(again.model.bidirectional);
  EXPECT_FALSE(parse({"train", "--data", "a.h5", "--out", "d", "--bidirectional", "false"}).config.model.bidirectional);
  EXPECT_FALSE(parse({"train", "--data", "a.h5", "--out", "d", "--bidirectional=no"}).config.model.bidirectional);
  EXPECT_TRUE(parse({"train", "--data", "a.h5", "--out", "d", "--bidir", "true"}).config.model.bidirectional);
  // A switch before a positional argument leaves it alone.
  const RunConfig inspect = parse({"inspect", "--quiet", "file.h5"}).config;
  EXPECT_TRUE(inspect.talk.quiet);
  EXPECT_EQ(inspect.source.data, "file.h5");
  EXPECT_EQ(parse({"compare", "--quiet", "a", "b"}).config.runs, (std::vector<std::string>{"a", "b"}));
  // The command line's `false` wins over a config file's `true`.
  const std::string ini = "/tmp/ragtrain_cli_ux_sw_" + std::to_string(::getpid()) + ".ini";
  std::ofstream(ini) << "bidirectional = true\n";
  EXPECT_TRUE(parse({"train", "--data", "a.h5", "--out", "d", "--config", ini}).config.model.bidirectional);
  EXPECT_FALSE(parse({"train", "--data", "a.h5", "--out", "d", "--config", ini, "--bidirectional", "false"})
                   .config.model.bidirectional);
  std::remove(ini.c_str());
  const std::string bad = user_error_of({"train", "--data", "a.h5", "--out", "d", "--bidirectional=maybe"});
  EXPECT_NE(bad.find("bidirectional"), std::string::npos) << bad;
}

TEST(CliUx, PyTorchNamesGetRagtrainsName) {
  for (const auto& [theirs, ours] : std::vector<std::pair<std::string, std::string>>{
           {"--batch-size", "--batch-per-rank"},
           {"--num-layers", "--layers"},
           {"--hidden-size", "--hidden"},
           {"--learning-rate", "--lr"},
           {"--hidden_size", "--hidden"},
           {"--batch_per_rank", "--batch-per-rank"}}) {
    const std::string e = user_error_of({"train", "--data", "a.h5", "--out", "d", theirs, "4"});
    EXPECT_NE(e.find("did you mean " + ours + "?"), std::string::npos) << theirs << ": " << e;
  }
  EXPECT_NE(user_error_of({"bench", "--batch-size", "4"}).find("--batch-per-rank"), std::string::npos);
}

TEST(CliUx, HelpCommandNoCommandAndBenchQuiet) {
  const Invocation train_help = parse({"help", "train"});
  EXPECT_TRUE(train_help.help);
  EXPECT_EQ(train_help.exit_code, 0);
  EXPECT_EQ(train_help.help_text.rfind("usage: ragtrain train", 0), 0u) << train_help.help_text;
  const Invocation none = parse({});
  EXPECT_TRUE(none.help);
  EXPECT_EQ(none.exit_code, kExitUserError);
  EXPECT_NE(none.help_text.find("no command given"), std::string::npos);
  EXPECT_EQ(parse({"--help"}).exit_code, 0);
  EXPECT_NE(user_error_of({"help", "trian"}).find("did you mean train"), std::string::npos);
  EXPECT_TRUE(parse({"bench", "--quiet"}).config.talk.quiet);
}

TEST(CliUx, EachCommandsHelpSpeaksOfItself) {
  // --out and --data: the command's own meaning, no other command's.
  const std::vector<std::string> names = subcommands();
  for (const std::string& cmd : names) {
    const std::string help = parse({cmd, "--help"}).help_text;
    for (const char* other : {"gen FILE.h5", "train DIR", "(train:", "predict FILE.csv", "compare FILE"})
      EXPECT_EQ(help.find(other), std::string::npos) << cmd << " --help mentions '" << other << "'\n" << help;
  }
  EXPECT_NE(parse({"predict", "--help"}).help_text.find("--out FILE.csv"), std::string::npos);
  EXPECT_NE(parse({"train", "--help"}).help_text.find("--out DIR"), std::string::npos);
  EXPECT_NE(parse({"predict", "--help"}).help_text.find("labels not needed"), std::string::npos);
  EXPECT_NE(parse({"train", "--help"}).help_text.find("the training set"), std::string::npos);
}
