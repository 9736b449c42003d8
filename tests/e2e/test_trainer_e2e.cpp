// The train/bench front door: mistakes a new user makes end with a message and exit 2 on every rank (never an
// internal error), options a subcommand does not use are refused, and flows that used to break now run.
#include "e2e_util.hpp"

using namespace e2e;

namespace {

void gen(const Scratch& d, const std::string& name, const std::string& extra) {
  const Result r = run(0, "gen --out " + d / name + " --features 3 --min-length 4 --max-length 12 --classes 3 " + extra);
  ASSERT_EQ(r.rc, 0) << r.output;
}

// Every rank ended with `code` (rank_rcs lists each rank's own exit code).
void expect_every_rank(const Result& r, int code) {
  ASSERT_FALSE(r.rank_rcs.empty()) << r.output;
  for (size_t i = 0; i < r.rank_rcs.size(); ++i) EXPECT_EQ(r.rank_rcs[i], code) << "rank " << i << "\n" << r.output;
}

}  // namespace

// Was exit 3 ("scaling has 3 features, data 0"): the empty validation shard was standardised too.
TEST(TrainerFrontDoor, NormalizeWithoutValTrains) {
  Scratch d;
  gen(d, "a.h5", "--sequences 40");
  for (int np : {1, 2}) {
    const std::string out = d / ("run" + std::to_string(np));
    const Result r = run(np, "train --data " + d / "a.h5" + " --out " + out + " --normalize --epochs 1 --quiet");
    EXPECT_EQ(r.rc, 0) << r.output;
    expect_every_rank(r, 0);
    EXPECT_TRUE(std::filesystem::exists(out + "/checkpoint.h5"));
    // eval applies the stored statistics (it reads them from the checkpoint).
    const Result e = run(1, "eval --checkpoint " + out + "/checkpoint.h5 --data " + d / "a.h5");
    EXPECT_EQ(e.rc, 0) << e.output;
  }
}

// Was exit 3 (an internal check in the optimizer, after set-up).
TEST(TrainerFrontDoor, BenchRefusesAnUnknownOptimizer) {
  for (int np : {1, 2}) {
    const Result r = run(np, "bench --optimizer foo --steps 2 --warmup 0 --sequences 20 --hidden 4");
    expect_every_rank(r, 2);
    EXPECT_TRUE(contains(r.output, "--optimizer")) << r.output;
    EXPECT_TRUE(contains(r.output, "must be sgd, adam or adamw, got 'foo'")) << r.output;
    EXPECT_FALSE(contains(r.output, "internal")) << r.output;
  }
}

// Options bench does not use are refused instead of accepted and ignored.
TEST(TrainerFrontDoor, BenchRefusesOptionsItDoesNotUse) {
  for (const char* opt : {"--momentum 0.5", "--beta1 0.8", "--warmup-steps 3", "--lr-decay cosine", "--normalize",
                          "--log-every 5"}) {
    const Result r = run(1, std::string("bench --steps 2 --warmup 0 --sequences 20 --hidden 4 ") + opt);
    EXPECT_EQ(r.rc, 2) << opt << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "unrecognised option")) << r.output;
  }
  const Result ok = run(1, "bench --steps 2 --warmup 0 --sequences 20 --hidden 4 --optimizer sgd --clip 1 --lr 0.01");
  EXPECT_EQ(ok.rc, 0) << ok.output;
}

// The CUDA backend's 1,024-slot limit is checked with the options, before any data is read or folder made (was an
// internal error in the first step). A build without CUDA refuses --device cuda itself, also with exit 2.
TEST(TrainerFrontDoor, CudaBatchLimitBeforeAnyWork) {
  Scratch d;
  gen(d, "a.h5", "--sequences 20");
  for (const std::string& cmd : {"train --data " + d / "a.h5" + " --out " + d / "run", std::string("bench")}) {
    const Result r = run(2, cmd + " --device cuda --batch-per-rank 2000");
    expect_every_rank(r, 2);
    EXPECT_TRUE(contains(r.output, "--batch-per-rank") || contains(r.output, "this build has no CUDA backend"))
        << r.output;
    EXPECT_FALSE(contains(r.output, "internal")) << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(d / "run"));
}

// Every string choice is parsed once, at the command line: a bad value names the option and the choices.
TEST(TrainerFrontDoor, StringChoicesAreCheckedAtTheCommandLine) {
  Scratch d;
  gen(d, "a.h5", "--sequences 20");
  const std::string train = "train --data " + d / "a.h5" + " --out " + d / "run ";
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {train + "--lr-decay steep", "must be none, linear or cosine, got 'steep'"},
           {train + "--schedule sorted", "must be balanced or random, got 'sorted'"},
           {train + "--on-nonfinite ignore", "must be stop or skip, got 'ignore'"},
           {"gen --out " + d / "x.h5" + " --task ranking", "must be classification or regression, got 'ranking'"}}) {
    const Result r = run(1, args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, want)) << r.output;
  }
}
