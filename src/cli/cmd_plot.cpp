// `ragtrain plot`: PNG figures of a train run folder or of a folder of bench records (one process suffices).
#include <cstdio>

#include "ragtrain/cli/commands.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/metrics/plots.hpp"

namespace ragtrain {

int run_plot(const Context& ctx, const PlotConfig& cfg) {
  // Rank 0 draws; the others only learn whether it worked, so every rank exits with the same code.
  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    const PlotOutputs p = plot_folder(cfg.run, cfg.out);
    if (!p.scaling_table.empty()) std::printf("%s", p.scaling_table.c_str());
    if (!cfg.talk.quiet)
      for (const std::string& img : p.images) std::printf("# wrote %s\n", img.c_str());
    std::fflush(stdout);
  });
  return kExitOk;
}

}  // namespace ragtrain
