// Which LSTM the CUDA backend runs: the cuDNN algorithm (measured at start-up, rank 0's choice for all, the next one
// when an algorithm fails on the shard's shapes) and the fused kernel (set up where it covers the model; with --lstm
// auto, taken only when it beats cuDNN at the start-up probe).
#include "cuda_backend.hpp"

#include <algorithm>

#include "fill.hpp"
#include "ragtrain/core/error_cuda.hpp"

namespace ragtrain {

void CudaBackend::set_up_fused() {
  fused_lstm_.reset();
  if (lstm_mode_ == LstmPath::Cudnn) return;
  std::string why = fused_lstm_unsupported(shape_);
  // The dropout masks (the head's, between stacked layers) the fused kernels draw themselves.
  if (why.empty()) {
    const FusedLayoutResult r = fused_layout_from_index(shape_, dev_index_, W_, N_);
    why = r.why;
    if (r.ok) {
      fused_lstm_ =
          std::make_unique<FusedLstm>(shape_, r.layout, N_ + kFusedExtras, gpu_.device, r.reverse, r.upper);
      fused_lstm_->set_grouping(fused_groups_);
      fused_lstm_->set_group_plan(fused_group_plan_);
      why = fused_lstm_->unsupported();   // what this GPU cannot run (a MIG slice: too few SMs a cluster or cohort)
      if (!why.empty()) fused_lstm_.reset();
    }
  }
  lstm_note_ = why.empty() ? "" : "fused kernel not used: " + why;
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  if (!why.empty() && lstm_mode_ == LstmPath::Fused && rank == 0)
    std::fprintf(stderr, "ragtrain: --lstm fused: %s; using cuDNN\n", why.c_str());
}

// Ranks differ only where their GPUs do (a MIG slice among whole GPUs: too few SMs for a cluster or cohort). If one
// rank cannot run the fused kernels, every rank runs cuDNN: --lstm auto's choice is a collective that assumes all
// ranks can take it, and every rank should compute the same way.
void CudaBackend::agree_on_fused() {
  if (lstm_mode_ == LstmPath::Cudnn) return;
  int have = fused_lstm_ ? 1 : 0, all = 0;
  MPI_CHECK(MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, comm_));
  if (all || !fused_lstm_) return;
  fused_lstm_.reset();
  lstm_note_ = "fused kernel not used: another rank's GPU cannot run it";
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  if (lstm_mode_ == LstmPath::Fused && rank == 0)
    std::fprintf(stderr, "ragtrain: --lstm fused: another rank's GPU cannot run the fused kernels; using cuDNN\n");
}

namespace {
// How much faster than cuDNN the fused kernel must be at the start-up probe for --lstm auto to pick it.
constexpr double kFusedAutoMargin = 0.10;
}  // namespace

void CudaBackend::choose_lstm_path(int64_t K) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  if (!fused_lstm_) {   // cudnn, or a model (or a GPU) the fused kernel does not cover (agree_on_fused: every rank)
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

}  // namespace ragtrain
