// Where the training shard is held for a run: resident, or windows of W steps on the device or on the host too.
// Pure arithmetic on budgets, so every case is unit-tested without MPI or a GPU (doc/hpc.md, "Reading the data").
#pragma once

#include <cstdint>

namespace ragtrain {

enum class ShardPlacement {
  Resident,       // the whole shard on the host and (CUDA) on the device, copied once
  DeviceWindow,   // resident on the host; the device holds windows, each gathered from the host shard
  HostWindow,     // the host streams windows from the file; a device backend copies each to the device
};
const char* shard_placement_name(ShardPlacement p);   // "resident" | "device_window" | "host_window"

// Bytes one step's sequences take at most in a window: K of the longest, with labels (or targets) and bookkeeping.
int64_t window_step_bytes(int64_t batch_per_rank, int64_t max_length, int64_t features, int64_t label_bytes);

// Steps per window when two windows (the one trained on, the one being filled) share `room` bytes; 0 when not
// even one step fits (or `room` is negative).
int64_t window_steps_in(int64_t room, int64_t step_bytes);

// W for a run that starts streamed while its resident shard is read in the background (doc/hpc.md "Where the first
// step stands"): two windows in `room` (what --max-memory leaves beside the whole shard and the model), each at most
// kEarlySlotBytes so that the first is read in a fraction of a second whatever the shard's size, and at most
// `max_steps`. 0 (wait for the whole shard, as a resident run) when not one step fits, or when the first window
// would hold every step left or a whole epoch: it would then be the whole shard's read.
constexpr int64_t kEarlySlotBytes = int64_t{16} << 20;
int64_t early_window_steps(int64_t room, int64_t step_bytes, int64_t max_steps, int64_t steps_per_epoch,
                           int64_t steps_left);

// The device memory the training shard may take: what the device has free once the backend is set up (model,
// optimizer state, a step's activations) less a margin for what grows later (cuDNN workspaces, CUDA graphs, NCCL's
// buffers): 1/16 of the device, at least 256 MiB. --max-device-memory SIZE (`option_bytes`; -1 for auto) can only
// lower it: memory the device does not have cannot be promised.
int64_t device_shard_budget(int64_t option_bytes, int64_t free_bytes, int64_t total_bytes);

// What every rank agreed on (each a minimum over the ranks): whether the shard fits the host's budget and the
// device's (always true without a device), and how many steps a window may hold under each (device_steps < 0: no
// device).
struct ShardFit {
  bool host_fits = true;
  bool device_fits = true;
  int64_t host_steps = 0;
  int64_t device_steps = -1;
};

struct WindowPlan {
  ShardPlacement placement = ShardPlacement::Resident;
  int64_t steps = 0;          // W, the same on every rank; 0 when resident
  bool on_device = false;     // the device holds windows (DeviceWindow, or HostWindow with a device)
};

// Resident when the shard fits both; a device window when only the host's budget holds it; else host windows,
// whose W is also bounded by the device's budget when there is a device (every host window goes to the device).
WindowPlan plan_window(const ShardFit& fit);

}  // namespace ragtrain
