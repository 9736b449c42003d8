// The fused LSTM training step (H <= 512, 1 to 4 layers, one or two directions; --pool last, mean or max): for one
// layer three kernels per step with no launch or grid-wide barrier per timestep: the input projection of every
// timestep (many blocks, all SMs), the recurrence kernel (one thread block per sequence for H <= 64, a cluster of 4
// blocks on 4 SMs up to 128, of 16 up to 256 — above 16 sequences a step there, groups of up to 24 sequences in lock
// step a 16-block cluster on the tensor cores (fused_group.cu); up to 512, groups in lock step on 64 blocks each,
// exchanging through L2 (fused_wide.cu)):
// forward recurrence with the pooling over time, the Linear head and loss, backward recurrence), and the weight
// gradients (a tiled GEMM over all timesteps and sequences: with few sequences on the other SMs, summing each chunk of
// timesteps while the backward goes on; with more, on all SMs after it, split over equal parts of the timesteps; with
// K > 1 a kernel of sums after it). Every sum has a fixed order, so a
// rerun is bitwise identical. It reads the parameters from, and adds the gradients into, the CUDA backend's device
// layout (cuDNN's weight space, then the head), so the NCCL all-reduce and the fused optimizer run unchanged.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "batch_gather.hpp"
#include "cuda_raii.hpp"
#include "group_plan.hpp"
#include "ragtrain/model/model.hpp"

namespace ragtrain {

// Where each gate's block of the LSTM tensors starts in the device layout: gate q (PyTorch order i, f, g, o) of
// weight_ih is H contiguous rows of F floats at w_ih[q], of weight_hh H rows of H at w_hh[q], of each bias H floats.
// The head: fc.weight (C, H) at fc_w, fc.bias at fc_b; loss_sum, count, correct at extras.
struct FusedLayout {
  int64_t w_ih[4] = {}, w_hh[4] = {}, b_ih[4] = {}, b_hh[4] = {};
  int64_t fc_w = 0, fc_b = 0, extras = 0;
};

// The head's dropout in one run (threshold 0: none): the draw of the CPU reference and the cuDNN path
// (model/dropout_mask.hpp, layer kHeadDropoutLayer), keyed by the run's global step and each sequence's global index.
struct FusedHeadDropout {
  uint32_t threshold = 0;            // dropout_threshold(p)
  float scale = 1.0f;                // 1 / (1 - p), as float (the reference's)
  uint64_t seed = 0;
  int64_t step = 0;                  // the global step of the run
  const int64_t* indices = nullptr;  // (device) the shard's global sequence indices, by slot.pos
};

// Stacked layers the fused step runs at most (each layer's kernels in turn, or overlapped: FusedLstm::overlap_).
constexpr int64_t kFusedMaxLayers = 4;

// Why the fused kernel cannot run this model (empty when it can): more than kFusedMaxLayers layers, H > 512, ...
std::string fused_lstm_unsupported(const ModelShape& shape);

// The layout above from the backend's PyTorch -> device index map, or an empty optional-like result (ok = false)
// when some gate block is not contiguous there (then the caller falls back to cuDNN).
struct FusedLayoutResult {
  bool ok = false;
  std::string why;
  FusedLayout layout;
  FusedLayout reverse;   // bidirectional: the reverse direction's gate blocks (the head's fields as layout's)
  std::vector<FusedLayout> upper;   // stacked: layers 1 .. L - 1, each one's directions in turn (the head's fields
                                    // as layout's)
};
FusedLayoutResult fused_layout_from_index(const ModelShape& shape, const std::vector<int64_t>& dev_index,
                                          int64_t head_offset, int64_t extras_offset);

// One step's latency budget (doc/performance.md): the recurrence kernel's block 0 in cycles at its phase boundaries,
// and each kernel's time from events around it (recorded runs launch without programmatic dependent launch).
struct FusedCycles {
  int64_t stage = 0, forward = 0, head = 0, backward = 0, total = 0;   // recurrence kernel, block 0, cycles
  double projection_us = 0, recurrence_us = 0, weight_grads_us = 0;    // each kernel (with its launch gap)
  double sums_us = 0;   // K > 1: the sums over sequence groups (weight gradients) and sequences (head), in order
};

class FusedLstm {
 public:
  // n_grad: floats of the fused buffer (device parameters + the 3 extras). Sets the kernels' shared-memory limit.
  // reverse: the reverse direction's gate blocks (read only when the shape is bidirectional); upper: layers 1 ..
  // L - 1 of a stacked LSTM, (layer, direction) in order.
  FusedLstm(const ModelShape& shape, const FusedLayout& layout, int64_t n_grad, int device,
            const FusedLayout& reverse = FusedLayout{}, const std::vector<FusedLayout>& upper = {});

  // One training step's forward and backward for `slots` (1..kMaxGatherSlots sequences of the shard in `features`,
  // labels or targets indexed by slot.pos): ADDS the summed gradients, loss, count and correct into `grads`.
  // `drop`: the head's dropout of this step, `between`: the dropout between stacked layers (default: none).
  void run(const std::vector<GatherSlot>& slots, const float* features, const int32_t* labels,
           const float* targets, const float* params, float* grads, cudaStream_t s,
           const FusedHeadDropout& drop = FusedHeadDropout{}, const FusedHeadDropout& between = FusedHeadDropout{});

  // The budget of the last run (only when record_cycles(true) was set before it). Waits for `s`.
  void record_cycles(bool on) { record_ = on; }
  // Whether the weight-gradient GEMM sums each chunk of timesteps as the backward publishes it (default), or waits
  // for the whole recurrence kernel (the budget test times both).
  void set_streaming(bool on) { streaming_ = on; }
  // Whether stacked layers overlap where they can (default; Args::fwd_words), or run one after another (the tests
  // compare the two bit for bit).
  void set_overlap(bool on) { overlap_on_ = on; }
  // Whether steps of more than 16 sequences at 128 < H <= 256 run in lock-step groups on the tensor cores (default;
  // fused_group.cu), or one sequence a cluster (the tests run both against the CPU reference).
  void set_grouping(bool on) { grouping_on_ = on; }
  // Whether a grouped step that fits the clusters at once cuts its groups to their own sizes, each stage as one launch
  // per tile count running at once (default; group_plan.hpp), or into groups of one size (the tests compare the two
  // bit for bit).
  void set_group_plan(bool on) { planning_on_ = on; }
  // The last step's groups of their own sizes (0: groups of one size, or not grouped): what the tests check ran.
  int planned_groups() const { return plan_.empty() ? 0 : static_cast<int>(plan_.size()) - 1; }
  // Whether, one layer and direction, the weight-gradient GEMM over the groups of fewer tiles runs beside the others'
  // backward stage (default; group_plan.hpp's BesideSplit), or after the whole stage (the tests compare the two);
  // and whether the last step did.
  void set_gemm_beside(bool on) { beside_on_ = on; }
  bool gemm_beside() const { return beside_.main_parts > 0; }
  FusedCycles last_cycles(cudaStream_t s);

  // Median microseconds of one run over B sequences of length T on random data (its own buffers; `s` is
  // synchronized). For the start-up choice between this kernel and cuDNN.
  double time_us(int64_t B, int64_t T, cudaStream_t s);

  std::string describe() const;   // "fused kernel (recurrent weights in registers, 224 threads, 3 KiB shared)"
  // Why this GPU cannot run the model's kernels (empty when it can): a cluster of 16 blocks it does not run, or too
  // few SMs for a wide cohort. The caller then runs cuDNN; run() must not be called.
  const std::string& unsupported() const { return unsupported_; }

 private:
  void reserve(int64_t B, int64_t T);
  // run's parts: the fields every kernel shares, the slot tables, each layer's fields, the launches. (Templates only
  // so that this header needs no kernel types: P is fused_kernels.hpp's Params, used in fused_lstm.cu alone.)
  template <class P>
  P common_params(int64_t B, int64_t T, const float* features, const int32_t* labels, const float* targets,
                  const float* params, float* grads, const FusedHeadDropout& drop) const;
  template <class P>
  void set_slots(const std::vector<GatherSlot>& slots, const std::vector<GatherSlot>& upper, P& p, P& pu);
  template <class P>
  std::vector<P> layer_params(const P& p, const P& pu, const float* features, bool drop_between, int64_t B,
                              int64_t timesteps);
  template <class P>
  void set_chain_flags(std::vector<P>& lp);
  // A grouped stage's launches (one kernel, or with groups of their own sizes one per tile count at once: those of
  // tile counts nt_lo .. nt_hi).
  template <class P, class Launch>
  void launch_groups(P& q, int64_t B, const Launch& launch, int nt_lo, int nt_hi) const;
  // The top layer's backward stage and weight-gradient GEMM, split by beside_ over the step's stream (`stream`, which
  // `launch` uses, as it does `pdl`) and side_stream_; the sums after them wait for both.
  template <class P, class Launch, class Gemm>
  void backward_beside(P& q, int64_t B, const Launch& launch, const Gemm& gemm, cudaStream_t& stream, bool& pdl);
  template <class P>
  void launch_layers(std::vector<P>& lp, int64_t B, int64_t T, bool drop_between, const FusedHeadDropout& between,
                     cudaStream_t s);
  int64_t per_seq() const;         // floats of one sequence's scratch
  // Whether a layer above reads a copy of the layer below's output (xbuf_: with dropout between layers, or two
  // directions) instead of its h in place.
  bool copies_between(bool drop_between) const;
  // The recurrence kernel's variant for this H (ext: adds dh_ext; chain: the overlapped chain's, Args::fwd_words;
  // the variant with ext has it too).
  const void* kernel(bool ext = false, bool chain = false) const;
  // The split weight-gradient GEMM's tiles for a layer of `inputs` input features (B > 16): its block tile in warps,
  // its tiles, and its parts of the timesteps at most.
  struct SplitTiles {
    int wm = 0, wn = 0, mtiles = 0, ntiles = 0, parts = 0;
  };
  SplitTiles split_tiles(int64_t inputs, int sms) const;
  int weight_grad_groups(int64_t B, int64_t timesteps, const SplitTiles& tiles) const;
  size_t split_smem_bytes(int64_t B, const SplitTiles& tiles) const;   // split_grad_kernel's shared memory

  ModelShape shape_;
  FusedLayout layout_, reverse_;
  std::vector<FusedLayout> layers_;   // every (layer, direction)'s gate blocks, in order (layers_[0] = layout_)
  int dirs_ = 1;                   // directions: a bidirectional step runs both at once
  // The directions run apart (bidirectional, H > 64 or stacked): each its own recurrences in stages (one block or
  // cluster each), the head in a kernel of its own between them (Args::pooled_out). Else (H <= 64, one layer) a
  // 2-block cluster a sequence runs both with the head between them.
  bool apart_ = false;
  // Stacked, one direction, H > 64: the layers overlap (Args::fwd_words) when a step streams its weight gradients
  // (up to kStreamMaxB sequences) and has no dropout between layers; else they run one after another.
  bool overlap_ = false;
  bool overlap_on_ = true;
  // 128 < H <= 256: a step of more than kStreamMaxB sequences runs its recurrences in groups (Args::group_n) of up to
  // kGroupMaxN sequences a 16-block cluster, sized so that the groups fill the clusters the GPU runs at once
  // (group_clusters_), with the head between the stages as when the directions run apart.
  bool grouped_ok_ = false;
  bool grouping_on_ = true;
  int group_clusters_ = 0;
  size_t group_smem_bytes_ = 0;
  bool planning_on_ = true;
  std::vector<int> plan_;          // this step's groups of their own sizes: their first slots, then B (empty: none)
  bool beside_on_ = true;
  BesideSplit beside_;             // this step's GEMM beside the backward (main_parts 0: none)
  int sms_ = 0;                    // the GPU's SMs
  Stream side_stream_;             // its second stream, forked after the head kernel and joined before the sums
  Event fork_, join_;
  int group_size(int64_t B) const;   // sequences a group for a step of B (0: not grouped)
  void init_wide(int device);
  // 256 < H <= 512: every step runs grouped (fused_wide.cu), a group and direction on a cohort of WideMap::kBlocks
  // blocks, as many cohorts as the GPU holds at once (wide_cohorts_), each with its exchange buffers and flags.
  bool wide_ = false;
  int wide_cohorts_ = 0;
  size_t wide_smem_bytes_ = 0;
  DeviceBuffer<float> wide_h_, wide_part_;
  DeviceBuffer<unsigned long long> wide_flags_;
  DeviceBuffer<unsigned long long> flags_;   // overlap_: (layers, layer_flags_) the chain's flags
  int64_t layer_flags_ = 0;
  int64_t n_grad_ = 0, stride_ = 0;
  int hr_ = 0;                     // H <= 64: padded to 32, 48, 52, 56 or 64 (the one-block kernel's template argument);
                                   // 0: the cluster variant (64 < H <= 256)
  int cl_ = 0;                     // the cluster variant's blocks per sequence: 4 (H <= 128) or 16; 0: one block
  int threads_ = 0, rec_threads_ = 0;   // 4H rounded to a warp (the one-block recurrence's block); the cluster's
  int proj_threads_ = 0, proj_tiles_ = 1;   // the projection's block (<= kMaxProjThreads rows) and its row tiles
  int32_t HP_ = 0, Cp_ = 0;
  int32_t fc_smem_ = 0;            // the head's weight and bias in shared memory (floats; 0: read from global)
  size_t smem_bytes_ = 0;          // recurrence kernel
  size_t proj_smem_bytes_ = 0;     // projection kernel
  int32_t packed_floats_ = 0;
  DeviceBuffer<float> packed_;     // (layers, dirs) W_hh in the order of the cluster kernel's registers
                                   // (fused_projection.cu)
  DeviceBuffer<unsigned long long> pack_flags_;   // (layers, dirs, kPack) the pack blocks' epoch flags
  int64_t cap_B_ = 0, cap_T_ = 0;
  DeviceBuffer<float> scratch_;    // (layers, cap_B, dirs, per sequence) gates, cell states, tanh(c), h
  DeviceBuffer<float> xbuf_;       // stacked, copies_between: (layers - 1, cap_B, cap_T, dirs H) their inputs
  DeviceBuffer<float> dh_ext_;     // (cap_B, dirs, cap_T, H) d loss / d h that a layer (or the head, directions apart)
                                   // passes to the one below, in each direction's processing order
  DeviceBuffer<float> pooled_;     // directions apart: (cap_B, dirs, H) the top layer's pooled values
  DeviceBuffer<int32_t> pooled_at_;   // and the step pooling took (Args::pooled_at)
  size_t head_smem_bytes_ = 0;     // pool_head_kernel's shared memory
  DeviceBuffer<float> partials_;   // (cap_B, stride) per-sequence head gradients and loss when B > 1
  DeviceBuffer<float> wpart_;      // (dirs, groups, max(F, H) + H + 1, wstride_) weight-gradient partial sums, B > 1
  int32_t wstride_ = 0;            // a column of them: 4H rounded up to 8
  SplitTiles sg_[2];               // the split GEMM's tiles: layer 0 (F inputs), the layers above (dirs H inputs)
  DeviceBuffer<unsigned long long> progress_;   // (layers, cap_B, dirs, kMaxCl) the backward's progress words
  uint32_t epoch_ = 0;             // runs so far: tags the progress words of this run
  // More than 16 sequences (kInline): the slot table, copied on its own stream into one of three device tables in
  // turn (run explains why three).
  DeviceBuffer<GatherSlot> slots_dev_;   // (3, 2, kMaxGatherSlots): layer 0's slots, then the layers above's
  PinnedBuffer<GatherSlot> slots_host_;
  Stream copy_stream_;
  int table_ = 0;
  DeviceBuffer<long long> cycles_;
  Event marks_[5];                 // around the kernels of a recorded run
  bool record_ = false;
  bool streaming_ = true;
  std::string unsupported_;
};

}  // namespace ragtrain
