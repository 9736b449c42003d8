// The CUDA backend: the rank's K sequences of a step in one cuDNN LSTM call per direction plus one batched
// head/loss kernel (replayed from a CUDA graph per batch shape), one NCCL all-reduce of the fused gradient buffer
// per step, and one fused optimizer kernel, all on the device; the host waits once per step, for the step's totals.
#pragma once

#include <mpi.h>

#include <array>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "batch_gather.hpp"
#include "cuda_raii.hpp"
#include "cudnn_lstm.hpp"
#include "device_window.hpp"
#include "fused_lstm.hpp"
#include "gpu_binding.hpp"
#include "nccl_comm.hpp"
#include "ragtrain/backend/backend.hpp"

namespace ragtrain {

// Knobs that are not model options. From the environment for the CLI (see from_environment), set directly by tests.
struct CudaTuning {
  std::string algo = "auto";    // auto (measure at start-up) | standard | persist_static | persist_static_small_h |
                                // persist_dynamic
  bool graphs = true;           // replay each batch shape's cuDNN + head work from a CUDA graph (after its first run)
  std::string layout = "padded";   // padded | ragged: how K > 1 sequences of different lengths reach cuDNN
                                   // (BatchLayout in cudnn_lstm.hpp; ragged runs without graphs). A bidirectional
                                   // model always runs ragged: padding would come first in its reverse direction.
  int64_t probe_length = 100;   // sequence length at which the algorithms are measured
  LstmPath lstm = LstmPath::Cudnn;   // cudnn | fused (fused_lstm.hpp; models it does not cover use cuDNN) | auto (the
                                // faster, measured at start-up at the run's batch width); the CLI's --lstm
  bool fused_groups = true;     // the fused kernel runs steps of more than 16 sequences at 128 < H <= 256 in lock-step
                                // groups on the tensor cores (FusedLstm::set_grouping); RAGTRAIN_FUSED_GROUPS=0: off
  bool fused_group_plan = true;  // those groups of their own sizes (FusedLstm::set_group_plan); RAGTRAIN_FUSED_GROUP_PLAN=0:
                                // groups of one size
                                // (256 < H <= 512 always runs in groups: fused_wide.cu)

  // RAGTRAIN_CUDNN_ALGO (one of the names above), RAGTRAIN_CUDA_GRAPHS (0 = off), RAGTRAIN_CUDA_BATCH_LAYOUT
  // (padded | ragged) and RAGTRAIN_FUSED_GROUPS (0 = off). UserError on a bad value.
  static CudaTuning from_environment();
};

class CudaBackend final : public Backend {
 public:
  // Everything comes in here and nothing is learned later: the shape, K = opts.batch (sequences per rank per
  // step), the tuning. Every limit is checked first (UserError, before any collective, alike on every rank); then,
  // collective over opts.comm: binds the GPU (duplicate check), creates the NCCL communicator, measures the cuDNN
  // algorithms at batch K (rank 0's choice is used by every rank, so all ranks run the same arithmetic), sizes
  // every step buffer for K and, with --lstm auto, picks the LSTM path at K. forward_backward takes at most K
  // slots.
  CudaBackend(const ModelShape& shape, const BackendOptions& opts, const CudaTuning& tuning = {});
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  void set_params(const std::vector<float>& params) override;
  std::vector<float> params() const override;
  OptimizerState optimizer_state() const override;   // downloads the moments (waits for the GPU)
  void set_optimizer_state(const OptimizerState& state) override;   // uploads them at once
  void set_train_shard(const Shard& shard) override;
  std::optional<DeviceMemory> device_memory() const override;
  void open_device_window(const DeviceWindowSize& size) override;
  void close_device_window() override;
  // The reader thread: touches window_ only.
  void stage_window(const Shard& window, const WindowFeatures& features, int slot) override;
  void use_window(const Shard& window, int slot) override;
  void forward_backward(const std::vector<int64_t>& positions) override;
  void prepare_next(const std::vector<int64_t>& positions) override;
  void allreduce() override;
  StepTotals update(float lr) override;
  LocalNonfinite first_nonfinite(const std::vector<int64_t>& positions) override;
  std::vector<float> infer(const Shard& shard) override;
  std::vector<std::pair<std::string, double>> take_phase_seconds() override;
  std::vector<std::pair<std::string, double>> setup_seconds() const override { return setup_s_; }
  void synchronize() override;

  // Beyond the Backend interface, for tests and reports.
  // The fused buffer in the PyTorch layout: (P) gradient sums, then loss_sum, count, correct. Waits for the GPU.
  std::vector<float> fused_buffer() const;
  cudnnRNNAlgo_t algorithm() const { return lstm_->algo(); }
  BatchLayout batch_layout() const { return lstm_->layout(); }
  const std::vector<AlgoTiming>& algorithm_timings() const { return timings_; }
  bool graphs_active() const { return graphs_on_; }
  std::string describe() const override;   // GPU, cuDNN algorithm and its measurement, layout, graphs, LSTM path
  bool fused_active() const { return use_fused_; }
  FusedLstm* fused_lstm() const { return fused_lstm_.get(); }   // null when the model is not covered

 private:
  // The events of one step: GPU timestamps that split it into phases (read one step later, off the critical path).
  // With one rank they are recorded on one step in kTimeEvery only (plus the previous step's opt_end, for the gap):
  // each event is a stream operation between two kernels (~1.3 us on the H200) that also stops the next kernel from
  // starting early (programmatic dependent launch). With NCCL the events order the two streams, so every step has
  // them.
  static constexpr int64_t kTimeEvery = 8;
  struct StepEvents {
    Event fb_start, fb_end, ar_end, opt_end;
    int64_t step = -1;
    bool timed = false;      // all four recorded: this step's phases are measured
    bool end_marked = false; // opt_end recorded (timed, or the step before a timed one)
    bool harvested = true;
    bool allreduced = false;
  };
  bool timed(int64_t step) const { return !single_rank_ || step % kTimeEvery == 0; }

  StepEvents& current() { return ring_[static_cast<size_t>(step_ % 3)]; }
  void begin_events(StepEvents& ev, int64_t step);   // what step `step` records
  // The step's sequences (empty slots, -1, left out) into `out`; returns the longest length.
  int64_t slots_for(const std::vector<int64_t>& positions, std::vector<GatherSlot>& out) const;
  void launch_ahead();                                 // update(): the prepared next step's work, if any
  void drop_ahead() { ahead_ = next_pending_ = false; }
  // The limits of the options and the tuning (UserError naming them), before any work.
  static void check_limits(const ModelShape& shape, const BackendOptions& opts, const CudaTuning& tuning);
  void choose_algorithm(const CudaTuning& tuning);
  void set_up_fused();
  void agree_on_fused();   // a collective: every rank has the fused kernels, or none keeps them
  void choose_lstm_path(int64_t K);
  void validate_lengths(int64_t lo, int64_t hi);   // the step shapes of a shard with these lengths
  void build_index();
  void switch_algorithm(cudnnRNNAlgo_t algo);
  void fall_back(const std::exception& why);
  // Dry runs of forward + backward for these (B, T) shapes (B > 1 with the ragged layout: lengths T, 1, 1, ...);
  // an algorithm cuDNN rejects for one of them is replaced by the next fastest.
  void validate(const std::vector<std::pair<int64_t, int64_t>>& shapes);
  void run_batch(int64_t T);
  void enqueue_batch(const CudnnLstm::Batch& b);
  GatherArgs gather_args(const CudnnLstm::Batch& b) const;
  bool capture_graph(const CudnnLstm::Batch& b, const GatherArgs& ga);
  bool harvest(int64_t step);
  void wait_for_totals(const StepEvents& ev, double tag);
  std::vector<float> to_device_layout(const float* pytorch) const;
  DropoutArgs dropout_args(double p) const;   // the mask keys on the device, for rate p
  // The fused kernel's dropout at rate p (the head's, or between stacked layers) at global `step`.
  FusedHeadDropout fused_dropout(double p, int64_t step) const;
  void to_pytorch_layout(const std::vector<float>& device, float* pytorch) const;

  ModelShape shape_;
  ParamLayout layout_;
  DropoutRates dropout_;                  // training only (forward_backward)
  uint64_t seed_ = 0;                     // keys the masks
  bool split_layers_ = false;             // dropout between layers: one cuDNN call per layer
  MPI_Comm comm_;
  Optimizer opt_;                         // configuration and step count (the moments live in m_, v_)
  GpuBinding gpu_;
  int sms_ = 1;
  std::unique_ptr<NcclComm> nccl_;       // null on one rank (nothing to sum)
  Stream compute_, comm_stream_;          // compute; NCCL on its own stream, ordered with events
  CudnnHandle cudnn_;
  std::vector<AlgoTiming> timings_;       // the measurement at batch K, fastest usable first
  BatchLayout batch_layout_ = BatchLayout::Padded;
  std::unique_ptr<CudnnLstm> lstm_;
  bool single_rank_ = false;              // the communicator has one rank: the all-reduce is the identity
  LstmPath lstm_mode_ = LstmPath::Cudnn;  // CudaTuning::lstm
  bool fused_groups_ = true;              // CudaTuning::fused_groups
  bool fused_group_plan_ = true;          // CudaTuning::fused_group_plan
  std::unique_ptr<FusedLstm> fused_lstm_; // the fused kernel when the model is covered and the mode is not cudnn
  bool use_fused_ = false;                // this step width runs the fused kernel (rank 0's choice, broadcast)
  std::string lstm_note_;                 // why cuDNN (not covered), or the measurement behind auto's choice
  std::vector<std::pair<std::string, double>> setup_s_;   // the constructor's parts, in order (setup_seconds)

  int64_t W_ = 0;                         // cuDNN weight space, floats
  int64_t N_ = 0;                         // device parameters: weight space + fc.weight (C, D*H) + fc.bias (C)
  std::vector<int64_t> dev_index_;        // (P) PyTorch flat index -> device flat index
  DeviceBuffer<float> params_;            // (N) [weight space | fc.weight | fc.bias]
  DeviceBuffer<float> fused_;             // (N + 3) [d weight space | d fc.weight | d fc.bias | loss, count, correct]
  DeviceBuffer<float> m_, v_;             // (N) optimizer moments (v_ empty for SGD)
  DeviceBuffer<double> partials_;         // (blocks) norm partial sums
  DeviceBuffer<unsigned long long> barrier_;   // (1) the optimizer kernel's grid-barrier counter
  unsigned long long opt_launches_ = 0;
  PinnedBuffer<double> readback_;         // (5) host-mapped: loss, count, correct, grad norm, step tag
  int opt_blocks_ = 1;
  bool opt_pdl_ = true;            // the optimizer's launch may be programmatic-dependent (until refused once)
  bool fused_clean_ = true;               // the update leaves the fused buffer zeroed

  // The training shard on the device: resident (copied once), or the current window's slot of window_.
  DeviceBuffer<float> features_;          // (timesteps, F)
  DeviceBuffer<int32_t> labels_;          // (n) classification
  DeviceBuffer<float> targets_;           // (n, C) regression
  DeviceBuffer<int64_t> indices_;         // (n) global sequence indices (dropout keys)
  std::unique_ptr<DeviceWindow> window_;  // open_device_window: two slots of windows instead of the buffers above
  DeviceWindow::View shard_;              // where the step reads the current shard or window
  std::vector<int64_t> offsets_;          // (n + 1) host copy: row offsets of each sequence
  bool have_shard_ = false;
  int64_t shard_min_len_ = 0, shard_max_len_ = 0;
  int64_t batch_ = 1;                     // K: slots per step (BackendOptions::batch); buffers and algorithm are for it
  int copy_threads_ = 1;                  // host threads of set_train_shard's copy (BackendOptions::copy_threads)

  // CUDA graphs: one per batch shape (B sequences, padded length T), capturing gather, forward, head + loss,
  // backward data, backward weights on fixed-address buffers; the gather node is repointed at each new batch.
  bool graphs_on_ = true;
  std::string graphs_off_reason_;
  int64_t probe_length_ = 100;
  std::vector<GatherSlot> slots_;         // (B) this step's sequences (reused, no allocation per step)
  // prepare_next: the next step's sequences (next_pending_), launched by update() as ahead_slots_ (ahead_) for the
  // next forward_backward to take over (fused kernel only).
  std::vector<GatherSlot> next_slots_, ahead_slots_;
  bool next_pending_ = false, ahead_ = false;
  int64_t ahead_step_ = -1;   // the global step ahead_slots_ were launched for (the head dropout's key)
  DeviceBuffer<int32_t> slot_lengths_;    // (K) true lengths of the step's sequences
  DeviceBuffer<int32_t> label_slot_;      // (K) their labels
  DeviceBuffer<float> target_slot_;       // (K, C) their targets
  DeviceBuffer<int64_t> seq_slot_;        // (K) their global sequence indices (written by the gather)
  DeviceBuffer<int64_t> step_dev_;        // (1) the global step (written by the gather)
  struct ShapeGraph {
    Graph graph;                          // kept: its gather node is updated in the executable each launch
    GraphExec exec;
    cudaGraphNode_t gather = nullptr;
  };
  std::map<std::pair<int64_t, int64_t>, ShapeGraph> graphs_;   // (B, T) -> graph
  std::set<std::pair<int64_t, int64_t>> seen_;   // shapes run once without a graph (cuDNN's lazy set-up is there)
  uint64_t graph_generation_ = 0;

  // Inference buffers (grow only).
  DeviceBuffer<float> infer_x_, infer_out_;

  // Phase timing.
  std::array<StepEvents, 3> ring_;
  int64_t step_ = 0;                      // steps started (forward_backward calls)
  int64_t timing_from_ = 0;               // first step counted since the last take_phase_seconds
  double t_fb_ = 0, t_ar_ = 0, t_opt_ = 0, t_gap_ = 0;
  int64_t n_timed_ = 0, n_gaps_ = 0;      // steps (gaps) those sums are over
};

}  // namespace ragtrain
