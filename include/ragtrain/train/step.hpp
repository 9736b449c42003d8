// One global training step as train and bench run it: schedule slots -> shard positions -> backend phases,
// timed into the rank's counters.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/metrics/metrics.hpp"
#include "ragtrain/metrics/trace.hpp"
#include "ragtrain/schedule/schedule.hpp"

namespace ragtrain {

// Maps the schedule's global indices to positions in this rank's shard.
class ShardIndex {
 public:
  explicit ShardIndex(const Shard& shard);
  // Fills `positions` (K) for the rank's slots at `step`; -1 where the slot is empty. Adds the sequences and
  // timesteps to `counters`.
  void positions(const Schedule::Epoch& epoch, int64_t step, int64_t rank, std::vector<int64_t>& positions,
                 RankCounters& counters) const;

 private:
  const Shard& shard_;
  std::unordered_map<int64_t, int64_t> pos_;
};

// forward+backward, all-reduce, update; compute and communication time go to `counters`, the three phases to
// `timeline` (may be null) as global step `step` (1-based). `while_computing` (may be empty) runs on the host right
// after forward+backward is issued: on a GPU it then overlaps the step's kernels instead of delaying the next step.
StepTotals train_step(Backend& backend, const std::vector<int64_t>& positions, float lr, RankCounters& counters,
                      Timeline* timeline = nullptr, int64_t step = 0,
                      const std::function<void()>& while_computing = {});

}  // namespace ragtrain
