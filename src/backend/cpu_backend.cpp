// CPU backend, the backend factory and the names of --device.
#include "cpu_backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "ragtrain/comm/gradient_comm.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/memory.hpp"

#ifdef RAGTRAIN_WITH_CUDA
#include "cuda/cuda_backend_factory.hpp"
#endif

namespace ragtrain {

CpuBackend::CpuBackend(const ModelShape& shape, const BackendOptions& opts)
    : layout_(shape), comm_(opts.comm), watchdog_(opts.watchdog), dropout_(opts.dropout), seed_(opts.seed), opt_(opts.optimizer, layout_.total()),
      params_(static_cast<size_t>(layout_.total()), 0.0f),
      fused_(static_cast<size_t>(layout_.total() + kFusedExtras), 0.0),
      seq_grad_(static_cast<size_t>(layout_.total())), mean_grad_(static_cast<size_t>(layout_.total())),
      d_out_(static_cast<size_t>(shape.outputs)) {
  if (const char* e = std::getenv("RAGTRAIN_CPU_DEVICE_MEMORY")) {
    device_bytes_ = parse_size(e);
    USER_CHECK(device_bytes_ > 0, "RAGTRAIN_CPU_DEVICE_MEMORY='" << e << "' is not a size",
               "set it to a size such as 1G, or unset it");
  }
}

std::optional<Backend::DeviceMemory> CpuBackend::device_memory() const {
  if (device_bytes_ < 0) return std::nullopt;
  return DeviceMemory{device_bytes_, device_bytes_};
}

void CpuBackend::stage_window(const Shard& window, const WindowFeatures& features, int slot) {
  RT_CHECK(device_bytes_ >= 0 && (slot == 0 || slot == 1), "stage_window without an emulated device, slot " << slot);
  Shard& s = slots_[slot];
  copy_header(s, window);
  s.indices = window.indices;
  s.offsets = window.offsets;
  s.features.resize(features.size());
  features.copy(s.features.data(), 0, features.size());
  s.labels = window.labels;
  s.targets = window.targets;
}

void CpuBackend::use_window(const Shard& window, int slot) {
  RT_CHECK(device_bytes_ >= 0 && (slot == 0 || slot == 1), "use_window without an emulated device, slot " << slot);
  RT_CHECK(slots_[slot].indices == window.indices, "window used from slot " << slot << " is not the one staged there");
  shard_ = &slots_[slot];
}

void CpuBackend::close_device_window() {
  RT_CHECK(device_bytes_ >= 0, "close_device_window without an emulated device");
  slots_[0] = Shard{};
  slots_[1] = Shard{};
  shard_ = nullptr;   // set_train_shard next
}

void CpuBackend::set_params(const std::vector<float>& params) {
  RT_CHECK(static_cast<int64_t>(params.size()) == layout_.total(), "parameter count mismatch");
  params_ = params;
}

void CpuBackend::forward_backward(const std::vector<int64_t>& positions) {
  RT_CHECK(shard_ != nullptr, "set_train_shard first");
  std::fill(fused_.begin(), fused_.end(), 0.0);
  const int64_t P = layout_.total();
  const int64_t C = layout_.shape().outputs;
  double* extras = fused_.data() + P;
  for (int64_t pos : positions) {
    if (pos < 0) continue;
    const DropoutDraw drop{dropout_, DropoutKey{seed_, global_step_, shard_->indices[static_cast<size_t>(pos)]}};
    const float* out = lstm_forward(layout_, params_.data(), shard_->x(pos), shard_->length(pos), cache_, drop);
    const bool cls = shard_->task == Task::Classification;
    const int32_t label = cls ? shard_->labels[static_cast<size_t>(pos)] : 0;
    const float* target = cls ? nullptr : shard_->target(pos);
    extras[0] += loss_and_grad(shard_->task, out, C, label, target, d_out_.data());
    extras[1] += 1.0;
    if (cls && argmax(out, C) == label) extras[2] += 1.0;
    std::fill(seq_grad_.begin(), seq_grad_.end(), 0.0f);
    lstm_backward(layout_, params_.data(), shard_->x(pos), cache_, d_out_.data(), seq_grad_.data());
    for (int64_t i = 0; i < P; ++i) fused_[static_cast<size_t>(i)] += seq_grad_[static_cast<size_t>(i)];
  }
}

void CpuBackend::allreduce() {
  mpi_allreduce_sum(fused_.data(), static_cast<int64_t>(fused_.size()), comm_, watchdog_);
}

StepTotals CpuBackend::update(float lr) {
  const int64_t P = layout_.total();
  StepTotals t;
  t.loss_sum = fused_[static_cast<size_t>(P)];
  t.count = fused_[static_cast<size_t>(P + 1)];
  t.correct = fused_[static_cast<size_t>(P + 2)];
  RT_CHECK(t.count > 0, "a global step without sequences");
  for (int64_t i = 0; i < P; ++i) mean_grad_[static_cast<size_t>(i)] = static_cast<float>(fused_[static_cast<size_t>(i)] / t.count);
  // The norm is computed for clipping anyway and is non-finite exactly when some element is (a float squared
  // fits a double), so the check costs nothing. Every rank holds the same sums: the same verdict everywhere.
  t.grad_norm = global_norm(mean_grad_.data(), P);
  t.finite = std::isfinite(t.loss_sum) && std::isfinite(t.grad_norm);
  if (t.finite) opt_.step(params_.data(), mean_grad_.data(), lr, t.grad_norm);
  return t;
}

LocalNonfinite CpuBackend::first_nonfinite(const std::vector<int64_t>& positions) {
  const size_t P = static_cast<size_t>(layout_.total());
  for (size_t k = 0; k < positions.size(); ++k) {
    if (positions[k] < 0) continue;
    forward_backward({positions[k]});
    LocalNonfinite r;
    r.loss = !std::isfinite(fused_[P]);
    bool bad = r.loss;
    for (size_t i = 0; i < P && !bad; ++i) bad = !std::isfinite(fused_[i]);
    if (bad) {
      r.slot = static_cast<int64_t>(k);
      return r;
    }
  }
  return {};
}

std::vector<float> CpuBackend::infer(const Shard& shard) {
  const int64_t C = layout_.shape().outputs;
  std::vector<float> out(static_cast<size_t>(shard.size() * C));
  for (int64_t p = 0; p < shard.size(); ++p) {
    const float* o = lstm_forward(layout_, params_.data(), shard.x(p), shard.length(p), cache_);
    std::copy(o, o + C, out.begin() + p * C);
  }
  return out;
}

const char* device_name(Device d) {
  switch (d) {
    case Device::Cpu: return "cpu";
    case Device::Cuda: return "cuda";
    case Device::Auto: return "auto";
  }
  return "?";
}

const char* lstm_path_name(LstmPath p) {
  switch (p) {
    case LstmPath::Cudnn: return "cudnn";
    case LstmPath::Fused: return "fused";
    case LstmPath::Auto: return "auto";
  }
  return "?";
}

std::optional<Device> parse_device(const std::string& name) {
  for (Device d : {Device::Cpu, Device::Cuda, Device::Auto})
    if (name == device_name(d)) return d;
  return std::nullopt;
}

// A backend without device memory of its own (device_memory() is nullopt) is never asked for a device window.
void Backend::open_device_window(const DeviceWindowSize&) { RT_CHECK(false, name() << " backend has no device window"); }
void Backend::stage_window(const Shard&, const WindowFeatures&, int) {
  RT_CHECK(false, name() << " backend has no device window");
}
void Backend::use_window(const Shard&, int) { RT_CHECK(false, name() << " backend has no device window"); }
void Backend::close_device_window() { RT_CHECK(false, name() << " backend has no device window"); }

std::unique_ptr<Backend> make_backend(const ModelShape& shape, const BackendOptions& opts) {
#ifdef RAGTRAIN_WITH_CUDA
  if (opts.device != Device::Cpu) {
    if (auto b = make_cuda_backend(shape, opts)) return b;   // null only for "auto" without a visible GPU
  }
#else
  USER_CHECK(opts.device == Device::Cpu,
             "option --device: '" << device_name(opts.device) << "' is not available in this build",
             "use --device cpu, or rebuild where CUDA, cuDNN and NCCL are installed");
#endif
  return std::make_unique<CpuBackend>(shape, opts);
}

}  // namespace ragtrain
