// The CUDA backend's set-up and description: tuning from the environment, the limits checked before anything else,
// the GPU, NCCL, cuDNN and device buffers of the constructor. The rest of CudaBackend is in the files named after
// its parts: cuda_backend_lstm.cpp (which LSTM runs), cuda_backend_data.cpp (host <-> device), cuda_backend_step.cpp
// (the training step) and cuda_backend_timing.cpp (the phase timings).
#include "cuda_backend.hpp"

#include <chrono>
#include <cstdlib>

#include "fused_optimizer.hpp"
#include "ragtrain/core/error_cuda.hpp"

namespace ragtrain {

static_assert(kMaxGatherSlots == kMaxCudaBatchPerRank, "the option check and the gather kernel must agree on K");

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
  if (const char* f = std::getenv("RAGTRAIN_FUSED_GROUPS"); f && *f) {
    USER_CHECK(std::string(f) == "0" || std::string(f) == "1", "RAGTRAIN_FUSED_GROUPS='" << f << "'",
               "use 1 (default) or 0");
    t.fused_groups = std::string(f) == "1";
  }
  if (const char* f = std::getenv("RAGTRAIN_FUSED_GROUP_PLAN"); f && *f) {
    USER_CHECK(std::string(f) == "0" || std::string(f) == "1", "RAGTRAIN_FUSED_GROUP_PLAN='" << f << "'",
               "use 1 (default) or 0");
    t.fused_group_plan = std::string(f) == "1";
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
      batch_(opts.batch), copy_threads_(std::max(1, opts.copy_threads)), graphs_on_(tuning.graphs),
      probe_length_(tuning.probe_length) {
  // Every limit before any collective or allocation: every rank has the same options, so every rank refuses alike.
  check_limits(shape, opts, tuning);
  // Each part of the set-up timed on the host (the GPU work of each is synchronous or synchronized), so a slow start
  // can be told apart from a slow data path (summary.json's setup_s).
  auto last = std::chrono::steady_clock::now();
  auto lap = [&](const char* part) {
    const auto now = std::chrono::steady_clock::now();
    setup_s_.emplace_back(part, std::chrono::duration<double>(now - last).count());
    last = now;
  };
  // The reverse direction must start at each sequence's own last step: only per-sequence lengths do that.
  batch_layout_ = shape.bidirectional ? BatchLayout::Ragged : *parse_batch_layout(tuning.layout);
  // Both collectives first, every rank reaching them (bind_gpu turns local failures into a shared verdict).
  gpu_ = bind_gpu(opts.local_rank, opts.comm);
  lap("device");   // the GPU chosen and its context made
  int world = 1;
  MPI_CHECK(MPI_Comm_size(opts.comm, &world));
  single_rank_ = world == 1;
  // One rank sums nothing (allreduce makes no NCCL call), so it makes no communicator: NCCL's set-up was 0.3-0.6 s
  // of a one-GPU run's start on an H100 (summary.json setup_s, 2026-12-06).
  if (!single_rank_) nccl_ = std::make_unique<NcclComm>(opts.comm, opts.watchdog);
  lap("nccl");
  compute_ = Stream::create();
  comm_stream_ = Stream::create();
  cudnn_ = CudnnHandle::create(compute_.get());
  CUDA_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, gpu_.device));
  if (!tuning.graphs) graphs_off_reason_ = "off (RAGTRAIN_CUDA_GRAPHS=0)";

  lap("cudnn_handle");
  choose_algorithm(tuning);   // measured at K; a collective (MPI_Bcast of rank 0's choice)
  lap("cudnn_algorithms");

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
  fused_groups_ = tuning.fused_groups;
  fused_group_plan_ = tuning.fused_group_plan;
  set_up_fused();
  agree_on_fused();
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  if (rank == 0 && batch_ > 1 && tuning.algo == "auto")
    std::fprintf(stderr, "ragtrain: %lld sequences per step: %s\n", static_cast<long long>(batch_), describe().c_str());
  CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
  lap("buffers_and_fused");
  choose_lstm_path(batch_);   // a collective with --lstm auto (rank 0 measures at K)
  lap("lstm_probe");
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

CudaBackend::~CudaBackend() {
  // Outstanding work may still use the buffers and the communicator that are about to be released.
  if (compute_) cudaStreamSynchronize(compute_.get());
  if (comm_stream_) cudaStreamSynchronize(comm_stream_.get());
}

void CudaBackend::synchronize() {
  CUDA_CHECK(cudaStreamSynchronize(comm_stream_.get()));
  CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
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
