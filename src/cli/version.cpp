// `ragtrain --version`: release, git revision, built backends and linked library versions, one per line.
#include "ragtrain/cli/version.hpp"

#include <sstream>

#include "ragtrain/metrics/provenance.hpp"

namespace ragtrain {

std::vector<std::string> built_backends() {
#ifdef RAGTRAIN_WITH_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

std::string version_text() {
  std::ostringstream s;
  s << "ragtrain " << kRagtrainVersion << "\n";
  s << "git revision: " << git_revision() << "\n";
  s << "backends:";
  const std::vector<std::string> backends = built_backends();
  for (size_t i = 0; i < backends.size(); ++i) s << (i ? ", " : " ") << backends[i];
  s << "\n";
  const Json libs = library_versions();
  for (auto it = libs.begin(); it != libs.end(); ++it)
    s << it.key() << ": " << (it.value().is_string() ? it.value().get<std::string>() : it.value().dump()) << "\n";
  return s.str();
}

}  // namespace ragtrain
