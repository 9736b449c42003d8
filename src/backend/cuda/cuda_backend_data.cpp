// What the CUDA backend moves between host and device: parameters and optimizer state between PyTorch's layout and
// the device's (and into another cuDNN algorithm's weight space), the training shard, and inference.
#include "cuda_backend.hpp"

#include <algorithm>
#include <cstring>

#include "head_loss.hpp"
#include "ragtrain/core/error_cuda.hpp"
#include "ragtrain/data/window_features.hpp"

namespace ragtrain {

namespace {

// Copies n elements from pageable host memory to `dst` (grown if needed) through two pinned chunks, so the copy
// engine runs at full speed while the host fills the other chunk. Waits for the copy. `fill(to, first, m)` puts
// elements [first, first + m) into the pinned chunk `to` (default: one memcpy).
template <class T, class Fill>
void upload(DeviceBuffer<T>& dst, size_t n, cudaStream_t s, const Fill& fill, size_t chunk_bytes) {
  dst.reserve_discard(n);
  if (n == 0) return;
  const size_t per = std::min(n, chunk_bytes / sizeof(T));
  PinnedBuffer<T> stage[2] = {PinnedBuffer<T>(per, false), PinnedBuffer<T>(n > per ? per : 1, false)};
  Event done[2] = {Event::create(false), Event::create(false)};
  for (size_t i = 0, k = 0; i < n; i += per, ++k) {
    const size_t b = k % 2, m = std::min(per, n - i);
    if (k >= 2) CUDA_CHECK(cudaEventSynchronize(done[b].get()));   // that chunk's previous copy is done
    fill(stage[b].get(), i, m);
    CUDA_CHECK(cudaMemcpyAsync(dst.get() + i, stage[b].get(), m * sizeof(T), cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaEventRecord(done[b].get(), s));
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
}

template <class T>
void upload(DeviceBuffer<T>& dst, const T* src, size_t n, cudaStream_t s) {
  upload(dst, n, s, [src](T* to, size_t first, size_t m) { std::memcpy(to, src + first, m * sizeof(T)); },
         size_t{8} << 20);
}

template <class T>
std::vector<T> download(const T* src, size_t n, cudaStream_t s) {
  std::vector<T> out(n);
  if (n) CUDA_CHECK(cudaMemcpyAsync(out.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  return out;
}

}  // namespace

void CudaBackend::build_index() {
  dev_index_ = lstm_->pytorch_to_weight_space(layout_, params_.get());
  const int64_t head0 = layout_.fc_weight().offset;
  dev_index_.resize(static_cast<size_t>(layout_.total()));
  for (int64_t k = head0; k < layout_.total(); ++k) dev_index_[static_cast<size_t>(k)] = W_ + (k - head0);
}

std::vector<float> CudaBackend::to_device_layout(const float* pytorch) const {
  std::vector<float> dev(static_cast<size_t>(N_), 0.0f);   // padding of the weight space: zero
  for (size_t k = 0; k < dev_index_.size(); ++k) dev[static_cast<size_t>(dev_index_[k])] = pytorch[k];
  return dev;
}

void CudaBackend::to_pytorch_layout(const std::vector<float>& device, float* pytorch) const {
  for (size_t k = 0; k < dev_index_.size(); ++k) pytorch[k] = device[static_cast<size_t>(dev_index_[k])];
}

void CudaBackend::set_params(const std::vector<float>& params) {
  drop_ahead();   // work launched ahead would have used the old values
  RT_CHECK(static_cast<int64_t>(params.size()) == layout_.total(), "parameter count mismatch");
  const std::vector<float> dev = to_device_layout(params.data());
  CUDA_CHECK(cudaMemcpyAsync(params_.get(), dev.data(), dev.size() * sizeof(float), cudaMemcpyHostToDevice,
                             compute_.get()));
  CUDA_CHECK(cudaStreamSynchronize(compute_.get()));   // `dev` is pageable and about to go away
}

std::vector<float> CudaBackend::params() const {
  const std::vector<float> dev = download(params_.get(), static_cast<size_t>(N_), compute_.get());
  std::vector<float> out(static_cast<size_t>(layout_.total()));
  to_pytorch_layout(dev, out.data());
  return out;
}

std::vector<float> CudaBackend::fused_buffer() const {
  const std::vector<float> dev = download(fused_.get(), static_cast<size_t>(N_ + kFusedExtras), compute_.get());
  std::vector<float> out(static_cast<size_t>(layout_.total() + kFusedExtras));
  to_pytorch_layout(dev, out.data());
  for (int64_t k = 0; k < kFusedExtras; ++k)
    out[static_cast<size_t>(layout_.total() + k)] = dev[static_cast<size_t>(N_ + k)];
  return out;
}

OptimizerState CudaBackend::optimizer_state() const {
  const size_t P = static_cast<size_t>(layout_.total());
  OptimizerState st;
  st.steps_taken = opt_.steps_taken();
  st.m.resize(P);
  to_pytorch_layout(download(m_.get(), static_cast<size_t>(N_), compute_.get()), st.m.data());
  if (v_.size()) {
    st.v.resize(P);
    to_pytorch_layout(download(v_.get(), static_cast<size_t>(N_), compute_.get()), st.v.data());
  }
  return st;
}

void CudaBackend::set_optimizer_state(const OptimizerState& state) {
  drop_ahead();   // work launched ahead would have used the old values
  opt_.set_state(state);   // checks the sizes; keeps the step count for the bias correction
  const std::vector<float> m = to_device_layout(state.m.data());
  CUDA_CHECK(cudaMemcpyAsync(m_.get(), m.data(), m.size() * sizeof(float), cudaMemcpyHostToDevice, compute_.get()));
  std::vector<float> v;
  if (v_.size()) {
    v = to_device_layout(state.v.data());
    CUDA_CHECK(cudaMemcpyAsync(v_.get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice, compute_.get()));
  }
  CUDA_CHECK(cudaStreamSynchronize(compute_.get()));   // the host vectors die here
}

void CudaBackend::switch_algorithm(cudnnRNNAlgo_t algo) {
  const std::vector<float> p = params();
  const size_t P = static_cast<size_t>(layout_.total());
  std::vector<float> m(P), v(v_.size() ? P : 0);
  to_pytorch_layout(download(m_.get(), static_cast<size_t>(N_), compute_.get()), m.data());
  if (v_.size()) to_pytorch_layout(download(v_.get(), static_cast<size_t>(N_), compute_.get()), v.data());
  auto next = std::make_unique<CudnnLstm>(cudnn_.get(), compute_.get(), shape_, algo, batch_layout_, split_layers_);
  RT_CHECK(next->weight_floats() == W_, "weight space of " << rnn_algo_name(algo) << " differs in size");
  lstm_ = std::move(next);
  lstm_->set_dropout(dropout_args(dropout_.between));
  build_index();
  if (fused_lstm_) {   // the weight space moved: the fused kernel's offsets follow it (the choice stays)
    const bool was = use_fused_;
    const std::string note = lstm_note_;
    set_up_fused();
    use_fused_ = was && fused_lstm_ != nullptr;
    if (fused_lstm_) lstm_note_ = note;
  }
  set_params(p);
  const std::vector<float> md = to_device_layout(m.data());
  CUDA_CHECK(cudaMemcpyAsync(m_.get(), md.data(), md.size() * sizeof(float), cudaMemcpyHostToDevice, compute_.get()));
  std::vector<float> vd;
  if (v_.size()) {
    vd = to_device_layout(v.data());
    CUDA_CHECK(cudaMemcpyAsync(v_.get(), vd.data(), vd.size() * sizeof(float), cudaMemcpyHostToDevice, compute_.get()));
  }
  CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
  graphs_.clear();
  seen_.clear();
}

void CudaBackend::set_train_shard(const Shard& shard) {
  USER_CHECK(shard.num_features == shape_.input_size && shard.num_outputs == shape_.outputs && shard.task == shape_.task,
             "training shard (F=" << shard.num_features << ", outputs " << shard.num_outputs << ", "
                                  << task_name(shard.task) << ") does not match the model (F=" << shape_.input_size
                                  << ", outputs " << shape_.outputs << ", " << task_name(shape_.task) << ")",
             "use data and model options that agree");
  RT_CHECK(!window_, "set_train_shard after open_device_window");
  const cudaStream_t s = compute_.get();
  // The features (nearly all of the bytes) on several threads: one thread's copy into pinned memory, 6-10 GB/s,
  // is slower than the copy engine (at 8.2 GB it was 1.5 s of the loop's io wait where a run became resident).
  const WindowFeatures rows(shard);
  upload(features_, shard.features.size(), s,
         [&](float* to, size_t first, size_t m) { rows.copy(to, first, m, copy_threads_); }, size_t{64} << 20);
  if (shard.task == Task::Classification) {
    for (int32_t l : shard.labels)
      RT_CHECK(l >= 0 && l < shape_.outputs, "label " << l << " outside [0, " << shape_.outputs << ")");
    upload(labels_, shard.labels.data(), shard.labels.size(), s);
  } else {
    upload(targets_, shard.targets.data(), shard.targets.size(), s);
  }
  upload(indices_, shard.indices.data(), shard.indices.size(), s);
  shard_.features = features_.get();
  shard_.labels = labels_.get();
  shard_.targets = targets_.get();
  shard_.indices = indices_.get();
  offsets_ = shard.offsets;
  have_shard_ = true;
  drop_ahead();   // other sequences now
  if (shard.size() == 0) return;
  int64_t lo = INT64_MAX, hi = 0;
  for (int64_t p = 0; p < shard.size(); ++p) {
    lo = std::min(lo, shard.length(p));
    hi = std::max(hi, shard.length(p));
  }
  validate_lengths(lo, hi);
}

void CudaBackend::validate_lengths(int64_t lo, int64_t hi) {
  RT_CHECK(lo >= 1, "a sequence of length 0 in the training shard");
  RT_CHECK(hi <= INT32_MAX, "a sequence of " << hi << " timesteps");
  shard_min_len_ = lo;
  shard_max_len_ = hi;
  std::vector<std::pair<int64_t, int64_t>> shapes = {{1, hi}};
  if (lo != hi) shapes.push_back({1, lo});
  if (batch_ > 1) shapes.push_back({batch_, hi});
  validate(shapes);
}

std::optional<Backend::DeviceMemory> CudaBackend::device_memory() const {
  size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return DeviceMemory{static_cast<int64_t>(free), static_cast<int64_t>(total)};
}

// The step reads the window's slot instead of a resident copy; the shapes are validated once, for the lengths of
// the whole shard, so a window switch costs no dry run.
void CudaBackend::open_device_window(const DeviceWindowSize& size) {
  RT_CHECK(!have_shard_, "open_device_window after set_train_shard");
  window_ = std::make_unique<DeviceWindow>(gpu_.device, shape_.input_size, shape_.outputs, shape_.task,
                                           size.sequences, size.timesteps, size.copy_threads);
  validate_lengths(size.min_length, size.max_length);
}

// Once per run at most: the slots' copies and the steps that read them are waited for before the slots are freed,
// and the captured graphs, which hold the slots' addresses, go with them.
void CudaBackend::close_device_window() {
  RT_CHECK(window_, "close_device_window before open_device_window");
  drop_ahead();
  CUDA_CHECK(cudaDeviceSynchronize());
  window_.reset();
  graphs_.clear();
  seen_.clear();
  have_shard_ = false;
}

void CudaBackend::stage_window(const Shard& window, const WindowFeatures& features, int slot) {
  RT_CHECK(window_, "stage_window before open_device_window");
  if (window.task == Task::Classification)   // what set_train_shard checks, on the reader's thread
    for (int32_t l : window.labels)
      RT_CHECK(l >= 0 && l < shape_.outputs, "label " << l << " outside [0, " << shape_.outputs << ")");
  window_->stage(window, features, slot);
}

void CudaBackend::use_window(const Shard& window, int slot) {
  RT_CHECK(window_, "use_window before open_device_window");
  drop_ahead();   // other sequences now (the trainer launches nothing ahead across a switch)
  shard_ = window_->use(slot, compute_.get());
  offsets_ = window.offsets;
  have_shard_ = true;
}

std::vector<float> CudaBackend::infer(const Shard& shard) {
  USER_CHECK(shard.num_features == shape_.input_size, "data has F=" << shard.num_features << ", the model F="
                                                                     << shape_.input_size,
             "use data with the model's number of features");
  const int64_t n = shard.size(), C = shape_.outputs, F = shape_.input_size;
  if (n == 0) return {};
  const cudaStream_t s = compute_.get();
  upload(infer_x_, shard.features.data(), shard.features.size(), s);
  infer_out_.reserve_discard(static_cast<size_t>(n * C));
  for (int64_t p = 0; p < n; ++p) {
    const int64_t T = shard.length(p);
    RT_CHECK(T >= 1, "sequence " << p << " has length 0");
    const CudnnLstm::Batch& b = lstm_->prepare(1, T);
    lstm_->set_equal_lengths(1, T);
    lstm_->forward(b, infer_x_.get() + shard.offsets[static_cast<size_t>(p)] * F, params_.get(), nullptr,
                   /*train=*/false);
    launch_head_forward(lstm_->y(), static_cast<int32_t>(T), static_cast<int32_t>(shape_.hidden),
                        static_cast<int32_t>(shape_.directions()), static_cast<int32_t>(shape_.pool), params_.get() + W_,
                        params_.get() + W_ + C * shape_.head_input(), static_cast<int32_t>(C), infer_out_.get() + p * C,
                        s);
  }
  return download(infer_out_.get(), static_cast<size_t>(n * C), s);
}

}  // namespace ragtrain
