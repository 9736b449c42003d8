// The option table: defaults, config files, command-line precedence, and rejection of bad options.
#include <gtest/gtest.h>

#include <fstream>

#include "ragtrain/cli/options.hpp"
#include "ragtrain/core/error.hpp"
#include "options_test_util.hpp"

using namespace ragtrain;
using ragtrain::test::parse;
using ragtrain::test::user_error_of;

namespace {

std::string write_ini(const std::string& text) {
  const std::string path = "/tmp/ragtrain_options_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".ini";
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST(Options, DefaultsOfTheQuestion) {
  const RunConfig c = parse({"train", "--data", "a.h5", "--out", "d"}).config;
  EXPECT_EQ(c.model.layers, 1);
  EXPECT_EQ(c.model.hidden, 50);
  EXPECT_EQ(c.schedule.batch_per_rank, 1);
  EXPECT_EQ(c.backend.device, Device::Cpu);
  const RunConfig g = parse({"gen", "--out", "x.h5"}).config;
  EXPECT_EQ(g.synthetic.features, 36);
  EXPECT_EQ(g.synthetic.min_length, 60);
  EXPECT_EQ(g.synthetic.max_length, 130);
  EXPECT_EQ(g.synthetic.classes, 10);
}

TEST(Options, ConfigFileThenCommandLineWins) {
  const std::string ini = write_ini("hidden = 64\nlr = 0.01\nepochs = 7\n# a comment\nsequences = 5\n");
  const RunConfig c = parse({"train", "--config", ini, "--data", "a.h5", "--out", "d", "--lr", "0.5"}).config;
  EXPECT_EQ(c.model.hidden, 64);
  EXPECT_EQ(c.schedule.epochs, 7);
  EXPECT_DOUBLE_EQ(c.lr.lr, 0.5);
  EXPECT_NE(c.provenance.effective.find("hidden = 64"), std::string::npos);
  EXPECT_NE(c.provenance.effective.find("lr = 0.5"), std::string::npos);
  EXPECT_EQ(c.provenance.effective.find("sequences"), std::string::npos)
      << "gen's option leaked into train's configuration";
}

TEST(Options, PositionalArguments) {
  const RunConfig c = parse({"convert", "in.ts", "out.h5"}).config;
  EXPECT_EQ(c.convert.input, "in.ts");
  EXPECT_EQ(c.convert.output, "out.h5");
  EXPECT_EQ(parse({"inspect", "f.h5"}).config.source.data, "f.h5");
}

// --missing: convert's only, a choice parsed into its enum, error by default, in the effective configuration.
TEST(Options, ConvertMissing) {
  EXPECT_EQ(parse({"convert", "in.ts", "out.h5"}).config.convert.missing, MissingMode::Error);
  const RunConfig c = parse({"convert", "in.ts", "out.h5", "--missing", "ffill"}).config;
  EXPECT_EQ(c.convert.missing, MissingMode::Ffill);
  EXPECT_NE(c.provenance.effective.find("missing = ffill"), std::string::npos) << c.provenance.effective;
  EXPECT_NE(user_error_of({"convert", "in.ts", "out.h5", "--missing", "drop"}).find("must be error, trim, zero or ffill"),
            std::string::npos);
  EXPECT_NE(user_error_of({"train", "--data", "a.h5", "--out", "d", "--missing", "trim"}), "");
}

TEST(Options, HelpPerSubcommand) {
  const Invocation inv = parse({"train", "--help"});
  EXPECT_TRUE(inv.help);
  EXPECT_NE(inv.help_text.find("--batch-per-rank"), std::string::npos);
  EXPECT_EQ(inv.help_text.find("--min-length"), std::string::npos);
  EXPECT_TRUE(parse({}).help);
}

TEST(Options, ModelOptions) {
  const RunConfig c = parse({"train", "--data", "a.h5", "--out", "d", "--bidirectional", "--pool", "max", "--dropout",
                             "0.25", "--head-dropout", "0.5", "--layers", "2"})
                            .config;
  EXPECT_TRUE(c.model.bidirectional);
  EXPECT_EQ(c.model.pool, Pool::Max);
  EXPECT_EQ(c.model.dropout.between, 0.25);
  EXPECT_EQ(c.model.dropout.head, 0.5);
  const RunConfig d = parse({"train", "--data", "a.h5", "--out", "d"}).config;
  EXPECT_FALSE(d.model.bidirectional);
  EXPECT_EQ(d.model.pool, Pool::Mean);   // the default: doc/accuracy.md, "Choosing the defaults"
  EXPECT_EQ(d.model.dropout.between, 0.0);
  EXPECT_EQ(d.model.dropout.head, 0.0);
  const std::string ini = write_ini("bidirectional = true\npool = mean\ndropout = 0.1\n");
  const RunConfig f = parse({"train", "--config", ini, "--data", "a.h5", "--out", "d"}).config;
  EXPECT_TRUE(f.model.bidirectional);
  EXPECT_EQ(f.model.pool, Pool::Mean);
  EXPECT_EQ(f.model.dropout.between, 0.1);
}

TEST(Options, BadOptionsNameTheOption) {
  EXPECT_NE(user_error_of({"train", "--data", "a.h5", "--out", "d", "--hiden", "3"}).find("hiden"), std::string::npos);
  EXPECT_NE(user_error_of({"train", "--data", "a.h5", "--out", "d", "--hidden", "abc"}).find("hidden"),
            std::string::npos);
  EXPECT_NE(user_error_of({"train", "--data", "a.h5", "--out", "d", "--hidden", "0"}).find("--hidden"),
            std::string::npos);
  EXPECT_NE(user_error_of({"train", "--data", "a.h5", "--out", "d", "--optimizer", "rmsprop"}).find("--optimizer"),
            std::string::npos);
  EXPECT_NE(user_error_of({"train", "--out", "d"}).find("--data"), std::string::npos);
  EXPECT_NE(user_error_of({"gen", "--out", "x", "--min-length", "9", "--max-length", "3"}).find("--max-length"),
            std::string::npos);
  EXPECT_NE(user_error_of({"frobnicate"}).find("frobnicate"), std::string::npos);
  EXPECT_NE(user_error_of({"train", "--data", "a.h5", "--out", "d", "--device", "tpu"}).find("--device"),
            std::string::npos);
  EXPECT_NE(user_error_of({"train", "--data", "a.h5", "--out", "d", "--lstm", "fast"}).find("--lstm"),
            std::string::npos);
  EXPECT_EQ(parse({"train", "--data", "a.h5", "--out", "d"}).config.backend.lstm, LstmPath::Auto);
  EXPECT_EQ(parse({"bench", "--lstm", "fused"}).config.backend.lstm, LstmPath::Fused);
  for (const char* bad : {"1", "-0.1", "nan"}) {
    EXPECT_NE(user_error_of({"train", "--data", "a.h5", "--out", "d", "--dropout", bad}).find("--dropout"),
              std::string::npos) << bad;
    EXPECT_NE(user_error_of({"bench", "--head-dropout", bad}).find("--head-dropout"), std::string::npos) << bad;
  }
  EXPECT_NE(user_error_of({"train", "--data", "a.h5", "--out", "d", "--pool", "sum"}).find("--pool"),
            std::string::npos);
  EXPECT_NE(user_error_of({"eval", "--checkpoint", "c.h5", "--data", "a.h5", "--pool", "mean"}).find("pool"),
            std::string::npos) << "the model's options come from the checkpoint in eval";
  const std::string ini = write_ini("hiddne = 4\n");
  EXPECT_NE(user_error_of({"train", "--config", ini, "--data", "a", "--out", "d"}).find("hiddne"), std::string::npos);
  EXPECT_NE(user_error_of({"train", "--config", "/nonexistent/x.ini", "--data", "a", "--out", "d"}).find("x.ini"),
            std::string::npos);
}

// --normalize MODE; `--normalize` alone keeps meaning what the switch meant (feature), also before another option.
TEST(Options, NormalizeModes) {
  EXPECT_EQ(parse({"train", "--data", "a.h5", "--out", "d"}).config.normalize, Normalization::Feature);   // the default
  EXPECT_EQ(parse({"train", "--data", "a.h5", "--out", "d", "--normalize", "none"}).config.normalize, Normalization::None);
  EXPECT_EQ(parse({"train", "--data", "a.h5", "--out", "d", "--normalize"}).config.normalize, Normalization::Feature);
  const RunConfig alone = parse({"train", "--normalize", "--data", "a.h5", "--out", "d"}).config;
  EXPECT_EQ(alone.normalize, Normalization::Feature);
  EXPECT_EQ(alone.source.data, "a.h5");
  EXPECT_EQ(parse({"train", "--data", "a.h5", "--out", "d", "--normalize", "series"}).config.normalize, Normalization::Series);
  EXPECT_EQ(parse({"train", "--data", "a.h5", "--out", "d", "--normalize=none"}).config.normalize, Normalization::None);
  EXPECT_NE(parse({"train", "--data", "a.h5", "--out", "d", "--normalize", "series"}).config.provenance.effective.find(
                "normalize = series"),
            std::string::npos);
  const std::string bad = ragtrain::test::user_error_of({"train", "--data", "a.h5", "--out", "d", "--normalize", "yes"});
  EXPECT_NE(bad.find("none, feature or series"), std::string::npos) << bad;
  const std::string old = ragtrain::test::user_error_of({"train", "--data", "a.h5", "--out", "d", "--normalize", "true"});
  EXPECT_NE(old.find("normalize = feature"), std::string::npos) << old;
}
