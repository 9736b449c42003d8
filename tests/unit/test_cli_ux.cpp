// The options behind the terminal experience and convert: --print-config, --verbose, --labels and friends.
#include <gtest/gtest.h>

#include <fstream>

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
