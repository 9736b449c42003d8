// The training shard's placement and window size from the host's and the device's budgets.
#include "ragtrain/train/window_plan.hpp"

#include <algorithm>

namespace ragtrain {

const char* shard_placement_name(ShardPlacement p) {
  switch (p) {
    case ShardPlacement::Resident: return "resident";
    case ShardPlacement::DeviceWindow: return "device_window";
    case ShardPlacement::HostWindow: return "host_window";
  }
  return "?";
}

int64_t window_step_bytes(int64_t batch_per_rank, int64_t max_length, int64_t features, int64_t label_bytes) {
  // 24: the sequence's global index, its row offset and its length as the shard and the window's copy keep them.
  return batch_per_rank * (max_length * features * 4 + label_bytes + 24);
}

int64_t window_steps_in(int64_t room, int64_t step_bytes) {
  if (room <= 0 || step_bytes <= 0) return 0;
  return room / 2 / step_bytes;
}

int64_t early_window_steps(int64_t room, int64_t step_bytes, int64_t max_steps, int64_t steps_per_epoch,
                           int64_t steps_left) {
  int64_t steps = std::min(window_steps_in(room, step_bytes), window_steps_in(2 * kEarlySlotBytes, step_bytes));
  steps = std::min(steps, max_steps);
  return steps >= 1 && steps < steps_per_epoch && steps < steps_left ? steps : 0;
}

int64_t device_shard_budget(int64_t option_bytes, int64_t free_bytes, int64_t total_bytes) {
  const int64_t margin = std::max<int64_t>(int64_t{256} << 20, total_bytes / 16);
  const int64_t usable = std::max<int64_t>(0, free_bytes - margin);
  return option_bytes < 0 ? usable : std::min(option_bytes, usable);
}

WindowPlan plan_window(const ShardFit& fit) {
  WindowPlan plan;
  const bool device = fit.device_steps >= 0;
  if (fit.host_fits && fit.device_fits) return plan;
  if (fit.host_fits) {
    plan.placement = ShardPlacement::DeviceWindow;
    plan.steps = std::max<int64_t>(0, fit.device_steps);
  } else {
    plan.placement = ShardPlacement::HostWindow;
    plan.steps = device ? std::min(fit.host_steps, fit.device_steps) : fit.host_steps;
  }
  plan.on_device = device;
  return plan;
}

}  // namespace ragtrain
