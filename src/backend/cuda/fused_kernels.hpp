// The fused LSTM step's kernels as the host sees them (fused_lstm.cu): the sizes both sides use, the parameters every
// kernel takes, and each kernel's host stub for launching it. Each kernel lives in the file named after its phase:
//   fused_projection.cu     projection_kernel             input projection (and the packed W_hh of the clusters)
//   fused_recurrence.cu     fused_lstm_kernel<HR>         recurrence, H <= 64: one block a sequence
//   fused_cluster.cu        fused_lstm_cluster_kernel<M>  recurrence, 64 < H <= 256: 4 or 16 blocks a sequence
//   fused_weight_grad.cu    weight_grad_kernel            weight gradients, up to 16 sequences (streaming)
//   fused_split_grad.cu     split_grad_kernel             weight gradients, more sequences (split over the timesteps)
//   fused_sums.cu           sums_kernel                   K > 1: the sums over groups, parts and sequences
//   fused_stack.cu          layer_input_kernel, input_grad_kernel   stacked layers: the next layer's input (dropout
//                                                         between layers), d loss / d h of the layer below
//   fused_pool_head.cu      pool_head_kernel              the head when the recurrences run in stages (Args::pooled_out)
//   fused_group.cu          group_forward_kernel<NT>, group_backward_kernel<NT>   recurrence stages, 128 < H <= 256
//                                                         and more than 16 sequences: groups in lock step
//   fused_wide.cu           wide_forward_kernel<NT>, wide_backward_kernel<NT>     recurrence stages, 256 < H <= 512:
//                                                         groups in lock step over 64 blocks each
// The types and kernels stay in an anonymous namespace, as when all of this was one file: every kernel file compiles
// its own copy (nvcc compiles each file's device code on its own, without device linking), and the kernels keep their
// names (what profilers and kernel timelines match on). The host reaches a kernel only by its stub's address.
#pragma once

#include <cstdint>

#include "batch_gather.hpp"
#include "fused_lanes.hpp"
#include "host_device.hpp"
#include "fused_lstm.hpp"

namespace ragtrain {
namespace {

constexpr int kInline = 16;     // slots passed in the kernel parameters (larger batches: a device table)
constexpr int kTables = 3;      // device slot tables used in turn (FusedLstm::run)
constexpr int kMaxH = 512;
constexpr int kMaxProjThreads = 256;   // the projection kernel's block (its launch bound): 4H > 256 in row tiles
// Bidirectional, one layer, H <= 64: the one-block kernel with both directions at once, a cluster of 2 blocks (one per
// direction), the head between them. Otherwise (H > 64 or stacked) the directions run apart (Args::pooled_out).
constexpr int kMaxBidirH = 64;
constexpr int kProjT = 64;      // input projection: timesteps per block at most
constexpr unsigned kFull = 0xffffffffu;
// Streaming weight gradients pays off while the GEMM's blocks find SMs of their own beside the recurrence's: on the
// H200 at H = 50 a whole run took 96.4-97.4 us streaming vs 99.2-100.9 waiting at K = 1, 101.3-103.5 vs 105.8-106.9
// at K = 16, but 149.8-151.6 vs 149.4-150.0 at K = 128 (the GEMM's polling blocks then share the recurrence's SMs).
// In the cluster variant a progress word per warp (each with its fence every chunk) cost more than it saved at
// H = 128 (173.4 vs 170.8 us); one per block saves 1.5-3.3 us.
constexpr int kStreamMaxB = 16;
constexpr int kMaxCl = 16;   // blocks per sequence of the cluster variant at most (ClusterMap4 / ClusterMap16)
constexpr int kPack = 32;                // blocks of the projection kernel that pack W_hh for the cluster variant

// The streaming weight-gradient GEMM (fused_weight_grad.cu).
constexpr int kWgM = 64, kWgN = 32, kWgThreads = 256;   // chunks of kWgL timesteps at most (fused_chunks.hpp)
// Sequence groups of the weight-gradient GEMM at most. (At K = 128, H = 50 on the H200: 32 groups of 4 sequences
// 42 us for the GEMM and 4.9 us for the sums; 128 groups of one 43.5 and 12.1.)
constexpr int kMaxGroups = 32;
constexpr int kWgSlots = 32;     // sequences of one group at most (kMaxGatherSlots / kMaxGroups)

// The cluster variant's shared memory (fused_cluster.cu): bars, h_s (2 vectors), dg_s (8), pool_s, dh_s, misc.
constexpr int kClBars = 8;               // floats ahead of h_s: 4 mbarriers (h, then d gates, double-buffered)
template <class M>
constexpr int kClusterSmemFixed = kClBars + 10 * M::kVec + 2 * M::kHmax + 4;

// The grouped recurrence's shared memory (fused_group.cu), in floats, for NT n tiles of 8 sequences: 2 mbarriers,
// then forward: h of the group (2 buffers, by sequence) and the two column halves' partial matvecs (2 buffers);
// backward: the 16 blocks' partial sums for this block's units (2 buffers) and the block's d gates (2 buffers).
template <int NT>
struct GroupSmem {
  static constexpr int kNP = 8 * NT;     // sequences of a group at most
  static constexpr int kHp = 256 + 4;    // h pitch: a B fragment's 8 sequences x 4 columns on distinct banks
  static constexpr int kRp = 64 + 4;     // a block's gate rows, pitched likewise
  static constexpr int kPp = kNP + 2;    // partial sums: the 16 units x 2 sequences a warp reads on distinct banks
  static constexpr int kBars = 4;
  static constexpr int kFwd = kBars + 2 * kNP * kHp + 4 * kNP * kRp;
  static constexpr int kBwd = kBars + 2 * 16 * 16 * kPp + 2 * kNP * kRp;
  static constexpr int kFloats = kFwd > kBwd ? kFwd : kBwd;
};
constexpr int kGroupMaxNT = 3;                 // n tiles of 8 sequences at most
constexpr int kGroupMaxN = 8 * kGroupMaxNT;    // sequences a group (and cluster) runs at most
constexpr int kMaxPlannedGroups = 16;          // groups of their own sizes a direction at most (Args::plan_n)

// The wide recurrence's shared memory (fused_wide.cu), in floats, for NT n tiles of 8 sequences: forward, h_{t-1} of
// the group and the four column quarters' partial products; backward, the block's d gates by sequence. (Its global
// buffers, Args::wide_h and wide_part, are laid out for kGroupMaxN sequences.)
template <int NT>
struct WideSmem {
  static constexpr int kNP = 8 * NT;
  static constexpr int kHp = WideMap::kHmax + 4;   // h of a sequence, pitched: a B fragment's 8 sequences x 4
                                                   // columns on distinct banks (16-byte rows)
  static constexpr int kRp = WideMap::kRows + 4;   // a block's gate rows, pitched likewise
  static constexpr int kFwd = kNP * kHp + 4 * kNP * kRp;
  static constexpr int kBwd = kNP * kRp;
  static constexpr int kFloats = kFwd > kBwd ? kFwd : kBwd;
};

// The input gradient of a stacked layer (fused_stack.cu): a block's tile of timesteps x input features. (16
// timesteps: overlapped, the backward below waits for a whole tile of the layer above's, so the tile is its lag.)
constexpr int kIgT = 16, kIgK = 64;

// The split weight-gradient GEMM (fused_split_grad.cu).
constexpr int kSgC = 32;              // timesteps per staged chunk
constexpr int kSgWarps = 12;          // warps of a block tile at most (two blocks an SM)
constexpr int kSgMaxThreads = 32 * kSgWarps;

// The sums over the weight gradients' partials (fused_sums.cu): up to kSumFew partials an entry, a thread sums an
// entry's (256 entries a block); more, 8 warps share an entry's (32 entries a block).
constexpr int kSumFew = 32;
RAGTRAIN_HD int sum_entries_per_block(int partials) { return partials <= kSumFew ? 256 : 32; }

struct Args {
  const float* params = nullptr;
  float* out = nullptr;           // B == 1: the fused buffer (+=); else the partials (=), block b at b * stride
  int64_t stride = 0;
  bool accumulate = true;
  const float* features = nullptr;
  const int32_t* labels = nullptr;
  const float* targets = nullptr;
  const GatherSlot* slots = nullptr;   // B > kInline
  int32_t B = 0, F = 0, H = 0, C = 0;
  bool classification = true;
  int32_t pool = 0;               // the head's input: 0 the last step's h, 1 the mean over the steps, 2 the max
  FusedLayout lay;
  // Bidirectional (dirs = 2): the reverse direction's gate blocks. Direction d of slot b has its own scratch
  // (index b * dirs + d, in its processing order: direction 1's row s is timestep len - 1 - s) and progress words.
  FusedLayout lay1;
  int32_t dirs = 1;
  int32_t hin = 0;                // the head's input width: dirs * H
  FusedHeadDropout drop;          // the head's dropout (threshold 0: none)
  float* scratch = nullptr;
  int64_t per_seq = 0;
  int32_t t_cap = 0;
  int32_t HP = 0, fc = 0, tc = 0, Cp = 0;   // tc: projection timesteps per block
  int32_t fc_smem = 0;            // floats of the head's weight and bias staged in shared memory (0: none)
  int32_t groups = 1;             // weight-gradient partial sums: sequence groups, or the split GEMM's parts (1:
                                  // added straight into the fused buffer)
  float* grads = nullptr;         // the fused buffer
  float* wpart = nullptr;         // groups > 1: (dirs, groups, F + H + 1, wstride) partial sums, column-major
  int32_t wstride = 0;            // a column's floats: 4H rounded up to 8
  int32_t sg_wm = 0, sg_wn = 0;   // split_grad_kernel: its block tile in warps (32 x 32 outputs each)
  // split_grad_kernel over some groups alone (FusedLstm's GEMM beside the backward): the slots sg_lo[r] ..
  // sg_hi[r] - 1, r < sg_nr (0: every slot), its parts the partial sums sg_part0 .. of the groups ones.
  int32_t sg_nr = 0, sg_part0 = 0;
  int16_t sg_lo[kMaxPlannedGroups] = {}, sg_hi[kMaxPlannedGroups] = {};
  int32_t sum_blocks = 0;         // sums_kernel: blocks of the weight-gradient sums (the head's sums after them)
  int64_t head_lo = 0, n_grad = 0;   // the head's gradients and the extras: fused-buffer entries [head_lo, n_grad)
  // The backward's progress, kMaxCl words per sequence (one per block of a cluster; the one-block kernel uses the
  // first), each (epoch << 32) | v: every d gate of steps >= v (and every h of the forward) that the block stored is
  // in the scratch. With `stream` set (few sequences) the recurrence publishes them at every chunk boundary and the
  // weight-gradient blocks, resident on other SMs (programmatic dependent launch), sum each chunk of timesteps as
  // soon as it is published instead of waiting for the whole recurrence kernel.
  unsigned long long* progress = nullptr;
  uint32_t epoch = 0;
  int32_t words = 1;              // progress words in use per sequence
  bool stream = false;
  long long* cycles = nullptr;    // (5) block 0's clock at the recurrence's phase boundaries, or null
  // W_hh packed for the recurrence kernel's registers (packed_source), written by the projection's pack blocks, each
  // of which then sets its flag to the epoch.
  float* packed = nullptr;
  int32_t packed_floats = 0;
  unsigned long long* pack_flags = nullptr;   // (kPack)
  int32_t pack_rows = 0;                      // the projection grid's first rows, holding the pack blocks (cluster)
  // Stacked layers (FusedLstm::run runs each layer's kernels in turn, these fields set per layer): what the recurrence
  // runs (kStageAll: forward, head and backward, the top layer; kStageForward: the forward only, a layer below the
  // top; kStageBackward: the backward only, seeded by dh_ext instead of the head), and d loss / d h_t from the layer
  // above: (B, t_cap, H) by slot, added to d h_t (the recurrence kernels' kExt variants).
  int32_t stage = 0;
  const float* dh_ext = nullptr;
  // Layer 0's inputs are the shard's features, which no kernel of the step writes: the projection stages them before
  // its wait for the previous kernel. A layer above reads what the layer below wrote, after that wait.
  bool x_early = true;
  // input_grad_kernel: d loss / d x_t of this layer into `dx` ((B, t_cap, F) by slot, the layer below's dh_ext),
  // through the dropout between layers (between.threshold 0: none), layer `between_layer`'s mask.
  float* dx = nullptr;
  FusedHeadDropout between;
  int32_t between_layer = 0;
  // layer_input_kernel: the layer below's h (h_below: its scratch) through that mask, into x_next ((B, t_cap, F)).
  const float* h_below = nullptr;
  float* x_next = nullptr;
  // Bidirectional above H = 64 or stacked, the directions run apart (FusedLstm::apart_): the recurrence kernels run
  // (slot b, direction d) as sequence b dirs + d (its scratch, progress words and, in the cluster variant, packed W_hh
  // d) in stages only; the top layer's forward stage leaves each unit's pooled value and the pooling's step (the
  // max's, in processing order) in pooled_out / pooled_at ((B dirs, H) each, when set), and pool_head_kernel runs the
  // head from them and writes the top layer's d loss / d h_t into dx (then its dh_ext) as a layer above would.
  float* pooled_out = nullptr;
  int32_t* pooled_at = nullptr;
  // Stacked layers overlapped (FusedLstm::overlap_, up to kStreamMaxB sequences, one direction, the cluster variant,
  // no dropout between layers): every kernel of the chain polls flags of the kernels before it instead of waiting for
  // the one before to end, so layer l + 1 runs timestep t while layer l runs later ones, forward and backward.
  //  - the recurrence's forward stage publishes its forward progress in fwd_words ((B, kMaxCl), a word per block:
  //    every h of steps < v stored; fwd_reached);
  //  - the projection of the layer above polls them (below_words, the layer below's epoch below_epoch) for each
  //    chunk of timesteps before it reads that chunk's h, and publishes each chunk of gate rows in proj_flags
  //    ((B, t_cap / 8 rounded up, row tiles), v = 0), which the recurrence polls (proj_flags set) before it loads a
  //    chunk's gates, instead of waiting for the projection kernel;
  //  - the input gradient (overlap set) polls the layer above's backward progress words (Args::progress) for each
  //    tile of kIgT timesteps, and publishes each tile in dx_flags ((B, t_cap / kIgT rounded up, H / 64 rounded up),
  //    the layer below's epoch dx_epoch), which that layer's backward polls before it loads a tile's rows of dh_ext.
  unsigned long long* fwd_words = nullptr;
  const unsigned long long* below_words = nullptr;
  uint32_t below_epoch = 0;
  unsigned long long* proj_flags = nullptr;
  unsigned long long* dx_flags = nullptr;
  uint32_t dx_epoch = 0;
  bool overlap = false;
  // Grouped (FusedLstm's runs above kStreamMaxB sequences at 128 < H <= 256, fused_group.cu): the slots, sorted by
  // length (longest first), form groups of group_n consecutive slots, each group (and direction) a 16-block cluster.
  int32_t group_n = 0;
  // Groups of their own sizes (group_plan.hpp): a stage runs as one launch per tile count, all at once on their own
  // clusters, and this launch's groups (of the kernel's tiles) of a direction are slots plan_lo[g] .. plan_hi[g] - 1,
  // g < plan_n (0: groups of group_n consecutive slots). plan_join: a launch beside the one before it, which its
  // trigger starts; it waits for that one only before it ends, so that the kernels after it see both.
  int32_t plan_n = 0;
  bool plan_join = false;
  int16_t plan_lo[kMaxPlannedGroups] = {}, plan_hi[kMaxPlannedGroups] = {};
  // Wide (256 < H <= 512, fused_wide.cu): every step runs grouped, a group (and direction) on a cohort of
  // WideMap::kBlocks blocks; cohort c runs groups x directions c, c + cohorts, ... in rounds. Each cohort's h of the
  // last step (2 buffers x kGroupMaxN sequences x kHmax), its blocks' partial sums of d h (2 buffers x kBlocks source
  // blocks x kHmax units x the group's sequences) and a flag a block: (epoch << 32 | stage << 31 | steps the block
  // completed in this kernel), epoch the layer's, stage 1 the backward.
  float* wide_h = nullptr;
  float* wide_part = nullptr;
  unsigned long long* wide_flags = nullptr;
};
constexpr int32_t kStageAll = 0, kStageForward = 1, kStageBackward = 2;

struct Params {
  Args a;
  GatherSlot slot[kInline];
};

// Where a flag of the overlapped chain sits (Args::proj_flags, dx_flags), for the host that sizes the buffers and the
// kernels that publish and poll: the projection's chunks of 8 timesteps (its chunk a.tc is a multiple of 8) of each
// row tile of gate rows, the input gradient's tiles of kIgT timesteps x kIgK columns, by slot. Slot b = the number of
// slots gives a layer's count.
RAGTRAIN_HD int chain_proj_flag(int t_cap, int H, int b, int chunk, int tile) {
  return (b * ((t_cap + 7) / 8) + chunk) * ((4 * H + kMaxProjThreads - 1) / kMaxProjThreads) + tile;
}
RAGTRAIN_HD int chain_dx_flag(int t_cap, int H, int b, int tblock, int kblock) {
  return (b * ((t_cap + kIgT - 1) / kIgT) + tblock) * ((H + kIgK - 1) / kIgK) + kblock;
}

}  // namespace

// Each kernel's host stub, for cudaFuncSetAttribute and cudaLaunchKernelExC.
const void* fused_projection_kernel();
// kExt: the backward adds Args::dh_ext (a layer below the top of a stacked LSTM).
template <int HR, bool kExt>
const void* fused_one_block_kernel();   // HR = 32, 48, 52, 56, 64 (one_block_width)
// kChain: polls and publishes the overlapped chain's flags (Args::fwd_words); instances (false, false), (false, true)
// and (true, true): the variant adding dh_ext runs only below the top of a stacked or apart model.
template <class M, bool kExt, bool kChain>
const void* fused_cluster_kernel();     // M = ClusterMap4, ClusterMap16
// The grouped recurrence's stages (NT = 1, 2, 3: up to 8, 16 or 24 sequences a group).
template <int NT>
const void* fused_group_forward_kernel();
template <int NT>
const void* fused_group_backward_kernel();
// The wide recurrence's stages (NT = 1, 2, 3).
template <int NT>
const void* fused_wide_forward_kernel();
template <int NT>
const void* fused_wide_backward_kernel();
const void* fused_weight_grad_kernel();
const void* fused_split_grad_kernel();
const void* fused_sums_kernel();
const void* fused_layer_input_kernel();
const void* fused_input_grad_kernel();
const void* fused_pool_head_kernel();

}  // namespace ragtrain
