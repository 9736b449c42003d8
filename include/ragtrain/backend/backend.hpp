// The seam between the training loop and a compute backend (cpu reference, cuda): one step = forward+backward
// into a fused buffer, the all-ranks sum of that buffer, and the identical optimizer update on every rank.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ragtrain/data/shard.hpp"
#include "ragtrain/data/window_features.hpp"
#include "ragtrain/model/model.hpp"
#include "ragtrain/optim/optimizer.hpp"

namespace ragtrain {

// Totals of one global step after the all-reduce (identical on every rank).
struct StepTotals {
  double loss_sum = 0;    // sum over the step's sequences of the per-sequence loss
  double count = 0;       // sequences in the global step
  double correct = 0;     // classification: sequences whose argmax equals the label
  double grad_norm = 0;   // global gradient norm of the averaged gradient, before clipping
  // The summed loss and the averaged gradient (its norm) are finite. Decided from the all-reduced buffer, so every
  // rank reaches the same verdict without communicating; when false the update was NOT applied (parameters,
  // optimizer moments and step count unchanged) and the caller stops or skips the step (--on-nonfinite).
  bool finite = true;
};

// Which of a rank's own sequences made a step non-finite (Backend::first_nonfinite).
struct LocalNonfinite {
  int64_t slot = -1;        // index into the step's positions; -1: every sequence of this rank is finite alone
  bool loss = false;        // its loss is non-finite (else only its gradient)
};

// Fused buffer layout shared by every backend: [ P gradient sums | loss_sum | count | correct ].
inline constexpr int64_t kFusedExtras = 3;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // One line on what runs the steps (the CUDA backend: GPU, cuDNN algorithm, LSTM path); bench records it.
  virtual std::string describe() const { return name() + " backend"; }

  virtual void set_params(const std::vector<float>& params) = 0;   // flat, PyTorch layout
  virtual std::vector<float> params() const = 0;
  // The optimizer's state for a checkpoint: a copy in PyTorch layout (a device backend downloads it). Reading
  // it changes nothing; set_optimizer_state restores one (UserError when the sizes do not fit).
  virtual OptimizerState optimizer_state() const = 0;
  virtual void set_optimizer_state(const OptimizerState& state) = 0;

  // The rank's training shard; kept (on the device for GPUs) for the whole run.
  virtual void set_train_shard(const Shard& shard) = 0;

  // The device window (doc/hpc.md, "The device window"), for a backend whose training data lives in device memory
  // of its own. device_memory: what the device has, after the backend's set-up (nullopt: the host's memory is the
  // device's, and the device-window calls below are never made). open_device_window sizes two slots for windows of
  // at most `size`. stage_window runs on the window's reader thread as soon as a window is read: it queues the copy
  // of `window`, its feature rows taken from `features`, into `slot` and returns; both may be freed then.
  // use_window runs on the loop's thread when the loop reaches that window, after its stage_window returned: from
  // then on the step's positions are `window`'s, read from `slot`. Window k goes to slot k % 2; a slot is staged
  // again only after the other one was used.
  struct DeviceMemory {
    int64_t free = 0, total = 0;   // bytes
  };
  struct DeviceWindowSize {
    int64_t sequences = 0;       // at most this many sequences in one window
    int64_t timesteps = 0;       // and this many rows of features
    int64_t min_length = 1, max_length = 1;   // over the whole shard: the shapes validated once, at the open
    int copy_threads = 1;        // host threads that fill the pinned staging (the window reader's)
  };
  virtual std::optional<DeviceMemory> device_memory() const { return std::nullopt; }
  virtual void open_device_window(const DeviceWindowSize& size);
  virtual void stage_window(const Shard& window, const WindowFeatures& features, int slot);
  virtual void use_window(const Shard& window, int slot);
  // Back from the window's slots to a whole shard (a run that started on device windows while its resident shard
  // was read; doc/hpc.md "Where the first step stands"): the slots go, and set_train_shard follows, as at a start.
  // Waits once for the work queued on the slots.
  virtual void close_device_window();

  // The global step (0-based) the next forward_backward calls belong to. With dropout the masks are keyed by it
  // and by each sequence's global index (Shard::indices), so they do not depend on the rank count; without
  // dropout it changes nothing.
  void set_global_step(int64_t step) { global_step_ = step; }

  // Zeroes the fused buffer, then adds the gradients, losses, count and correct predictions of the given
  // shard positions (-1 entries are skipped: the uneven last step). Training mode: dropout applies.
  virtual void forward_backward(const std::vector<int64_t>& positions) = 0;

  // The positions of the next forward_backward, when the caller knows them during this step (the trainer does).
  // A GPU backend may launch that step's forward and backward right after this step's update, before the host waits
  // for the totals, so the GPU does not idle while the host logs, schedules and launches; the next forward_backward
  // with the same positions then takes that work over. Anything else before it (other positions, new parameters,
  // state or shard, the failure path) discards it: the result is the same either way. Default: ignored.
  virtual void prepare_next(const std::vector<int64_t>& positions) { (void)positions; }

  // Sums the fused buffer over all ranks (the step's only collective).
  virtual void allreduce() = 0;

  // Divides by the global count, clips, updates the parameters with learning rate `lr`; returns the totals. A
  // non-finite summed loss or gradient skips the update (StepTotals::finite), at no extra cost per step.
  virtual StepTotals update(float lr) = 0;

  // Only after a non-finite step (the failure path, never per step): recomputes this rank's sequences of that step
  // one by one and says which is the first with a non-finite loss or gradient of its own. Overwrites the fused
  // buffer; the next forward_backward starts afresh.
  virtual LocalNonfinite first_nonfinite(const std::vector<int64_t>& positions) = 0;

  // Head outputs (n, outputs) of every sequence of `shard` with the current parameters (no gradients).
  virtual std::vector<float> infer(const Shard& shard) = 0;

  // Seconds spent per phase since the last call (e.g. "forward", "backward", "allreduce", "optimizer"), for
  // backends that measure them (the GPU with events); resets the counters. Empty when not measured.
  virtual std::vector<std::pair<std::string, double>> take_phase_seconds() { return {}; }

  // Seconds each part of the backend's set-up took, in order (the GPU's context, NCCL, cuDNN's algorithm
  // measurement, the --lstm auto probe, ...), on this rank; empty where nothing is worth telling apart.
  virtual std::vector<std::pair<std::string, double>> setup_seconds() const { return {}; }

  // Waits until queued device work is done (a no-op on the CPU); for timing whole steps in benchmarks.
  virtual void synchronize() {}

 protected:
  int64_t global_step_ = 0;   // set_global_step
};

class CommWatchdog;   // comm/watchdog.hpp

// --device, parsed once at the command line. Auto: CUDA when every rank sees a GPU, else the CPU.
enum class Device { Cpu, Cuda, Auto };
const char* device_name(Device d);                           // "cpu" | "cuda" | "auto"
std::optional<Device> parse_device(const std::string& name);

// --lstm, parsed once at the command line: the CUDA backend's LSTM. Fused: ragtrain's kernels, no launch per timestep
// (1 to 4 layers, one or both directions, H <= 512; other models use cuDNN). Auto: the faster of the two, measured at start-up on rank 0.
enum class LstmPath { Cudnn, Fused, Auto };
const char* lstm_path_name(LstmPath p);                      // "cudnn" | "fused" | "auto"

// The most sequences per rank per step (K) the CUDA backend takes: its gather kernel's slot table
// (kMaxGatherSlots in src/backend/cuda/batch_gather.hpp). The option checks refuse a larger --batch-per-rank
// with --device cuda|auto before any work.
inline constexpr int64_t kMaxCudaBatchPerRank = 1024;

// Everything a backend needs, given at construction: it measures and sizes for `batch` there, never in a step.
struct BackendOptions {
  Device device = Device::Cpu;
  int64_t batch = 1;            // K: sequences per rank per step (forward_backward's positions.size())
  LstmPath lstm = LstmPath::Cudnn;   // CUDA backend (train and bench: --lstm, default auto)
  OptimizerConfig optimizer;
  MPI_Comm comm = MPI_COMM_WORLD;
  int local_rank = 0;           // picks the GPU
  CommWatchdog* watchdog = nullptr;   // train's: allreduce() waits under --comm-timeout once it is armed
  DropoutRates dropout;         // training-time dropout (forward_backward only)
  uint64_t seed = 0;            // keys the dropout masks (the run's --seed)
  int copy_threads = 1;         // host threads that may copy a shard into device memory (set_train_shard)
};

// Creates the backend named by opts.device for `shape`. Throws UserError when the device is unavailable.
std::unique_ptr<Backend> make_backend(const ModelShape& shape, const BackendOptions& opts);

}  // namespace ragtrain
