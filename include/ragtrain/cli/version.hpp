// `ragtrain --version`: the release, the git revision, the backends compiled in and the libraries linked in.
#pragma once

#include <string>
#include <vector>

namespace ragtrain {

// The release of ragtrain; the git revision (git_revision()) tells builds of one release apart.
inline constexpr const char* kRagtrainVersion = "0.1.0";

// The backends this binary can run: "cpu" always, "cuda" in builds with CUDA, cuDNN and NCCL.
std::vector<std::string> built_backends();

// The text `ragtrain --version` prints: one "key: value" line each for the release, git revision, backends and
// every library version of library_versions() (the same record summary.json and bench JSON keep).
std::string version_text();

}  // namespace ragtrain
