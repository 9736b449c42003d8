// The CUDA backend: set-up (GPU, NCCL, cuDNN algorithm), the batched step and its CUDA graphs, the all-reduce,
// the fused optimizer step, inference, and the phase timings.
#include "cuda_backend.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "fill.hpp"
#include "dropout.hpp"
#include "head_loss.hpp"
#include "fused_optimizer.hpp"
#include "ragtrain/core/error_cuda.hpp"
#include "ragtrain/model/dropout_mask.hpp"

namespace ragtrain {

static_assert(kMaxGatherSlots == kMaxCudaBatchPerRank, "the option check and the gather kernel must agree on K");

namespace {

// Copies n elements from pageable host memory to `dst` (grown if needed) through two pinned chunks, so the copy
// engine runs at full speed while the host fills the other chunk. Waits for the copy.
template <class T>
void upload(DeviceBuffer<T>& dst, const T* src, size_t n, cudaStream_t s) {
  dst.reserve_discard(n);
  if (n == 0) return;
  const size_t per = std::min(n, static_cast<size_t>((8u << 20) / sizeof(T)));   // 8 MiB chunks
  PinnedBuffer<T> stage[2] = {PinnedBuffer<T>(per, false), PinnedBuffer<T>(n > per ? per : 1, false)};
  Event done[2] = {Event::create(false), Event::create(false)};
  for (size_t i = 0, k = 0; i < n; i += per, ++k) {
    const size_t b = k % 2, m = std::min(per, n - i);
    if (k >= 2) CUDA_CHECK(cudaEventSynchronize(done[b].get()));   // that chunk's previous copy is done
    std::memcpy(stage[b].get(), src + i, m * sizeof(T));
    CUDA_CHECK(cudaMemcpyAsync(dst.get() + i, stage[b].get(), m * sizeof(T), cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaEventRecord(done[b].get(), s));
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
}

template <class T>
std::vector<T> download(const T* src, size_t n, cudaStream_t s) {
  std::vector<T> out(n);
  if (n) CUDA_CHECK(cudaMemcpyAsync(out.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  return out;
}

double elapsed_s(const Event& a, const Event& b) {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a.get(), b.get()));
  return 1e-3 * static_cast<double>(ms);
}

}  // namespace

CudaTuning CudaTuning::from_environment() {
  CudaTuning t;
  if (const char* a = std::getenv("RAGTRAIN_CUDNN_ALGO"); a && *a) {
    USER_CHECK(std::string(a) == "auto" || parse_rnn_algo(a).has_value(),
               "RAGTRAIN_CUDNN_ALGO='" << a << "' is not a cuDNN RNN algorithm",
               "use auto, standard, persist_static, persist_static_small_h or persist_dynamic, or unset it");
    t.algo = a;
  }
  if (const char* g = std::getenv("RAGTRAIN_CUDA_GRAPHS"); g && *g) {
    USER_CHECK(std::string(g) == "0" || std::string(g) == "1", "RAGTRAIN_CUDA_GRAPHS='" << g << "'",
               "use 1 (default) or 0");
    t.graphs = std::string(g) == "1";
  }
  if (const char* l = std::getenv("RAGTRAIN_CUDA_BATCH_LAYOUT"); l && *l) {
    USER_CHECK(parse_batch_layout(l).has_value(), "RAGTRAIN_CUDA_BATCH_LAYOUT='" << l << "'",
               "use padded (default: equal-length batches, CUDA graphs) or ragged (per-sequence lengths in cuDNN)");
    t.layout = l;
  }
  return t;
}

CudaBackend::CudaBackend(const ModelShape& shape, const BackendOptions& opts, const CudaTuning& tuning)
    : shape_(shape), layout_(shape), dropout_(opts.dropout), seed_(opts.seed),
      split_layers_(opts.dropout.between > 0 && shape.layers > 1), comm_(opts.comm), opt_(opts.optimizer, layout_.total()),
      batch_(opts.batch), graphs_on_(tuning.graphs), probe_length_(tuning.probe_length) {
  // Every limit before any collective or allocation: every rank has the same options, so every rank refuses alike.
  check_limits(shape, opts, tuning);
  // The reverse direction must start at each sequence's own last step: only per-sequence lengths do that.
  batch_layout_ = shape.bidirectional ? BatchLayout::Ragged : *parse_batch_layout(tuning.layout);
  // Both collectives first, every rank reaching them (bind_gpu turns local failures into a shared verdict).
  gpu_ = bind_gpu(opts.local_rank, opts.comm);
  nccl_ = std::make_unique<NcclComm>(opts.comm, opts.watchdog);
  single_rank_ = nccl_->size() == 1;
  compute_ = Stream::create();
  comm_stream_ = Stream::create();
  cudnn_ = CudnnHandle::create(compute_.get());
  CUDA_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, gpu_.device));
  if (!tuning.graphs) graphs_off_reason_ = "off (RAGTRAIN_CUDA_GRAPHS=0)";

  choose_algorithm(tuning);   // measured at K; a collective (MPI_Bcast of rank 0's choice)

  const int64_t H = shape.head_input(), C = shape.outputs;   // the head reads D*H
  W_ = lstm_->weight_floats();
  N_ = W_ + C * H + C;
  params_.resize_discard(static_cast<size_t>(N_));
  params_.zero_async(compute_.get());   // weight-space padding (if any) stays zero forever
  fused_.resize_discard(static_cast<size_t>(N_ + kFusedExtras));
  fused_.zero_async(compute_.get());
  m_.resize_discard(static_cast<size_t>(N_));
  m_.zero_async(compute_.get());
  if (opts.optimizer.kind != OptimizerKind::Sgd) {
    v_.resize_discard(static_cast<size_t>(N_));
    v_.zero_async(compute_.get());
  }
  opt_blocks_ = optimizer_blocks(N_, gpu_.device);
  partials_.resize_discard(static_cast<size_t>(opt_blocks_));
  barrier_.resize_discard(1);
  barrier_.zero_async(compute_.get());
  readback_ = PinnedBuffer<double>(5, /*mapped=*/true);
  readback_[4] = -1.0;   // no step's totals yet
  // (K) slots of a step: sized once, so captured graphs stay valid for the whole run.
  slot_lengths_.resize_discard(static_cast<size_t>(batch_));
  label_slot_.resize_discard(static_cast<size_t>(batch_));
  target_slot_.resize_discard(static_cast<size_t>(batch_ * C));
  seq_slot_.resize_discard(static_cast<size_t>(batch_));
  seq_slot_.zero_async(compute_.get());
  step_dev_.resize_discard(1);
  step_dev_.zero_async(compute_.get());
  lstm_->set_dropout(dropout_args(dropout_.between));
  for (StepEvents& e : ring_) {
    e.fb_start = Event::create(true);
    e.fb_end = Event::create(true);
    e.ar_end = Event::create(true);
    e.opt_end = Event::create(true);
  }
  build_index();
  lstm_mode_ = tuning.lstm;
  set_up_fused();
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  if (rank == 0 && batch_ > 1 && tuning.algo == "auto")
    std::fprintf(stderr, "ragtrain: %lld sequences per step: %s\n", static_cast<long long>(batch_), describe().c_str());
  CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
  choose_lstm_path(batch_);   // a collective with --lstm auto (rank 0 measures at K)
}

void CudaBackend::check_limits(const ModelShape& shape, const BackendOptions& opts, const CudaTuning& tuning) {
  USER_CHECK(opts.batch >= 1 && opts.batch <= kMaxGatherSlots,
             "--batch-per-rank " << opts.batch << " exceeds the CUDA backend's " << kMaxGatherSlots
                                 << " sequences per rank per step",
             "use --batch-per-rank " << kMaxGatherSlots << " or fewer, and more ranks for a larger global batch");
  // The kernels and cuDNN's descriptors index with 32-bit ints.
  USER_CHECK(shape.input_size <= INT32_MAX && shape.hidden <= INT32_MAX && shape.layers <= INT32_MAX &&
                 shape.outputs <= INT32_MAX,
             "the model (F=" << shape.input_size << " H=" << shape.hidden << " L=" << shape.layers << ", "
                             << shape.outputs << " outputs) is too large for the CUDA backend's 32-bit indices",
             "use a smaller --hidden or --layers, or --device cpu");
  USER_CHECK(parse_batch_layout(tuning.layout).has_value(),
             "RAGTRAIN_CUDA_BATCH_LAYOUT='" << tuning.layout << "'", "use padded or ragged");
  USER_CHECK(tuning.algo == "auto" || parse_rnn_algo(tuning.algo).has_value(),
             "RAGTRAIN_CUDNN_ALGO='" << tuning.algo << "' is not a cuDNN RNN algorithm",
             "use auto, standard, persist_static, persist_static_small_h or persist_dynamic, or unset it");
  USER_CHECK(tuning.probe_length >= 1, "CUDA tuning: probe length " << tuning.probe_length, "use 1 or more timesteps");
}

void CudaBackend::set_up_fused() {
  fused_lstm_.reset();
  if (lstm_mode_ == LstmPath::Cudnn) return;
  std::string why = fused_lstm_unsupported(shape_);
  // The fused kernel draws no dropout mask (between layers needs 2 layers, which it does not run anyway).
  if (why.empty() && dropout_.head > 0) why = "dropout before the head (the fused kernel has none)";
  if (why.empty()) {
    const FusedLayoutResult r = fused_layout_from_index(shape_, dev_index_, W_, N_);
    if (r.ok) fused_lstm_ = std::make_unique<FusedLstm>(shape_, r.layout, N_ + kFusedExtras, gpu_.device);
    why = r.why;
  }
  lstm_note_ = why.empty() ? "" : "fused kernel not used: " + why;
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  if (!why.empty() && lstm_mode_ == LstmPath::Fused && rank == 0)
    std::fprintf(stderr, "ragtrain: --lstm fused: %s; using cuDNN\n", why.c_str());
}

namespace {
// How much faster than cuDNN the fused kernel must be at the start-up probe for --lstm auto to pick it.
constexpr double kFusedAutoMargin = 0.10;
}  // namespace

void CudaBackend::choose_lstm_path(int64_t K) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  if (!fused_lstm_) {   // cudnn, or a model the fused kernel does not cover (the same on every rank)
    use_fused_ = false;
    return;
  }
  if (lstm_mode_ == LstmPath::Fused) {
    use_fused_ = true;
    return;
  }
  // auto: rank 0 times both at the probe length and this batch width; everyone takes its choice. A failure to
  // measure never throws before the broadcast (every rank must reach it); it keeps cuDNN.
  double us[3] = {0, 0, 0};   // fused, cuDNN, use fused
  if (rank == 0) {
    try {
      // choose_algorithm measured cuDNN at this width already; a fallback algorithm (set_train_shard) comes later.
      auto it = std::find_if(timings_.begin(), timings_.end(),
                             [&](const AlgoTiming& t) { return t.usable && t.algo == lstm_->algo(); });
      if (it != timings_.end()) {
        us[1] = it->us;
      } else {
        const std::vector<AlgoTiming> t =
            measure_algorithms(cudnn_.get(), compute_.get(), shape_, probe_length_, K, {lstm_->algo()});
        us[1] = !t.empty() && t.front().usable ? t.front().us : 1e30;
      }
      us[0] = fused_lstm_->time_us(K, probe_length_, compute_.get());
      // The probe times the LSTM alone; in a training step cuDNN's path also gains from its graphs and fused
      // optimizer, so at a near tie (H=50, K=1: fused 196 us vs cuDNN 197 us at the probe, yet 204 vs 179 us per
      // real step on the H200) cuDNN is the faster step. Fused must win the probe by kFusedAutoMargin.
      us[2] = us[0] * (1.0 + kFusedAutoMargin) < us[1] ? 1 : 0;
    } catch (const std::exception& e) {
      cudaGetLastError();
      std::fprintf(stderr, "ragtrain: --lstm auto: timing the fused kernel failed (%s); using cuDNN\n", e.what());
      us[2] = 0;
    }
  }
  MPI_CHECK(MPI_Bcast(us, 3, MPI_DOUBLE, 0, comm_));
  use_fused_ = us[2] != 0;
  lstm_note_ = RT_MSG("auto at T=" << probe_length_ << ", batch " << K << ": fused "
                                   << static_cast<int64_t>(us[0] + 0.5) << " us, cuDNN "
                                   << static_cast<int64_t>(us[1] + 0.5) << " us");
}

CudaBackend::~CudaBackend() {
  // Outstanding work may still use the buffers and the communicator that are about to be released.
  if (compute_) cudaStreamSynchronize(compute_.get());
  if (comm_stream_) cudaStreamSynchronize(comm_stream_.get());
}

void CudaBackend::choose_algorithm(const CudaTuning& tuning) {
  std::vector<cudnnRNNAlgo_t> candidates;
  if (tuning.algo == "auto")
    candidates = {CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H, CUDNN_RNN_ALGO_PERSIST_STATIC, CUDNN_RNN_ALGO_PERSIST_DYNAMIC,
                  CUDNN_RNN_ALGO_STANDARD};
  else
    candidates = {parse_rnn_algo(tuning.algo).value_or(CUDNN_RNN_ALGO_STANDARD)};
  // At the run's K (the fastest at batch one need not be the fastest at 128). measure_algorithms never throws, so
  // every rank reaches the broadcast below.
  timings_ = measure_algorithms(cudnn_.get(), compute_.get(), shape_, tuning.probe_length, batch_, candidates,
                                split_layers_);
  std::stable_sort(timings_.begin(), timings_.end(), [](const AlgoTiming& a, const AlgoTiming& b) {
    if (a.usable != b.usable) return a.usable;
    return a.usable && a.us < b.us;
  });
  // Rank 0's choice for everyone: timing noise must not give ranks different arithmetic.
  int chosen = timings_.front().usable ? static_cast<int>(timings_.front().algo) : -1;
  MPI_CHECK(MPI_Bcast(&chosen, 1, MPI_INT, 0, comm_));
  if (chosen < 0) {
    std::string why;
    for (const AlgoTiming& t : timings_) why += RT_MSG("\n  " << rnn_algo_name(t.algo) << ": " << t.why);
    if (tuning.algo != "auto")
      throw UserError(RT_MSG("cuDNN RNN algorithm " << tuning.algo << " (RAGTRAIN_CUDNN_ALGO) does not run an LSTM of F="
                                                    << shape_.input_size << " H=" << shape_.hidden << " L="
                                                    << shape_.layers << " on this GPU:" << why),
                      "unset RAGTRAIN_CUDNN_ALGO to let ragtrain pick a supported algorithm");
    throw InternalError(RT_MSG("no cuDNN RNN algorithm runs an LSTM of F=" << shape_.input_size << " H="
                                                                           << shape_.hidden << " L=" << shape_.layers
                                                                           << why));
  }
  lstm_ = std::make_unique<CudnnLstm>(cudnn_.get(), compute_.get(), shape_, static_cast<cudnnRNNAlgo_t>(chosen),
                                      batch_layout_, split_layers_);
}

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

void CudaBackend::validate(const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  // A dry run of forward + backward at the extreme shapes into scratch gradients: an algorithm that measured well
  // at the probe shape may still reject some lengths (or, with the ragged layout, unequal lengths); then the next
  // fastest takes over.
  DeviceBuffer<float> scratch(static_cast<size_t>(W_));
  const cudaStream_t s = compute_.get();
  for (;;) {
    try {
      for (const auto& [B, T] : shapes) {
        const bool ragged = batch_layout_ == BatchLayout::Ragged && B > 1 && T > 1;
        std::vector<int32_t> lengths(static_cast<size_t>(B), ragged ? 1 : static_cast<int32_t>(T));
        lengths[0] = static_cast<int32_t>(T);
        const CudnnLstm::Batch& b = ragged ? lstm_->prepare_ragged(lengths) : lstm_->prepare(B, T);
        CUDA_CHECK(cudaMemcpyAsync(lstm_->device_lengths(), lengths.data(), lengths.size() * sizeof(int32_t),
                                   cudaMemcpyHostToDevice, s));
        scratch.zero_async(s);
        launch_fill_uniform(lstm_->x_staging(), B * T * shape_.input_size, 21, -1.0f, 1.0f, s);
        launch_fill_uniform(lstm_->dy(), B * T * shape_.head_input(), 22, -0.1f, 0.1f, s);
        lstm_->forward(b, lstm_->x_staging(), params_.get());
        lstm_->backward(b, lstm_->x_staging(), params_.get(), scratch.get());
        CUDA_CHECK(cudaStreamSynchronize(s));   // also: `lengths` is pageable and about to go away
      }
      return;
    } catch (const InternalError& e) {
      cudaStreamSynchronize(s);
      cudaGetLastError();
      fall_back(e);
    }
  }
}

void CudaBackend::fall_back(const std::exception& why) {
  // The next usable algorithm after the current one in the measured order (one whose construction cuDNN also
  // refuses is skipped).
  auto cur = std::find_if(timings_.begin(), timings_.end(), [&](const AlgoTiming& t) { return t.algo == lstm_->algo(); });
  for (auto next = cur == timings_.end() ? timings_.end() : std::next(cur); next != timings_.end(); ++next) {
    if (!next->usable) break;
    std::fprintf(stderr, "ragtrain: cuDNN algorithm %s fails on this shard's batches (%s); trying %s\n",
                 rnn_algo_name(lstm_->algo()), why.what(), rnn_algo_name(next->algo));
    try {
      switch_algorithm(next->algo);
      return;
    } catch (const InternalError& e) {
      cudaStreamSynchronize(compute_.get());
      cudaGetLastError();
      std::fprintf(stderr, "ragtrain: cuDNN algorithm %s refused too (%s)\n", rnn_algo_name(next->algo), e.what());
    }
  }
  throw InternalError(RT_MSG("cuDNN algorithm " << rnn_algo_name(lstm_->algo())
                                                << " fails on this shard's batches and no other algorithm is left: "
                                                << why.what()));
}

void CudaBackend::set_train_shard(const Shard& shard) {
  USER_CHECK(shard.num_features == shape_.input_size && shard.num_outputs == shape_.outputs && shard.task == shape_.task,
             "training shard (F=" << shard.num_features << ", outputs " << shard.num_outputs << ", "
                                  << task_name(shard.task) << ") does not match the model (F=" << shape_.input_size
                                  << ", outputs " << shape_.outputs << ", " << task_name(shape_.task) << ")",
             "use data and model options that agree");
  const cudaStream_t s = compute_.get();
  upload(features_, shard.features.data(), shard.features.size(), s);
  if (shard.task == Task::Classification) {
    for (int32_t l : shard.labels)
      RT_CHECK(l >= 0 && l < shape_.outputs, "label " << l << " outside [0, " << shape_.outputs << ")");
    upload(labels_, shard.labels.data(), shard.labels.size(), s);
  } else {
    upload(targets_, shard.targets.data(), shard.targets.size(), s);
  }
  upload(indices_, shard.indices.data(), shard.indices.size(), s);
  offsets_ = shard.offsets;
  have_shard_ = true;
  drop_ahead();   // other sequences now
  if (shard.size() == 0) return;
  int64_t lo = INT64_MAX, hi = 0;
  for (int64_t p = 0; p < shard.size(); ++p) {
    lo = std::min(lo, shard.length(p));
    hi = std::max(hi, shard.length(p));
  }
  RT_CHECK(lo >= 1, "a sequence of length 0 in the training shard");
  RT_CHECK(hi <= INT32_MAX, "a sequence of " << hi << " timesteps");
  shard_min_len_ = lo;
  shard_max_len_ = hi;
  std::vector<std::pair<int64_t, int64_t>> shapes = {{1, hi}};
  if (lo != hi) shapes.push_back({1, lo});
  if (batch_ > 1) shapes.push_back({batch_, hi});
  validate(shapes);
}

GatherArgs CudaBackend::gather_args(const CudnnLstm::Batch& b) const {
  const bool cls = shape_.task == Task::Classification;
  GatherArgs a;
  a.x = lstm_->x_staging();
  a.features = features_.get();
  a.dy = lstm_->dy();
  a.cudnn_lengths = lstm_->device_lengths();
  a.lengths = slot_lengths_.get();
  a.label = cls ? label_slot_.get() : nullptr;
  a.labels = cls ? labels_.get() : nullptr;
  a.target = cls ? nullptr : target_slot_.get();
  a.targets = cls ? nullptr : targets_.get();
  a.B = static_cast<int32_t>(b.B);
  a.T = static_cast<int32_t>(b.T);
  a.F = static_cast<int32_t>(shape_.input_size);
  a.H = static_cast<int32_t>(shape_.head_input());
  a.C = static_cast<int32_t>(shape_.outputs);
  a.ragged = lstm_->layout() == BatchLayout::Ragged;
  a.seq = seq_slot_.get();
  a.indices = indices_.get();
  a.step_out = step_dev_.get();
  a.step = global_step_;
  return a;
}

DropoutArgs CudaBackend::dropout_args(double p) const {
  DropoutArgs d;
  d.threshold = dropout_threshold(p);
  d.scale = static_cast<float>(dropout_scale(p));
  d.seed = seed_;
  d.step = step_dev_.get();
  d.seq = seq_slot_.get();
  return d;
}

void CudaBackend::enqueue_batch(const CudnnLstm::Batch& b) {
  const cudaStream_t s = compute_.get();
  const int64_t H = shape_.head_input(), C = shape_.outputs;
  const bool cls = shape_.task == Task::Classification;
  lstm_->forward(b, lstm_->x_staging(), params_.get());
  HeadArgs a;
  a.y = lstm_->y();
  a.dy = lstm_->dy();
  a.lengths = slot_lengths_.get();
  a.batch = static_cast<int32_t>(b.B);
  a.weight = params_.get() + W_;
  a.bias = params_.get() + W_ + C * H;
  a.hidden = static_cast<int32_t>(shape_.hidden);
  a.outputs = static_cast<int32_t>(C);
  a.directions = static_cast<int32_t>(shape_.directions());
  a.pool = static_cast<int32_t>(shape_.pool);
  a.dropout = dropout_args(dropout_.head);
  a.classification = cls;
  a.labels = cls ? label_slot_.get() : nullptr;
  a.targets = cls ? nullptr : target_slot_.get();
  a.d_weight = fused_.get() + W_;
  a.d_bias = fused_.get() + W_ + C * H;
  a.extras = fused_.get() + N_;
  launch_head_loss_grad(a, s);
  lstm_->backward(b, lstm_->x_staging(), params_.get(), fused_.get());
}

bool CudaBackend::capture_graph(const CudnnLstm::Batch& b, const GatherArgs& ga) {
  const cudaStream_t s = compute_.get();
  std::string why;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    // The gather is the graph's first node; later launches repoint it at their batch (update_gather_node).
    launch_gather_batch(ga, slots_, s);
    enqueue_batch(b);
  } catch (const std::exception& e) {
    why = e.what();
  }
  cudaGraph_t raw = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &raw);   // always end the capture, also after a failure
  Graph graph(raw);
  cudaGraphExec_t exec = nullptr;
  if (why.empty() && end == cudaSuccess) {
    const cudaGraphNode_t gather = find_gather_node(graph.get());
    const cudaError_t inst = gather ? cudaGraphInstantiate(&exec, graph.get(), 0) : cudaErrorInvalidValue;
    if (inst == cudaSuccess) {
      graphs_.emplace(std::make_pair(b.B, b.T), ShapeGraph{std::move(graph), GraphExec(exec), gather});
      return true;
    }
    why = gather ? RT_MSG("cudaGraphInstantiate: " << cudaGetErrorString(inst)) : "no gather node in the graph";
  } else if (why.empty()) {
    why = RT_MSG("cudaStreamEndCapture: " << cudaGetErrorString(end));
  }
  cudaGetLastError();   // capture errors are not sticky; the stream works normally again
  graphs_on_ = false;
  graphs_off_reason_ = "off (capture failed: " + why + ")";
  std::fprintf(stderr, "ragtrain: CUDA graph capture failed for %lld sequences of length %lld, running without "
               "graphs: %s\n", static_cast<long long>(b.B), static_cast<long long>(b.T), why.c_str());
  return false;
}

void CudaBackend::run_batch(int64_t T) {
  const cudaStream_t s = compute_.get();
  const int64_t B = static_cast<int64_t>(slots_.size());
  // Ragged layout with unequal lengths: the lengths are baked into cuDNN's launches, so plain launches.
  bool equal = true;
  for (const GatherSlot& g : slots_) equal = equal && g.length == T;
  if (lstm_->layout() == BatchLayout::Ragged && !equal) {
    std::vector<int32_t> lengths;
    for (const GatherSlot& g : slots_) lengths.push_back(g.length);
    const CudnnLstm::Batch& b = lstm_->prepare_ragged(lengths);
    if (lstm_->generation() != graph_generation_) {
      graphs_.clear();
      graph_generation_ = lstm_->generation();
    }
    launch_gather_batch(gather_args(b), slots_, s);
    enqueue_batch(b);
    return;
  }
  const CudnnLstm::Batch& b = lstm_->prepare(B, T);   // host-side unless a buffer must grow (then it waits)
  if (lstm_->generation() != graph_generation_) {
    graphs_.clear();   // they captured buffer addresses that moved
    graph_generation_ = lstm_->generation();
  }
  const GatherArgs ga = gather_args(b);
  if (!graphs_on_) {
    launch_gather_batch(ga, slots_, s);
    enqueue_batch(b);
    return;
  }
  const std::pair<int64_t, int64_t> key{B, T};
  auto it = graphs_.find(key);
  if (it != graphs_.end()) {
    // Replay: the graph's gather node now reads this batch (a host-side update, no extra launch).
    update_gather_node(it->second.exec.get(), it->second.gather, ga, slots_);
    CUDA_CHECK(cudaGraphLaunch(it->second.exec.get(), s));
    return;
  }
  // Second time at this shape: capture (gather included) and launch.
  if (!seen_.insert(key).second && capture_graph(b, ga)) {
    CUDA_CHECK(cudaGraphLaunch(graphs_.at(key).exec.get(), s));
    return;
  }
  // First time at this shape (cuDNN's lazy set-up happens outside any capture), or capture impossible.
  launch_gather_batch(ga, slots_, s);
  enqueue_batch(b);
}

void CudaBackend::begin_events(StepEvents& ev, int64_t step) {
  ev.step = step;
  ev.timed = timed(step);
  ev.end_marked = ev.timed || timed(step + 1);
  ev.harvested = !ev.timed;
  ev.allreduced = false;
}

int64_t CudaBackend::slots_for(const std::vector<int64_t>& positions, std::vector<GatherSlot>& out) const {
  const int64_t n = static_cast<int64_t>(offsets_.size()) - 1;
  out.clear();
  int64_t T = 0;
  for (int64_t pos : positions) {
    if (pos < 0) continue;
    RT_CHECK(pos < n, "shard position " << pos << " outside [0, " << n << ")");
    const int64_t begin = offsets_[static_cast<size_t>(pos)], len = offsets_[static_cast<size_t>(pos + 1)] - begin;
    out.push_back(GatherSlot{begin, static_cast<int32_t>(len), static_cast<int32_t>(pos)});
    T = std::max(T, len);
  }
  return T;
}

void CudaBackend::forward_backward(const std::vector<int64_t>& positions) {
  RT_CHECK(have_shard_, "set_train_shard first");
  // Every buffer, graph and measurement is for the K given at construction (BackendOptions::batch).
  RT_CHECK(static_cast<int64_t>(positions.size()) <= batch_,
           "forward_backward with " << positions.size() << " slots; the backend was built for " << batch_);
  const cudaStream_t s = compute_.get();
  StepEvents& ev = current();
  // The step's sequences, empty slots (-1: the uneven last step) left out: B <= K sequences, T the longest.
  const int64_t T = slots_for(positions, slots_);
  // Launched by the previous update with exactly these sequences (prepare_next): only its end event is left.
  const bool taken = ahead_ && use_fused_ && slots_ == ahead_slots_;
  ahead_ = false;
  if (taken) {
    if (ev.timed) CUDA_CHECK(cudaEventRecord(ev.fb_end.get(), s));
    return;
  }
  begin_events(ev, step_);
  // The contract is "zero, then add"; the update already left the buffer zeroed unless nothing consumed it (or
  // work launched ahead added to it and was not taken).
  if (!fused_clean_) fused_.zero_async(s);
  fused_clean_ = false;
  if (ev.timed) CUDA_CHECK(cudaEventRecord(ev.fb_start.get(), s));
  if (!slots_.empty() && use_fused_)
    fused_lstm_->run(slots_, features_.get(), labels_.get(), targets_.get(), params_.get(), fused_.get(), s);
  else if (!slots_.empty())
    run_batch(T);
  if (ev.timed) CUDA_CHECK(cudaEventRecord(ev.fb_end.get(), s));
}

void CudaBackend::prepare_next(const std::vector<int64_t>& positions) {
  next_pending_ = false;
  if (!use_fused_ || !have_shard_ || static_cast<int64_t>(positions.size()) > batch_) return;
  slots_for(positions, next_slots_);
  next_pending_ = !next_slots_.empty();
}

void CudaBackend::launch_ahead() {
  if (!next_pending_) return;
  next_pending_ = false;
  // Ordered after this step's update on the stream (the projection waits for it as a programmatic dependent
  // launch); the ring entry it takes is two steps old, harvested just before.
  const cudaStream_t s = compute_.get();
  StepEvents& ev = ring_[static_cast<size_t>((step_ + 1) % 3)];
  if (ev.step == step_ - 2 && !ev.harvested) {   // complete (the update waited for it), but not yet seen
    CUDA_CHECK(cudaEventSynchronize(ev.opt_end.get()));
    harvest(step_ - 2);
  }
  begin_events(ev, step_ + 1);
  if (ev.timed) CUDA_CHECK(cudaEventRecord(ev.fb_start.get(), s));
  fused_lstm_->run(next_slots_, features_.get(), labels_.get(), targets_.get(), params_.get(), fused_.get(), s);
  ahead_slots_.swap(next_slots_);
  ahead_ = true;
  fused_clean_ = false;
}

void CudaBackend::allreduce() {
  StepEvents& ev = current();
  if (single_rank_) {
    // The sum over one rank is the buffer itself: no NCCL call and no hop to and from its stream (identical to
    // NCCL's one-rank result). The event stays: it splits the phases (seen on the H200: 1.3 us between it and
    // fb_end, with nothing in between).
    if (ev.timed) CUDA_CHECK(cudaEventRecord(ev.ar_end.get(), compute_.get()));
    ev.allreduced = true;
    return;
  }
  // NCCL runs on its own stream, after the gradients are complete and before the update reads them.
  CUDA_CHECK(cudaStreamWaitEvent(comm_stream_.get(), ev.fb_end.get(), 0));
  nccl_->allreduce_sum(fused_.get(), N_ + kFusedExtras, comm_stream_.get());
  CUDA_CHECK(cudaEventRecord(ev.ar_end.get(), comm_stream_.get()));
  ev.allreduced = true;
}

StepTotals CudaBackend::update(float lr) {
  const cudaStream_t s = compute_.get();
  StepEvents& ev = current();
  if (!ev.allreduced && ev.timed) CUDA_CHECK(cudaEventRecord(ev.ar_end.get(), s));   // no allreduce() call
  if (!single_rank_) CUDA_CHECK(cudaStreamWaitEvent(s, ev.ar_end.get(), 0));   // else recorded on this stream

  // Step-dependent scalars exactly as the CPU optimizer computes them (float from double).
  const OptimizerConfig& c = opt_.config();
  const int64_t t = opt_.steps_taken() + 1;
  OptimizerArgs a;
  a.n = N_;
  a.params = params_.get();
  a.grads = fused_.get();
  a.extras = fused_.get() + N_;
  a.m = m_.get();
  a.v = v_.size() ? v_.get() : nullptr;
  a.partials = partials_.get();
  a.readback = readback_.device_ptr();
  a.tag = static_cast<double>(opt_launches_ + 1);   // unique per launch, also after a step that threw
  a.barrier = barrier_.get();
  a.launch = opt_launches_;
  a.blocks = opt_blocks_;
  a.kind = c.kind == OptimizerKind::Sgd ? 0 : (c.kind == OptimizerKind::Adam ? 1 : 2);
  a.lr = lr;
  a.momentum = static_cast<float>(c.momentum);
  a.weight_decay = static_cast<float>(c.weight_decay);
  a.beta1 = static_cast<float>(c.beta1);
  a.beta2 = static_cast<float>(c.beta2);
  a.eps = static_cast<float>(c.eps);
  const float bc1 = static_cast<float>(1.0 - std::pow(c.beta1, static_cast<double>(t)));
  a.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(c.beta2, static_cast<double>(t))));
  a.step_size = lr / bc1;
  a.first_step = t == 1;
  a.clip = c.clip;
  opt_pdl_ = launch_optimizer_step(a, s, opt_pdl_);
  ++opt_launches_;
  if (ev.end_marked) CUDA_CHECK(cudaEventRecord(ev.opt_end.get(), s));
  fused_clean_ = true;

  // While the GPU works: phase times of earlier steps (only those whose events completed), then the next step's
  // forward and backward if the caller said which sequences it takes (prepare_next).
  harvest(step_ - 2);
  harvest(step_ - 1);
  launch_ahead();
  // The one host wait of a step: the totals the training loop logs. The update kernel writes them to mapped host
  // memory before it updates the parameters, so the host goes on while the update still runs; everything the
  // next step launches is ordered after it on the stream.
  wait_for_totals(ev, a.tag);
  StepTotals tot;
  tot.loss_sum = readback_[0];
  tot.count = readback_[1];
  tot.correct = readback_[2];
  tot.grad_norm = readback_[3];
  RT_CHECK(tot.count > 0, "a global step without sequences");
  // The kernel skipped the update on exactly these values (fused_optimizer.cu): no extra wait or transfer.
  tot.finite = std::isfinite(tot.loss_sum) && std::isfinite(tot.grad_norm);
  if (tot.finite) opt_.set_steps_taken(t);
  ++step_;
  return tot;
}

LocalNonfinite CudaBackend::first_nonfinite(const std::vector<int64_t>& positions) {
  drop_ahead();
  // The failure path only: one sequence at a time, each read back (a host wait per sequence is fine here).
  for (size_t k = 0; k < positions.size(); ++k) {
    if (positions[k] < 0) continue;
    forward_backward({positions[k]});
    const std::vector<float> f = fused_buffer();
    LocalNonfinite r;
    r.loss = !std::isfinite(f[static_cast<size_t>(layout_.total())]);
    bool bad = r.loss;
    for (int64_t i = 0; i < layout_.total() && !bad; ++i) bad = !std::isfinite(f[static_cast<size_t>(i)]);
    if (bad) {
      r.slot = static_cast<int64_t>(k);
      return r;
    }
  }
  return {};
}

void CudaBackend::wait_for_totals(const StepEvents& ev, double tag) {
  const volatile double* tag_word = readback_.get() + 4;
  // With other ranks the step's work includes NCCL's all-reduce, which a peer that died or stopped never lets
  // finish: then this loop would spin forever. So it also watches the communicator's errors and the deadline
  // (--comm-timeout); either ends the job naming the missing rank (NcclComm::check, comm/watchdog.hpp).
  const Deadline deadline = single_rank_ ? Deadline::never() : nccl_->deadline();
  for (uint64_t spins = 1;; ++spins) {
    if (*tag_word == tag) break;
    // Now and then: did the stream finish (or fail) without the tag? Then report instead of spinning forever.
    if (spins % 256 == 0) {
      // Single rank: the stream's state is the update's, or that of a step launched ahead behind it (which only
      // delays this check until that step ends).
      const cudaError_t q = ev.end_marked ? cudaEventQuery(ev.opt_end.get()) : cudaStreamQuery(compute_.get());
      if (q == cudaErrorNotReady) {
        if (!single_rank_) nccl_->check(deadline, "the NCCL gradient all-reduce");
        continue;
      }
      CUDA_CHECK(q);
      RT_CHECK(*tag_word == tag, "the optimizer kernel finished without publishing the step's totals");
      break;
    }
  }
  std::atomic_thread_fence(std::memory_order_acquire);   // read the totals after the tag
}

bool CudaBackend::harvest(int64_t step) {
  if (step < timing_from_ || step < 0) return true;
  StepEvents& ev = ring_[static_cast<size_t>(step % 3)];
  if (ev.step != step || ev.harvested) return true;
  // The host no longer waits for the end of each step, so a step's last event may still be pending: try later.
  const cudaError_t q = cudaEventQuery(ev.opt_end.get());
  if (q == cudaErrorNotReady) return false;
  CUDA_CHECK(q);
  t_fb_ += elapsed_s(ev.fb_start, ev.fb_end);
  t_ar_ += elapsed_s(ev.fb_end, ev.ar_end);
  t_opt_ += elapsed_s(ev.ar_end, ev.opt_end);
  ++n_timed_;
  if (step - 1 >= timing_from_) {
    const StepEvents& prev = ring_[static_cast<size_t>((step - 1) % 3)];
    if (prev.step == step - 1 && prev.end_marked) {
      t_gap_ += elapsed_s(prev.opt_end, ev.fb_start);
      ++n_gaps_;
    }
  }
  ev.harvested = true;
  return true;
}

std::vector<std::pair<std::string, double>> CudaBackend::take_phase_seconds() {
  synchronize();
  harvest(step_ - 2);
  harvest(step_ - 1);
  // The sampled steps stand for all steps since the last call (one rank: 1 in kTimeEvery is measured).
  const double steps = static_cast<double>(step_ - timing_from_);
  const double per = n_timed_ > 0 ? steps / static_cast<double>(n_timed_) : 0.0;
  const double per_gap = n_gaps_ > 0 ? steps / static_cast<double>(n_gaps_) : 0.0;
  std::vector<std::pair<std::string, double>> out = {{"forward_backward", t_fb_ * per},
                                                     {"allreduce", t_ar_ * per},
                                                     {"optimizer", t_opt_ * per},
                                                     {"host_gap", t_gap_ * per_gap}};
  t_fb_ = t_ar_ = t_opt_ = t_gap_ = 0;
  n_timed_ = n_gaps_ = 0;
  timing_from_ = step_;
  // A step launched ahead before this call: its start event is older than the wait here, so it is not counted.
  if (ahead_) ring_[static_cast<size_t>(step_ % 3)].harvested = true;
  return out;
}

void CudaBackend::synchronize() {
  CUDA_CHECK(cudaStreamSynchronize(comm_stream_.get()));
  CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
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

std::string CudaBackend::describe() const {
  std::string m;
  for (const AlgoTiming& t : timings_) {
    if (!m.empty()) m += ", ";
    m += t.usable ? RT_MSG(rnn_algo_name(t.algo) << " " << static_cast<int64_t>(t.us + 0.5) << " us")
                  : RT_MSG(rnn_algo_name(t.algo) << " unsupported");
  }
  return RT_MSG("cuda backend on GPU " << gpu_.device << " (" << gpu_.name << ", " << gpu_.uuid << "), cuDNN "
                                       << cudnnGetVersion() << ", LSTM algorithm " << rnn_algo_name(lstm_->algo())
                                       << (timings_.size() > 1 ? RT_MSG(" (measured at T=" << probe_length_ << ", batch "
                                                                                           << batch_ << ": " << m << ")")
                                                               : std::string())
                                       << ", " << ragtrain::describe(shape_)
                                       << (split_layers_ ? " (one cuDNN call per layer: dropout between layers)" : "")
                                       << ", batch layout " << batch_layout_name(lstm_->layout())
                                       << (shape_.bidirectional ? " (bidirectional)" : "") << ", CUDA graphs "
                                       << (graphs_on_ ? (lstm_->layout() == BatchLayout::Ragged
                                                             ? "on for equal-length batches"
                                                             : "on")
                                                      : graphs_off_reason_)
                                       << (single_rank_ ? ", one rank (no NCCL call)" : "") << ", LSTM "
                                       << (use_fused_ ? fused_lstm_->describe() : std::string("cuDNN"))
                                       << (lstm_note_.empty() ? std::string() : " (" + lstm_note_ + ")"));
}

}  // namespace ragtrain
