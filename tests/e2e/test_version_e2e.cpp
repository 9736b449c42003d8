// `ragtrain --version`: the release, the git revision, the backends and the library versions, printed once.
#include <hdf5.h>

#include <regex>

#include "e2e_util.hpp"

using namespace e2e;

namespace {
// The value of the line "KEY: VALUE" in `text`, or "" when there is none.
std::string field(const std::string& text, const std::string& key) {
  std::smatch m;
  const std::regex re("(^|\n)" + key + ": ([^\n]*)");
  return std::regex_search(text, m, re) ? m[2].str() : "";
}
}  // namespace

TEST(Version, PrintsReleaseRevisionBackendsAndLibraries) {
  const Result r = run(0, "--version");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("^ragtrain [0-9]+\\.[0-9]+\\.[0-9]+\n"))) << r.output;
  // `git describe --always --dirty` at build time: a hex revision (maybe "-dirty"), or "unknown" outside git.
  EXPECT_TRUE(std::regex_match(field(r.output, "git revision"), std::regex("[0-9a-f]{7,}(-dirty)?|unknown")))
      << r.output;
  const std::string backends = field(r.output, "backends");
  EXPECT_EQ(backends.rfind("cpu", 0), 0u) << r.output;
  // The same HDF5 this test links against (one installation on the machine).
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  EXPECT_EQ(field(r.output, "hdf5"), std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel))
      << r.output;
  EXPECT_TRUE(contains(field(r.output, "mpi"), "MPI")) << r.output;
  EXPECT_FALSE(field(r.output, "boost").empty()) << r.output;
  EXPECT_FALSE(field(r.output, "zlib").empty()) << r.output;
  if (contains(backends, "cuda")) {   // CUDA builds also name the toolkit's libraries
    EXPECT_FALSE(field(r.output, "cudnn").empty()) << r.output;
    EXPECT_FALSE(field(r.output, "nccl").empty()) << r.output;
  }
}

TEST(Version, PrintedOnceOnSeveralRanks) {
  const Result r = run(2, "--version");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(r.rank_rcs, (std::vector<int>{0, 0}));
  size_t n = 0;
  for (size_t at = r.output.find("git revision:"); at != std::string::npos; at = r.output.find("git revision:", at + 1)) ++n;
  EXPECT_EQ(n, 1u) << r.output;
}

TEST(Version, ExtraArgumentsAreAUserError) {
  const Result r = run(2, "--version train");
  EXPECT_EQ(r.rank_rcs, (std::vector<int>{2, 2})) << r.output;
  EXPECT_TRUE(contains(r.output, "--version takes no other arguments")) << r.output;
  EXPECT_TRUE(contains(r.output, "hint:")) << r.output;
}

TEST(Version, NamedInTheProgramHelp) {
  const Result r = run(0, "--help");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "ragtrain --version")) << r.output;
}
