// The CPU backend: the reference LSTM per sequence, MPI_Allreduce, the reference optimizer.
#pragma once

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/backend/cpu_lstm.hpp"

namespace ragtrain {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const ModelShape& shape, const BackendOptions& opts);

  std::string name() const override { return "cpu"; }
  void set_params(const std::vector<float>& params) override;
  std::vector<float> params() const override { return params_; }
  OptimizerState optimizer_state() const override { return opt_.state(); }
  void set_optimizer_state(const OptimizerState& state) override { opt_.set_state(state); }
  void set_train_shard(const Shard& shard) override { shard_ = &shard; }
  // The device window's CPU reference (tests, and the CPU half of its checks): with RAGTRAIN_CPU_DEVICE_MEMORY=SIZE
  // in the environment this backend says it has a device of SIZE, and keeps the windows staged into its two slots
  // as copies of its own, so the trainer's device-window path runs, bitwise checked, where no GPU is. Unset: no
  // device (the windows, if any, are the host's).
  std::optional<DeviceMemory> device_memory() const override;
  void open_device_window(const DeviceWindowSize&) override {}
  // The reader thread: writes that slot only.
  void stage_window(const Shard& window, const WindowFeatures& features, int slot) override;
  void use_window(const Shard& window, int slot) override;
  void close_device_window() override;
  void forward_backward(const std::vector<int64_t>& positions) override;
  void allreduce() override;
  StepTotals update(float lr) override;
  LocalNonfinite first_nonfinite(const std::vector<int64_t>& positions) override;
  std::vector<float> infer(const Shard& shard) override;

 private:
  ParamLayout layout_;
  MPI_Comm comm_;
  CommWatchdog* watchdog_;   // may be null
  DropoutRates dropout_;
  uint64_t seed_;
  Optimizer opt_;
  const Shard* shard_ = nullptr;
  int64_t device_bytes_ = -1;   // RAGTRAIN_CPU_DEVICE_MEMORY, -1: unset
  Shard slots_[2];              // the emulated device's windows
  std::vector<float> params_;   // (P) PyTorch layout
  // (P + kFusedExtras) gradient sums, loss sum, count, correct — in double: each sequence's float gradient is
  // added whole, so the sums of the same sequences agree to double rounding whatever the order (P ranks x 1
  // or 1 rank x P), and round to the same float in all but rare ties.
  std::vector<double> fused_;
  std::vector<float> seq_grad_; // (P) one sequence's gradient
  std::vector<float> mean_grad_;  // (P) the averaged gradient handed to the optimizer
  LstmCache<float> cache_;
  std::vector<float> d_out_;    // (outputs)
};

}  // namespace ragtrain
