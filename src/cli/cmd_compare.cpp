// `ragtrain compare`: several train runs in one table (rank 0 reads and prints; one process suffices).
#include <cstdio>

#include "ragtrain/cli/commands.hpp"
#include "ragtrain/cli/options.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/output_file.hpp"
#include "ragtrain/metrics/compare.hpp"

namespace ragtrain {

int run_compare(const Context& ctx, const CompareConfig& cfg) {
  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    std::vector<RunSummary> runs;
    for (const std::string& r : cfg.runs) runs.push_back(read_run_summary(r));
    const Comparison c = compare_runs(runs, record_keeping_options());
    std::printf("%s", comparison_table(c).c_str());
    if (!cfg.out.empty()) {
      const bool csv = cfg.out.size() >= 4 && cfg.out.compare(cfg.out.size() - 4, 4, ".csv") == 0;
      write_text_atomic(cfg.out, csv ? comparison_csv(c) : comparison_json(c).dump(2) + "\n");
      if (!cfg.talk.quiet) std::printf("# wrote %s\n", cfg.out.c_str());
    }
    std::fflush(stdout);
  });
  return kExitOk;
}

}  // namespace ragtrain
