// What a user notices at the terminal: "1 rank" (not "1 ranks"), errors before the configuration dump (never
// buried under it), and a [train] section of a config file used by a real run.
#include "e2e_util.hpp"

using namespace e2e;

namespace {

void gen(const Scratch& d, const std::string& name, const std::string& extra) {
  const Result r = run(0, "gen --out " + d / name + " --features 3 --min-length 4 --max-length 12 --classes 2 " + extra);
  ASSERT_EQ(r.rc, 0) << r.output;
}

}  // namespace

TEST(CliSmall, OneRankIsSingularAndTheSectionOfTheConfigApplies) {
  Scratch d;
  gen(d, "train.h5", "--sequences 20");
  std::ofstream(d / "run.ini") << "hidden = 4\nepochs = 5\n[train]\nhidden = 6\nepochs = 1\n[bench]\nsteps = 3\n";
  const Result r = run(1, "train --config " + d / "run.ini" + " --data " + d / "train.h5" + " --out " + d / "run");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "# effective configuration (1 rank)\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "on 1 rank x 1 per step")) << r.output;
  EXPECT_FALSE(contains(r.output, "1 ranks")) << r.output;
  // [train] won over the top level, and [bench]'s steps stayed out of train.
  EXPECT_TRUE(contains(r.output, "\nhidden = 6\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "\nepochs = 1\n")) << r.output;
  EXPECT_EQ(read_json(d / "run/summary.json")["epochs"], 1) << r.output;

  const Result two = run(2, "train --config " + d / "run.ini" + " --data " + d / "train.h5" + " --out " + d / "run2");
  ASSERT_EQ(two.rc, 0) << two.output;
  EXPECT_TRUE(contains(two.output, "# effective configuration (2 ranks)\n")) << two.output;
}

// Every check of the set-up phases (data headers, --init-from, the backend) runs before the configuration is
// printed: a failing run prints its error, not a configuration that looks as if it had started.
TEST(CliSmall, ErrorsComeBeforeTheConfigurationDump) {
  Scratch d;
  gen(d, "train.h5", "--sequences 12");
  const Result missing = run(2, "train --data " + d / "nope.h5" + " --out " + d / "a");
  EXPECT_EQ(missing.rc, 2) << missing.output;
  EXPECT_TRUE(contains(missing.output, "nope.h5")) << missing.output;
  EXPECT_FALSE(contains(missing.output, "effective configuration")) << missing.output;

  const Result first = run(1, "train --data " + d / "train.h5" + " --out " + d / "first --hidden 4 --epochs 1 --quiet");
  ASSERT_EQ(first.rc, 0) << first.output;
  // A model of another size: found only when the backend is built (Trainer::setup_backend).
  const Result init = run(2, "train --data " + d / "train.h5" + " --out " + d / "b --hidden 5 --init-from " +
                                 d / "first/checkpoint.h5");
  EXPECT_EQ(init.rc, 2) << init.output;
  EXPECT_TRUE(contains(init.output, "--init-from")) << init.output;
  EXPECT_FALSE(contains(init.output, "effective configuration")) << init.output;
  EXPECT_FALSE(std::filesystem::exists(d / "b/metrics.jsonl")) << "a refused run left its folder behind";
}
