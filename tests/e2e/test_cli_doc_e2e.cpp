// doc/cli.md is generated from the option table; this test fails when the two drift apart.
#include "e2e_util.hpp"

using namespace e2e;

TEST(CliDoc, ReferenceMatchesTheOptionTable) {
  Scratch d;
  const std::string cmd = repo_path("scripts/gen-cli-doc.sh") + " " + bin() + " > " + d / "cli.md";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream a(d / "cli.md"), b(repo_path("doc/cli.md"));
  const std::string got((std::istreambuf_iterator<char>(a)), {}), want((std::istreambuf_iterator<char>(b)), {});
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got, want) << "doc/cli.md is stale: run scripts/gen-cli-doc.sh build/bin/ragtrain > doc/cli.md";
}
