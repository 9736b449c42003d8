// Locating the rank and sequence of a non-finite step, and its message.
#include "ragtrain/train/nonfinite.hpp"

#include <cmath>

#include "ragtrain/comm/watchdog.hpp"
#include "ragtrain/core/error.hpp"

namespace ragtrain {

NonfiniteStep locate_nonfinite(const Context& ctx, Backend& backend, const std::vector<int64_t>& positions,
                               const Shard& shard, const StepTotals& totals, int64_t step) {
  const LocalNonfinite local = backend.first_nonfinite(positions);
  NonfiniteStep r;
  r.step = step;
  const int mine = local.slot >= 0 ? ctx.rank : ctx.size;
  int lowest = ctx.size;
  watched_allreduce(ctx, &mine, &lowest, 1, MPI_INT, MPI_MIN, "the search for the rank of a non-finite step");
  // The lowest guilty rank contributes its sequence and kind, every other rank -1 and 0, so a MAX broadcasts them.
  int64_t info[2] = {-1, 0};
  if (ctx.rank == lowest) {
    const int64_t pos = positions[static_cast<size_t>(local.slot)];
    info[0] = shard.indices[static_cast<size_t>(pos)];
    info[1] = local.loss ? 1 : 0;
  }
  int64_t all[2] = {-1, 0};
  watched_allreduce(ctx, info, all, 2, MPI_INT64_T, MPI_MAX, "the search for the sequence of a non-finite step");
  if (lowest < ctx.size) {
    r.rank = lowest;
    r.sequence = all[0];
    r.loss = all[1] != 0;
  } else {
    r.loss = !std::isfinite(totals.loss_sum);
  }
  return r;
}

std::string describe(const NonfiniteStep& s, const std::string& data_path) {
  if (s.rank < 0)
    return RT_MSG("step " << s.step << ": non-finite " << s.what()
                          << " after the sum over the ranks (every sequence of the step is finite on its own: the "
                             "sum overflowed)");
  return RT_MSG("step " << s.step << ": non-finite " << s.what() << " on rank " << s.rank << ", sequence "
                        << s.sequence << " (index in '" << data_path << "')");
}

}  // namespace ragtrain
