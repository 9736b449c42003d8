// Config-file sections named after subcommands, "did you mean" for unknown options, and count_of ("1 rank").
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "ragtrain/cli/options.hpp"
#include "ragtrain/cli/suggest.hpp"
#include "ragtrain/metrics/units.hpp"
#include "options_test_util.hpp"

using namespace ragtrain;
using ragtrain::test::parse;
using ragtrain::test::user_error_of;

namespace {

// An INI file removed at the end of the test.
class Ini {
 public:
  explicit Ini(const std::string& text)
      : path_("/tmp/ragtrain_sections_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".ini") {
    std::ofstream(path_) << text;
  }
  ~Ini() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

const char* const kSections =
    "hidden = 16\n"
    "lr = 0.01\n"
    "sequences = 300\n"       // gen's and bench's: skipped by train
    "[train]\n"
    "hidden = 64\n"
    "epochs = 7\n"
    "[bench]\n"
    "hidden = 128\n"
    "steps = 11\n"            // bench's alone: fine in its own section, never seen by train
    "[eval]\n"
    "device = cpu\n";

}  // namespace

TEST(ConfigSections, SectionAppliesToItsSubcommandOnlyAndWinsOverTheTopLevel) {
  const Ini ini(kSections);
  const RunConfig t = parse({"train", "--config", ini.path(), "--data", "a.h5", "--out", "d"}).config;
  EXPECT_EQ(t.model.hidden, 64) << "[train] wins over the top level for train";
  EXPECT_EQ(t.schedule.epochs, 7);
  EXPECT_DOUBLE_EQ(t.lr.lr, 0.01) << "top-level options still apply";
  EXPECT_EQ(t.provenance.effective.find("\nsteps = "), std::string::npos) << "[bench] leaked into train";

  const RunConfig b = parse({"bench", "--config", ini.path()}).config;
  EXPECT_EQ(b.model.hidden, 128) << "[bench] applies to bench";
  EXPECT_EQ(b.timing.steps, 11);
  EXPECT_EQ(b.synthetic.sequences, 300) << "top-level option of bench";
  EXPECT_EQ(b.schedule.epochs, RunConfig{}.schedule.epochs) << "[train]'s epochs reached bench";

  const RunConfig g = parse({"gen", "--config", ini.path(), "--out", "x.h5"}).config;
  EXPECT_EQ(g.synthetic.sequences, 300);
}

TEST(ConfigSections, CommandLineWinsOverTheSection) {
  const Ini ini(kSections);
  const RunConfig t = parse({"train", "--config", ini.path(), "--data", "a.h5", "--out", "d", "--hidden", "8"}).config;
  EXPECT_EQ(t.model.hidden, 8);
  EXPECT_EQ(t.schedule.epochs, 7);
}

TEST(ConfigSections, PrintConfigOfASectionedFileRunsTheSame) {
  const Ini ini(kSections);
  const RunConfig t = parse({"train", "--config", ini.path(), "--data", "a.h5", "--out", "d"}).config;
  EXPECT_NE(t.provenance.effective.find("hidden = 64\n"), std::string::npos) << t.provenance.effective;
  EXPECT_NE(t.provenance.effective.find("epochs = 7\n"), std::string::npos) << t.provenance.effective;
}

TEST(ConfigSections, BadSectionsAndNamesAreNamedWithASuggestion) {
  const Ini unknown_section("[trian]\nhidden = 4\n");
  std::string e = user_error_of({"train", "--config", unknown_section.path(), "--data", "a", "--out", "d"});
  EXPECT_NE(e.find("[trian]"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean [train]?"), std::string::npos) << e;

  const Ini typo_in_section("[train]\nhiddne = 4\n");
  e = user_error_of({"train", "--config", typo_in_section.path(), "--data", "a", "--out", "d"});
  EXPECT_NE(e.find("[train] unknown option 'hiddne'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean hidden?"), std::string::npos) << e;

  // A typo in another subcommand's section is caught too (the file is checked whole, as at the top level).
  const Ini typo_elsewhere("[bench]\nstpes = 4\n");
  e = user_error_of({"train", "--config", typo_elsewhere.path(), "--data", "a", "--out", "d"});
  EXPECT_NE(e.find("did you mean steps?"), std::string::npos) << e;

  const Ini wrong_section("[eval]\nhidden = 4\n");
  e = user_error_of({"train", "--config", wrong_section.path(), "--data", "a", "--out", "d"});
  EXPECT_NE(e.find("[eval] sets 'hidden'"), std::string::npos) << e;
  EXPECT_NE(e.find("an option of bench, train"), std::string::npos) << e;

  const Ini typo_top("hiddne = 4\n");
  e = user_error_of({"train", "--config", typo_top.path(), "--data", "a", "--out", "d"});
  EXPECT_NE(e.find("unknown option 'hiddne'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean hidden?"), std::string::npos) << e;

  const Ini twice("[train]\nhidden = 4\nhidden = 5\n");
  e = user_error_of({"train", "--config", twice.path(), "--data", "a", "--out", "d"});
  EXPECT_NE(e.find("hidden"), std::string::npos) << e;
}

// Files a config cannot be: a folder (which opens and reads as nothing), a device, or a file naming another.
TEST(ConfigSections, NotARegularFileOrANestedConfigIsRefused) {
  std::string e = user_error_of({"train", "--config", "/tmp", "--data", "a", "--out", "d"});
  EXPECT_NE(e.find("not a regular file"), std::string::npos) << e;
  e = user_error_of({"train", "--config", "/dev/zero", "--data", "a", "--out", "d"});
  EXPECT_NE(e.find("not a regular file"), std::string::npos) << e;
  const Ini nested("config = other.ini\nhidden = 4\n");
  e = user_error_of({"train", "--config", nested.path(), "--data", "a", "--out", "d"});
  EXPECT_NE(e.find("sets 'config', which only the command line can give"), std::string::npos) << e;
}

TEST(DidYouMean, CommandLineSuggestsTheSubcommandsOwnOptions) {
  std::string e = user_error_of({"train", "--data", "a.h5", "--out", "d", "--hiddne", "3"});
  EXPECT_NE(e.find("did you mean --hidden?"), std::string::npos) << e;
  e = user_error_of({"train", "--data", "a.h5", "--out", "d", "--epohcs", "3"});
  EXPECT_NE(e.find("did you mean --epochs?"), std::string::npos) << e;
  e = user_error_of({"train", "--data", "a.h5", "--out", "d", "--chekpoint-every", "3"});
  EXPECT_NE(e.find("did you mean --checkpoint-every?"), std::string::npos) << e;
  // Another subcommand's option is named as such rather than guessed at.
  e = user_error_of({"train", "--data", "a.h5", "--out", "d", "--steps", "3"});
  EXPECT_NE(e.find("--steps is an option of bench, not of train"), std::string::npos) << e;
  // Nothing close: no guess, only where the options are listed.
  e = user_error_of({"train", "--data", "a.h5", "--out", "d", "--frobnicate", "3"});
  EXPECT_EQ(e.find("did you mean"), std::string::npos) << e;
  EXPECT_NE(e.find("ragtrain train --help"), std::string::npos) << e;
}

TEST(DidYouMean, MistypedChoice) {
  const std::string e = user_error_of({"train", "--data", "a.h5", "--out", "d", "--optimizer", "adamm"});
  EXPECT_NE(e.find("must be sgd, adam or adamw, got 'adamm' (did you mean adam or adamw?)"), std::string::npos) << e;
  EXPECT_NE(user_error_of({"train", "--data", "a.h5", "--out", "d", "--pool", "lst"}).find("(did you mean last?)"),
            std::string::npos);
  EXPECT_EQ(user_error_of({"train", "--data", "a.h5", "--out", "d", "--optimizer", "rmsprop"}).find("did you mean"),
            std::string::npos);
}

TEST(DidYouMean, MistypedCommand) {
  EXPECT_NE(user_error_of({"trian", "--data", "a.h5"}).find("did you mean train?"), std::string::npos);
  EXPECT_EQ(user_error_of({"frobnicate"}).find("did you mean"), std::string::npos);
}

TEST(DidYouMean, EditDistanceCountsSwapsAsOneEdit) {
  EXPECT_EQ(edit_distance("hidden", "hidden"), 0u);
  EXPECT_EQ(edit_distance("hiddne", "hidden"), 1u);
  EXPECT_EQ(edit_distance("hiden", "hidden"), 1u);
  EXPECT_EQ(edit_distance("lr", "seed"), 4u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(closest_names("sed", {"seed", "steps", "sequences"}), std::vector<std::string>{"seed"});
  EXPECT_TRUE(closest_names("data", {"seed", "lr"}).empty());
  EXPECT_EQ(closest_names("bta1", {"beta1", "beta2"}), std::vector<std::string>{"beta1"});
}

TEST(CountOf, OneRankTwoRanks) {
  EXPECT_EQ(count_of(1, "rank"), "1 rank");
  EXPECT_EQ(count_of(2, "rank"), "2 ranks");
  EXPECT_EQ(count_of(0, "sequence"), "0 sequences");
}
