// Help, version and --print-config answered before MPI starts: parsed as usual, printed by the launcher's rank 0.
#include "ragtrain/cli/quick_answer.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ragtrain/cli/options.hpp"
#include "ragtrain/cli/version.hpp"
#include "ragtrain/core/error.hpp"

namespace ragtrain {

int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoi(v);
  return 0;
}

std::optional<int> answer_without_mpi(int argc, const char* const* argv) {
  std::string text;
  int code = kExitOk;
  FILE* to = stdout;
  if (argc == 2 && std::string(argv[1]) == "--version") {
    text = version_text();
  } else {
    Invocation inv;
    try {
      inv = parse_command_line(argc, argv);
    } catch (...) {
      return std::nullopt;   // reported by every rank together, after MPI_Init
    }
    if (inv.help) {
      text = inv.help_text;
      code = inv.exit_code;
      if (code != kExitOk) to = stderr;
    } else if (inv.config.print_config) {
      text = inv.config.provenance.effective;
    } else {
      return std::nullopt;
    }
  }
  if (launcher_rank() == 0) {
    std::fputs(text.c_str(), to);
    std::fflush(to);
  }
  return code;
}

}  // namespace ragtrain
