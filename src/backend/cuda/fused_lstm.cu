// The fused LSTM training step, three kernels in one stream (four with K > 1), each a programmatic dependent launch
// of the one before, so its blocks are placed while that one ends. This file is the host side (the buffers, the
// variant for the model, the launches); each kernel is in the file named below (fused_kernels.hpp lists them):
//   1. input projection (fused_projection.cu)  W_ih x_t + b_ih + b_hh for every (sequence, timestep), into a
//      per-sequence global scratch (L2-resident); a block per (sequence, time chunk), so all SMs share it. It stages
//      its inputs while the previous step's optimizer ends and reads the parameters after it (W_ih through shared
//      memory). For H > 64 its first kPack blocks write W_hh in the cluster kernel's register order for that
//      kernel's prologue.
//   2. recurrence (one thread block per sequence for H <= 64, fused_recurrence.cu; a cluster of 4 blocks above,
//      fused_cluster.cu): forward recurrence, gate activations, c, tanh(c) and h saved to the scratch, and the
//      pooling of h (last step, mean or max over the sequence's steps, kept in registers); head, loss and d loss /
//      d pooled h (fused_head.hpp); backward recurrence (seeded by the pooling's backward: the last step, every
//      step / length, or each unit's argmax step; d gates overwrite the activations in the scratch); then the head's
//      gradients. Its prologue (W_hh into registers) overlaps the projection.
//   3. weight gradients  [dW_ih dW_hh db] = sum over sequences and t of dg_t [x_t, h_{t-1}, 1]^T. Up to 16 sequences
//      a tiled GEMM over the other SMs, split over groups of sequences, that streams: each chunk of timesteps is
//      summed as soon as the backward has published that it is stored (fused_weight_grad.cu). More: a GEMM over all
//      SMs after the recurrence, split over equal parts of all sequences' timesteps (fused_split_grad.cu).
//   4. (K > 1) the sums over the groups or parts, in order, and, for the head, over the sequences (fused_sums.cu).
// In the recurrence thread r = 4 j + q owns gate q of hidden unit j (PyTorch row q H + j), so the four gates of a
// unit sit in four adjacent lanes and the cell update needs only warp shuffles: one block barrier per timestep,
// forward and backward (h and d gates are double-buffered in shared memory).
// Recurrent weights always in registers: H <= 64 in one block, where a lane holds the four gate rows of its unit at a
// quarter of the columns (forward) and, for four units' columns, a quarter of one gate's rows (backward), so it
// loads a quarter of the step's vector instead of all of it (slice_matvec; zero-padded to 32, 48, 52, 56 or 64 so
// the unrolled loops have no branches); 64 < H <= 128 spread over the 4 SMs of a thread-block cluster, up to 256 over
// 16, h and d gates exchanged through distributed shared memory (fused_cluster.cu); above 256 (up to 512) over the 64
// blocks of a cohort, h and partial sums exchanged through L2 (fused_wide.cu).
// The recurrence is latency-bound: what it costs is the chain of dependent instructions per timestep (shared-memory
// loads, the FMA chains, the activations, the shuffles, the barrier) and every global round trip (~600 cycles)
// left on that chain, so loads are issued far ahead and in batches; the projection and weight gradients, which do
// not depend on the recurrence's order, run on the other SMs (the H200's measurements are in doc/performance.md).
// Every sum has a fixed order and there are no atomics, so a rerun gives identical bits.
#include "fused_lstm.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "fill.hpp"
#include "fused_kernels.hpp"
#include "fused_lanes.hpp"
#include "group_plan.hpp"
#include "ragtrain/core/error_cuda.hpp"

namespace ragtrain {
namespace {

int round_up(int v, int m) { return (v + m - 1) / m * m; }

// The projection's features per shared-memory chunk for a layer of F inputs.
int proj_chunk(int64_t F) { return std::min(round_up(static_cast<int>(F), 8), 64); }

// sums_kernel's blocks a direction for a layer's weight gradients, 4H x (F + H + 1) entries over `groups` partials.
int32_t sum_blocks_for(int groups, int64_t F, int64_t H) {
  const int per_block = sum_entries_per_block(groups);
  return static_cast<int32_t>((4 * H * (F + H + 1) + per_block - 1) / per_block);
}

}  // namespace

std::string fused_lstm_unsupported(const ModelShape& shape) {
  if (shape.layers < 1 || shape.layers > kFusedMaxLayers)
    return RT_MSG(shape.layers << " layers (the fused kernel runs 1 to " << kFusedMaxLayers << ")");
  if (shape.hidden > kMaxH) return RT_MSG("H=" << shape.hidden << " (the fused kernel runs H <= " << kMaxH << ")");
  if (shape.hidden < 1 || shape.input_size < 1 || shape.outputs < 1) return "an empty model";
  return "";
}

FusedLayoutResult fused_layout_from_index(const ModelShape& shape, const std::vector<int64_t>& dev_index,
                                          int64_t head_offset, int64_t extras_offset) {
  FusedLayoutResult res;
  const ParamLayout pl(shape);
  const int64_t H = shape.hidden;
  // Gate q's block of a tensor of `width` columns: rows q H .. q H + H - 1, contiguous in the device layout.
  auto gate_block = [&](const ParamTensor& t, int64_t width, int q, int64_t* out) {
    const int64_t first = t.offset + q * H * width;
    const int64_t base = dev_index[static_cast<size_t>(first)];
    for (int64_t i = 0; i < H * width; ++i)
      if (dev_index[static_cast<size_t>(first + i)] != base + i) return false;
    *out = base;
    return true;
  };
  // Layer 0's directions, then the layers above's, layer by layer.
  const int64_t D = shape.directions();
  res.upper.resize(static_cast<size_t>((shape.layers - 1) * D));
  for (int64_t i = 0; i < shape.layers * D; ++i) {
    const int64_t l = i / D, d = i % D;
    FusedLayout& lay = l > 0 ? res.upper[static_cast<size_t>(i - D)] : (d == 0 ? res.layout : res.reverse);
    const int64_t width = l == 0 ? shape.input_size : shape.head_input();
    for (int q = 0; q < 4; ++q) {
      if (!gate_block(pl.w_ih(l, d), width, q, &lay.w_ih[q]) || !gate_block(pl.w_hh(l, d), H, q, &lay.w_hh[q]) ||
          !gate_block(pl.b_ih(l, d), 1, q, &lay.b_ih[q]) || !gate_block(pl.b_hh(l, d), 1, q, &lay.b_hh[q])) {
        res.why = "cuDNN's weight space stores a gate block non-contiguously";
        return res;
      }
    }
    lay.fc_w = head_offset;
    lay.fc_b = head_offset + shape.outputs * shape.head_input();
    lay.extras = extras_offset;
  }
  res.ok = true;
  return res;
}

namespace {
// The grouped stages' kernel for nt tiles of 8 sequences: a 16-block cluster's (fused_group.cu) or, wide, a cohort's
// (fused_wide.cu); the backward stage's or the forward's.
const void* stage_kernel(bool wide, int nt, bool back) {
  if (wide)
    return nt == 1   ? (back ? fused_wide_backward_kernel<1>() : fused_wide_forward_kernel<1>())
           : nt == 2 ? (back ? fused_wide_backward_kernel<2>() : fused_wide_forward_kernel<2>())
                     : (back ? fused_wide_backward_kernel<3>() : fused_wide_forward_kernel<3>());
  return nt == 1   ? (back ? fused_group_backward_kernel<1>() : fused_group_forward_kernel<1>())
         : nt == 2 ? (back ? fused_group_backward_kernel<2>() : fused_group_forward_kernel<2>())
                   : (back ? fused_group_backward_kernel<3>() : fused_group_forward_kernel<3>());
}

// How many clusters of cl blocks of kernel k the GPU runs at once.
int active_clusters(const void* k, int cl, int threads, size_t smem) {
  cudaLaunchConfig_t probe = {};
  cudaLaunchAttribute dims = {};
  dims.id = cudaLaunchAttributeClusterDimension;
  dims.val.clusterDim.x = static_cast<unsigned>(cl);
  dims.val.clusterDim.y = dims.val.clusterDim.z = 1;
  probe.gridDim = dim3(static_cast<unsigned>(cl));
  probe.blockDim = dim3(static_cast<unsigned>(threads));
  probe.dynamicSmemBytes = smem;
  probe.attrs = &dims;
  probe.numAttrs = 1;
  int clusters = 0;
  const cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, k, &probe);
  // A cluster the GPU cannot hold at all (a MIG slice's GPCs have fewer SMs than 16) may be answered with this error
  // instead of 0; both mean none fits (FusedLstm::unsupported then leaves the model to cuDNN). Not sticky: cleared.
  if (e == cudaErrorInvalidClusterSize) {
    cudaGetLastError();
    return 0;
  }
  CUDA_CHECK(e);
  return clusters;
}
// One kernel launch. Programmatic dependent launch (pdl): the projection's blocks stage their features while the
// previous step's optimizer finishes, the recurrence kernel's blocks start while the projection runs, and the
// weight-gradient blocks are resident when the recurrence ends. cluster > 1: the cluster variant's blocks of a
// sequence, a group's 16 blocks, or the bidirectional one-block kernel's two directions.
template <class P>
void launch_kernel(const void* fn, P* q, dim3 grid, int threads, size_t smem, unsigned cluster, cudaStream_t stream,
                   bool pdl) {
  void* args[] = {q};
  cudaLaunchAttribute attrs[2] = {};
  int n = 0;
  if (pdl) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = cluster;
    attrs[n].val.clusterDim.y = 1;
    attrs[n++].val.clusterDim.z = 1;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = static_cast<unsigned>(n);
  CUDA_CHECK(cudaLaunchKernelExC(&cfg, fn, args));
}

}  // namespace

FusedLstm::FusedLstm(const ModelShape& shape, const FusedLayout& layout, int64_t n_grad, int device,
                     const FusedLayout& reverse, const std::vector<FusedLayout>& upper)
    : shape_(shape), layout_(layout), reverse_(reverse), dirs_(shape.bidirectional ? 2 : 1), n_grad_(n_grad),
      stride_((n_grad + 31) / 32 * 32), side_stream_(Stream::create()), fork_(Event::create(false)),
      join_(Event::create(false)), copy_stream_(Stream::create()) {
  const std::string why = fused_lstm_unsupported(shape);
  RT_CHECK(why.empty(), "fused LSTM: " << why);
  RT_CHECK(static_cast<int64_t>(upper.size()) == (shape.layers - 1) * dirs_,
           "fused LSTM: " << upper.size() << " upper gate blocks for " << shape.layers << " layers");
  layers_.push_back(layout);
  if (dirs_ == 2) layers_.push_back(reverse);
  layers_.insert(layers_.end(), upper.begin(), upper.end());
  const bool stacked = shape.layers > 1;
  const int H = static_cast<int>(shape.hidden), F = static_cast<int>(shape.input_size), G = 4 * H;
  const int HI = static_cast<int>(shape.head_input());   // a layer above's inputs
  hr_ = one_block_width(H);   // 0: the cluster variant
  wide_ = H > ClusterMap16::kHmax;
  apart_ = dirs_ == 2 && (H > kMaxBidirH || stacked);
  overlap_ = stacked && dirs_ == 1 && hr_ == 0 && !wide_;
  cl_ = hr_ > 0 || wide_ ? 0 : (H <= ClusterMap4::kHmax ? ClusterMap4::kCl : ClusterMap16::kCl);
  threads_ = round_up(G, 32);   // the one-block recurrence
  proj_threads_ = std::min(threads_, kMaxProjThreads);
  proj_tiles_ = (threads_ + kMaxProjThreads - 1) / kMaxProjThreads;
  rec_threads_ = hr_ > 0 ? threads_ : (cl_ == 4 ? ClusterMap4::kThreads : ClusterMap16::kThreads);
  HP_ = one_block_pitch(H, hr_);
  Cp_ = round_up(static_cast<int>(shape.outputs), 4);
  int optin = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  // The head's parameters go to shared memory when small: at the last step the head then waits on no global load.
  const int64_t C = shape.outputs;
  fc_smem_ = C * (HI + 1) <= 8192 ? static_cast<int32_t>((C * (HI + 1) + 3) / 4 * 4) : 0;
  // (The one-block kernel's prologue stages W_hh after these, threads x (hr_ + 1) floats, and with a small head the
  // fused buffer's values of its gradients after that. Bidirectional: d loss / d pooled h of both directions, and
  // both pooled vectors.)
  const int64_t staged = threads_ * (hr_ + 1) + (fc_smem_ ? (C * (HI + 1) + 3 + 3) / 4 * 4 : 0);
  const int64_t one_block = 2 * HP_ + 8 * HP_ + dirs_ * HP_ + 4 + (dirs_ == 2 ? 2 * HP_ : 0) + staged;
  const int64_t cluster_fixed = cl_ == 4 ? kClusterSmemFixed<ClusterMap4> : kClusterSmemFixed<ClusterMap16>;
  const int64_t fixed = (hr_ > 0 ? one_block : cluster_fixed) + Cp_ + fc_smem_;
  RT_CHECK(fixed * static_cast<int64_t>(sizeof(float)) <= optin, "fused LSTM: the head exceeds shared memory");
  smem_bytes_ = static_cast<size_t>(fixed) * sizeof(float);
  const void* k = wide_ ? nullptr : kernel();
  // (Stacked: the layers below the top run the variant that adds dh_ext; directions apart, the top layer too;
  // overlapped, the chain's variant.)
  for (const void* v : {kernel(), kernel(true), kernel(false, true)}) {
    if (wide_ || (v != k && !stacked && !apart_)) break;
    CUDA_CHECK(cudaFuncSetAttribute(v, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes_)));
    if (cl_ > 8) CUDA_CHECK(cudaFuncSetAttribute(v, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  grouped_ok_ = cl_ == GroupMap::kCl;
  if (grouped_ok_) {   // the grouped stages' kernels (fused_group.cu): one shared-memory size, the larger one's
    group_smem_bytes_ = static_cast<size_t>(GroupSmem<kGroupMaxNT>::kFloats) * sizeof(float);
    for (const void* v : {fused_group_forward_kernel<1>(), fused_group_forward_kernel<2>(),
                          fused_group_forward_kernel<3>(), fused_group_backward_kernel<1>(),
                          fused_group_backward_kernel<2>(), fused_group_backward_kernel<3>()}) {
      CUDA_CHECK(cudaFuncSetAttribute(v, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(group_smem_bytes_)));
      CUDA_CHECK(cudaFuncSetAttribute(v, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    }
    group_clusters_ = active_clusters(fused_group_forward_kernel<kGroupMaxNT>(), GroupMap::kCl, GroupMap::kThreads,
                                      group_smem_bytes_);
    grouped_ok_ = group_clusters_ >= 1;
  }
  if (wide_) init_wide(device);
  // 16 blocks: above the portable cluster size (8), which the GPU must allow and fit (a MIG slice may not)
  if (cl_ > 8 && active_clusters(k, cl_, rec_threads_, smem_bytes_) < 1)
    unsupported_ = RT_MSG("H=" << H << " needs a cluster of " << cl_ << " blocks, which this GPU does not run");
  // The projection's staged chunks: the widest of layer 0's (F inputs) and the layers above's (HI).
  proj_smem_bytes_ = static_cast<size_t>((kProjT + proj_threads_) * (proj_chunk(stacked ? std::max(F, HI) : F) + 4)) *
                     sizeof(float);
  RT_CHECK(static_cast<int64_t>(proj_smem_bytes_) <= optin,
           "fused LSTM: the projection's W_ih chunk exceeds shared memory");
  CUDA_CHECK(cudaFuncSetAttribute(fused_projection_kernel(),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(proj_smem_bytes_)));
  wstride_ = round_up(G, 8);
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  sms_ = sms;
  sg_[0] = split_tiles(F, sms);
  sg_[1] = split_tiles(HI, sms);
  const size_t sg_max = std::max(split_smem_bytes(kMaxGatherSlots, sg_[0]),
                                 stacked ? split_smem_bytes(kMaxGatherSlots, sg_[1]) : size_t{0});
  RT_CHECK(static_cast<int64_t>(sg_max) <= optin, "fused LSTM: the weight-gradient tiles exceed shared memory");
  CUDA_CHECK(cudaFuncSetAttribute(fused_split_grad_kernel(),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(sg_max)));
  packed_floats_ = hr_ > 0 || wide_ ? 0
                   : cl_ == 4 ? ClusterMap4::kCl * 2 * ClusterMap4::kCols * ClusterMap4::kThreads
                              : ClusterMap16::kCl * 2 * ClusterMap16::kCols * ClusterMap16::kThreads;
  const size_t LD = static_cast<size_t>(shape.layers * dirs_);   // (layer, direction)
  if (packed_floats_ > 0) packed_.resize_discard(LD * static_cast<size_t>(packed_floats_));
  pack_flags_.resize_discard(LD * kPack);
  // Epoch 0 is never a run's: a flag not yet written reads as not packed.
  CUDA_CHECK(cudaMemset(pack_flags_.get(), 0, LD * kPack * sizeof(unsigned long long)));
  if (apart_ || grouped_ok_ || wide_) {   // the head's block: the pooled vector and its gradient, the logits, misc
    head_smem_bytes_ = static_cast<size_t>(2 * ((HI + 3) / 4 * 4) + Cp_ + 4) * sizeof(float);
    RT_CHECK(static_cast<int64_t>(head_smem_bytes_) <= optin, "fused LSTM: the head exceeds shared memory");
    CUDA_CHECK(cudaFuncSetAttribute(fused_pool_head_kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(head_smem_bytes_)));
  }
  slots_host_ = PinnedBuffer<GatherSlot>(2 * kMaxGatherSlots, false);
  slots_dev_.resize_discard(kTables * 2 * kMaxGatherSlots);
  cycles_.resize_discard(8);
}

// The wide stages' kernels (fused_wide.cu): their shared memory, and the cohorts of WideMap::kBlocks blocks the GPU
// holds at once (a grid never larger: a group's blocks wait on each other's flags). A GPU that holds no cohort (e.g. a
// MIG slice) leaves the model to cuDNN (unsupported()).
void FusedLstm::init_wide(int device) {
  wide_smem_bytes_ = static_cast<size_t>(WideSmem<kGroupMaxNT>::kFloats) * sizeof(float);
  for (const void* v : {fused_wide_forward_kernel<1>(), fused_wide_forward_kernel<2>(), fused_wide_forward_kernel<3>(),
                        fused_wide_backward_kernel<1>(), fused_wide_backward_kernel<2>(),
                        fused_wide_backward_kernel<3>()})
    CUDA_CHECK(cudaFuncSetAttribute(v, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(wide_smem_bytes_)));
  int per_sm = 0, sms = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_wide_forward_kernel<kGroupMaxNT>(),
                                                           WideMap::kThreads, wide_smem_bytes_));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  wide_cohorts_ = per_sm * sms / WideMap::kBlocks;
  if (wide_cohorts_ < 1) {
    unsupported_ = RT_MSG("H=" << shape_.hidden << " needs " << WideMap::kBlocks << " blocks at once; this GPU holds "
                               << per_sm * sms);
    return;
  }
  const size_t C = static_cast<size_t>(wide_cohorts_);
  wide_h_.resize_discard(C * 2 * kGroupMaxN * WideMap::kHmax);
  wide_part_.resize_discard(C * 2 * WideMap::kBlocks * WideMap::kHmax * kGroupMaxN);
  wide_flags_.resize_discard(C * WideMap::kBlocks);
  // Epoch 0 is never a run's: a flag not yet written never reads as a completed step.
  CUDA_CHECK(cudaMemset(wide_flags_.get(), 0, wide_flags_.size() * sizeof(unsigned long long)));
}

const void* FusedLstm::kernel(bool ext, bool chain) const {
  if (ext) {
    switch (hr_) {
      case 32: return fused_one_block_kernel<32, true>();
      case 48: return fused_one_block_kernel<48, true>();
      case 52: return fused_one_block_kernel<52, true>();
      case 56: return fused_one_block_kernel<56, true>();
      case 64: return fused_one_block_kernel<64, true>();
      default:
        return cl_ == 4 ? fused_cluster_kernel<ClusterMap4, true, true>()
                        : fused_cluster_kernel<ClusterMap16, true, true>();
    }
  }
  switch (hr_) {
    case 32: return fused_one_block_kernel<32, false>();
    case 48: return fused_one_block_kernel<48, false>();
    case 52: return fused_one_block_kernel<52, false>();
    case 56: return fused_one_block_kernel<56, false>();
    case 64: return fused_one_block_kernel<64, false>();
    default:
      if (chain)
        return cl_ == 4 ? fused_cluster_kernel<ClusterMap4, false, true>()
                        : fused_cluster_kernel<ClusterMap16, false, true>();
      return cl_ == 4 ? fused_cluster_kernel<ClusterMap4, false, false>()
                      : fused_cluster_kernel<ClusterMap16, false, false>();
  }
}

// One sequence: its sums go straight into the fused buffer. Up to kStreamMaxB: up to kMaxGroups groups of
// consecutive slots (weight_grad_kernel), whose sums a second pass adds in group order. More: the split GEMM's parts
// of the `timesteps` of all sequences, at least 16 timesteps a part, at most sg_parts_ over all directions.
int FusedLstm::weight_grad_groups(int64_t B, int64_t timesteps, const SplitTiles& tiles) const {
  // (Bidirectional: each direction's parts, so the two together still fill the SMs about twice.)
  if (B > kStreamMaxB)
    return static_cast<int>(std::clamp<int64_t>((timesteps + 15) / 16, 1, std::max(1, tiles.parts / dirs_)));
  return static_cast<int>(B == 1 ? 1 : std::min<int64_t>(B, kMaxGroups));
}

// Grouped: the groups of both directions fill the clusters that run at once, at most kGroupMaxN sequences a group (a
// larger step runs in waves). (Not in a recorded run: that times the one-sequence kernels.)
int FusedLstm::group_size(int64_t B) const {
  if (wide_) return static_cast<int>(std::min<int64_t>((B * dirs_ + wide_cohorts_ - 1) / wide_cohorts_, kGroupMaxN));
  if (!grouped_ok_ || !grouping_on_ || record_ || B <= kStreamMaxB) return 0;
  const int64_t n = (B * dirs_ + group_clusters_ - 1) / group_clusters_;
  return static_cast<int>(std::min<int64_t>(n, kGroupMaxN));
}

// The split weight-gradient GEMM (B > kStreamMaxB) over z = [x, h, 1] of inputs + H + 1 columns: warp tiles of 32 x
// 32, block tiles of <= 4 warps along z's columns and <= kSgWarps warps, as few block tiles as that allows, and parts
// of the timesteps for about two blocks per SM.
FusedLstm::SplitTiles FusedLstm::split_tiles(int64_t inputs, int sms) const {
  const int64_t H = shape_.hidden;
  const int rows32 = static_cast<int>((4 * H + 31) / 32), cols32 = static_cast<int>((inputs + H + 1 + 31) / 32);
  SplitTiles t;
  t.ntiles = (cols32 + 3) / 4;
  t.wn = (cols32 + t.ntiles - 1) / t.ntiles;
  const int wm_max = kSgWarps / t.wn;
  t.mtiles = (rows32 + wm_max - 1) / wm_max;
  t.wm = (rows32 + t.mtiles - 1) / t.mtiles;
  t.parts = std::max(1, 2 * sms / (t.mtiles * t.ntiles));
  return t;
}

size_t FusedLstm::split_smem_bytes(int64_t B, const SplitTiles& tiles) const {
  return static_cast<size_t>(2 * kSgC * (32 * (tiles.wm + tiles.wn) + 16)) * sizeof(float) +
         static_cast<size_t>(B) * 8 + static_cast<size_t>(2 * B + 1 + 4 * kSgC) * sizeof(int);
}

// A sequence's scratch: gates (4H), c, tanh(c), h (H each) for cap_T steps, rounded to a multiple of 4 H floats: every
// sequence's rows stay 16-byte aligned (the recurrences store a unit's four gates as one float4), and its h rows are
// rows of H floats from the scratch's h block, which a stacked layer above reads as its input features.
int64_t FusedLstm::per_seq() const { return shape_.hidden * ((cap_T_ * 7 + 3) / 4 * 4); }

void FusedLstm::reserve(int64_t B, int64_t T) {
  if (B <= cap_B_ && T <= cap_T_) return;
  cap_B_ = std::max(cap_B_, B);
  cap_T_ = std::max(cap_T_, T);
  const int64_t H = shape_.hidden, F = shape_.input_size, HI = shape_.head_input();
  const int64_t L = shape_.layers;
  scratch_.resize_discard(static_cast<size_t>(L * cap_B_ * dirs_ * per_seq()));
  if (L > 1) xbuf_.resize_discard(static_cast<size_t>((L - 1) * cap_B_ * cap_T_ * HI));
  // (Overlapped, a slab per layer boundary: two layers' backwards run at once.)
  const int64_t slabs = overlap_ ? L - 1 : 1;
  if (L > 1 || apart_ || grouped_ok_ || wide_)
    dh_ext_.resize_discard(static_cast<size_t>(slabs * cap_B_ * dirs_ * cap_T_ * H));
  if (overlap_) {   // every flag of the overlapped chain, each layer's own (Args::fwd_words)
    const int T = static_cast<int>(cap_T_), Hi = static_cast<int>(H), Bc = static_cast<int>(cap_B_);
    layer_flags_ = cap_B_ * kMaxCl + chain_proj_flag(T, Hi, Bc, 0, 0) + chain_dx_flag(T, Hi, Bc, 0, 0);
    flags_.resize_discard(static_cast<size_t>(L * layer_flags_));
    CUDA_CHECK(cudaMemset(flags_.get(), 0, flags_.size() * sizeof(unsigned long long)));
  }
  if (apart_ || grouped_ok_ || wide_) {
    pooled_.resize_discard(static_cast<size_t>(cap_B_ * dirs_ * H));
    pooled_at_.resize_discard(static_cast<size_t>(cap_B_ * dirs_ * H));
  }
  progress_.resize_discard(static_cast<size_t>(L * cap_B_ * dirs_ * kMaxCl));   // each layer's own
  // Epoch 0 is never a run's: a word not yet written this run never reads as progress.
  CUDA_CHECK(cudaMemset(progress_.get(), 0, progress_.size() * sizeof(unsigned long long)));
  if (cap_B_ > 1) {
    partials_.resize_discard(static_cast<size_t>(cap_B_ * stride_));
    CUDA_CHECK(cudaMemset(partials_.get(), 0, partials_.size() * sizeof(float)));   // entries never written stay 0
    // (Grouped, one layer and direction: twice the split GEMM's parts, for the GEMM beside the backward.)
    const bool beside = grouped_ok_ && L == 1 && dirs_ == 1;
    const int64_t parts = std::max<int64_t>(
        std::min<int64_t>(cap_B_, kMaxGroups),
        cap_B_ > kStreamMaxB ? (beside ? 2 : 1) * std::max(sg_[0].parts, sg_[1].parts) : 1);
    wpart_.resize_discard(static_cast<size_t>(dirs_ * parts * ((L > 1 ? std::max(F, HI) : F) + H + 1) * wstride_));
  }
}

// The fields every kernel of a step shares, for B sequences of at most T steps (layer 0's; FusedLstm::run sets
// each layer's own, and the slots).
template <class P>
P FusedLstm::common_params(int64_t B, int64_t T, const float* features, const int32_t* labels, const float* targets,
                           const float* params, float* grads, const FusedHeadDropout& drop) const {
  const int64_t H = shape_.hidden, F = shape_.input_size;
  P p{};
  Args& a = p.a;
  a.params = params;
  a.accumulate = B == 1;
  a.out = B == 1 ? grads : partials_.get();
  a.stride = B == 1 ? 0 : stride_;
  a.features = features;
  a.labels = labels;
  a.targets = targets;
  a.B = static_cast<int32_t>(B);
  a.F = static_cast<int32_t>(F);
  a.H = static_cast<int32_t>(H);
  a.C = static_cast<int32_t>(shape_.outputs);
  a.classification = shape_.task == Task::Classification;
  a.pool = shape_.pool == Pool::Last ? 0 : (shape_.pool == Pool::Mean ? 1 : 2);
  a.lay = layout_;
  a.lay1 = reverse_;
  a.dirs = dirs_;
  a.hin = static_cast<int32_t>(shape_.head_input());
  RT_CHECK(drop.threshold == 0 || drop.indices, "fused LSTM: head dropout without the shard's indices");
  a.drop = drop;
  a.scratch = scratch_.get();
  a.per_seq = per_seq();
  a.t_cap = static_cast<int32_t>(cap_T_);
  a.HP = HP_;
  // Projection blocks of tc timesteps (a multiple of 8, <= kProjT): about 256 blocks over all sequences.
  a.tc = static_cast<int32_t>(std::clamp<int64_t>((B * T + 255) / 256 + 7, 8, kProjT) / 8 * 8);
  a.Cp = Cp_;
  a.fc_smem = fc_smem_;
  a.wstride = wstride_;
  a.grads = grads;
  a.wpart = wpart_.get();
  a.head_lo = std::min({layout_.fc_w, layout_.fc_b, layout_.extras});
  a.n_grad = n_grad_;
  a.cycles = record_ ? cycles_.get() : nullptr;
  a.progress = progress_.get();
  // Streaming needs the weight-gradient blocks launched while the recurrence runs (not in a recorded run, whose
  // kernels are separated by events).
  a.stream = streaming_ && !record_ && !wide_ && B <= kStreamMaxB;   // (the wide stages publish no progress)
  a.wide_h = wide_h_.get();
  a.wide_part = wide_part_.get();
  a.wide_flags = wide_flags_.get();
  a.words = hr_ > 0 ? 1 : cl_;
  a.packed_floats = packed_floats_;
  return p;
}

// The batch's slots into p (layer 0) and pu (the layers above, `upper`): kernel parameters up to kInline sequences,
// else a device table.
template <class P>
void FusedLstm::set_slots(const std::vector<GatherSlot>& slots, const std::vector<GatherSlot>& upper, P& p, P& pu) {
  const int64_t B = static_cast<int64_t>(slots.size());
  if (B <= kInline) {
    for (int64_t i = 0; i < B; ++i) p.slot[i] = slots[static_cast<size_t>(i)];
    for (int64_t i = 0; i < static_cast<int64_t>(upper.size()); ++i) pu.slot[i] = upper[static_cast<size_t>(i)];
  } else {
    // The table goes to the device on a stream of its own and the host waits for it here: a copy on `s` would put
    // the copy engine between the previous step's update and this projection, with no programmatic dependent launch
    // across it (on the H200 at K = 128 the GPU then idled ~11 us a step, the step launched ahead or not). Three
    // device tables in turn: run k writes table k mod 3, whose last reader, run k - 3, has completed when the caller
    // takes the totals of every step (CudaBackend: at most two runs a step, one launched ahead and discarded, and
    // the update's totals come after all of the step's kernels) or synchronizes (time_us, the tests).
    // (Stacked: the layers above's slots after layer 0's, in the same copy.)
    table_ = (table_ + 1) % kTables;
    GatherSlot* dev = slots_dev_.get() + table_ * 2 * kMaxGatherSlots;
    std::copy(slots.begin(), slots.end(), slots_host_.get());
    std::copy(upper.begin(), upper.end(), slots_host_.get() + B);
    CUDA_CHECK(cudaMemcpyAsync(dev, slots_host_.get(), (slots.size() + upper.size()) * sizeof(GatherSlot),
                               cudaMemcpyHostToDevice, copy_stream_.get()));
    CUDA_CHECK(cudaStreamSynchronize(copy_stream_.get()));   // also frees the host table for the next run
    p.a.slots = dev;
    pu.a.slots = dev + B;
  }
}

// Each layer's fields from p (layer 0) and pu (the layers above): its gate blocks, inputs, scratch, packed W_hh,
// epoch and weight-gradient tiles.
template <class P>
std::vector<P> FusedLstm::layer_params(const P& p, const P& pu, const float* features, bool drop_between, int64_t B,
                                       int64_t timesteps) {
  const int64_t L = shape_.layers, H = shape_.hidden, F = shape_.input_size, HI = shape_.head_input();
  // Each layer's fields. Every layer has its own epoch (its pack flags and progress words are tagged with it, so a
  // word another layer left in this step never reads as progress) and its own scratch and packed W_hh.
  const int64_t scratch_layer = cap_B_ * dirs_ * per_seq();
  const bool copy = copies_between(drop_between);
  std::vector<P> lp;
  for (int64_t l = 0; l < L; ++l) {
    lp.push_back(l == 0 ? p : pu);
    Args& x = lp.back().a;
    const int64_t Fl = l == 0 ? F : HI;
    const SplitTiles& tiles = sg_[l == 0 ? 0 : 1];
    x.lay = layers_[static_cast<size_t>(l * dirs_)];
    x.lay1 = dirs_ == 2 ? layers_[static_cast<size_t>(l * dirs_ + 1)] : reverse_;
    x.F = static_cast<int32_t>(Fl);
    x.fc = proj_chunk(Fl);
    x.scratch = scratch_.get() + l * scratch_layer;
    x.packed = packed_.get() + l * dirs_ * packed_floats_;
    x.pack_flags = pack_flags_.get() + l * dirs_ * kPack;
    x.epoch = ++epoch_ == 0 ? ++epoch_ : epoch_;   // skips 0 when the counter wraps
    x.progress = progress_.get() + l * cap_B_ * dirs_ * kMaxCl;
    x.features = l == 0 ? features
                 : copy ? xbuf_.get() + (l - 1) * cap_B_ * cap_T_ * HI
                        : scratch_.get() + (l - 1) * scratch_layer + 6 * cap_T_ * H;
    x.x_early = l == 0;
    x.groups = weight_grad_groups(B, timesteps, tiles);
    x.sg_wm = tiles.wm;
    x.sg_wn = tiles.wn;
    x.sum_blocks = sum_blocks_for(x.groups, Fl, H);
  }
  return lp;
}

// Overlapped (Args::fwd_words): each layer's flags, its forward words first, then its projection's chunks, then the
// input gradient's tiles that its backward polls.
template <class P>
void FusedLstm::set_chain_flags(std::vector<P>& lp) {
  const int64_t L = shape_.layers;
  const int proj_flags =
      chain_proj_flag(static_cast<int>(cap_T_), static_cast<int>(shape_.hidden), static_cast<int>(cap_B_), 0, 0);
  for (int64_t l = 0; l < L; ++l) {
    Args& x = lp[static_cast<size_t>(l)].a;
    unsigned long long* const f = flags_.get() + l * layer_flags_;
    x.fwd_words = l + 1 < L ? f : nullptr;
    x.proj_flags = f + cap_B_ * kMaxCl;
    x.dx_flags = l + 1 < L ? x.proj_flags + proj_flags : nullptr;
    if (l > 0) {
      x.below_words = flags_.get() + (l - 1) * layer_flags_;
      x.below_epoch = lp[static_cast<size_t>(l - 1)].a.epoch;
    }
  }
}

// A grouped stage: a group and direction a 16-block cluster, or (wide) a cohort of blocks, in rounds over the cohorts
// the GPU holds at once. Groups of their own sizes (plan_): a launch per tile count present, largest first, each
// running its groups on the kernel of its tiles; all but the first beside the one before (Args::plan_join).
template <class P, class Launch>
void FusedLstm::launch_groups(P& q, int64_t B, const Launch& launch, int nt_lo, int nt_hi) const {
  const bool back = q.a.stage == kStageBackward;
  const unsigned ud = static_cast<unsigned>(dirs_);
  if (!plan_.empty()) {
    bool join = false;
    for (int nt = nt_hi; nt >= nt_lo; --nt) {
      P qn = q;
      qn.a.plan_n = 0;
      for (size_t g = 0; g + 1 < plan_.size(); ++g)
        if ((plan_[g + 1] - plan_[g] + 7) / 8 == nt) {
          qn.a.plan_lo[qn.a.plan_n] = static_cast<int16_t>(plan_[g]);
          qn.a.plan_hi[qn.a.plan_n++] = static_cast<int16_t>(plan_[g + 1]);
        }
      if (qn.a.plan_n == 0) continue;
      qn.a.plan_join = join;
      launch(qn, stage_kernel(false, nt, back), dim3(static_cast<unsigned>(qn.a.plan_n) * ud * GroupMap::kCl),
             GroupMap::kThreads, group_smem_bytes_, GroupMap::kCl);
      join = true;
    }
    return;
  }
  const int n = q.a.group_n;
  const void* fn = stage_kernel(wide_, (n + 7) / 8, back);
  const int64_t units = (B + n - 1) / n * dirs_;
  if (wide_)
    launch(q, fn, dim3(static_cast<unsigned>(std::min<int64_t>(units, wide_cohorts_)) * WideMap::kBlocks),
           WideMap::kThreads, wide_smem_bytes_, 1u);
  else
    launch(q, fn, dim3(static_cast<unsigned>(units) * GroupMap::kCl), GroupMap::kThreads, group_smem_bytes_,
           GroupMap::kCl);
}

// The groups of fewer tiles than the largest end their backward stage early (at K = 128 balanced, the 2-tile groups
// at ~0.65 of the 3-tile ones' time), so their weight-gradient GEMM runs on a second stream as soon as they end, on
// the SMs the longer stage leaves, instead of after the whole stage. The long stage is launched first, so that its
// clusters are placed before the side's; both GEMMs launch without the programmatic dependency: launched early,
// their blocks would sit on free SMs (those a stage's clusters may still need) waiting for a stage to end.
template <class P, class Launch, class Gemm>
void FusedLstm::backward_beside(P& q, int64_t B, const Launch& launch, const Gemm& gemm, cudaStream_t& stream,
                                bool& pdl) {
  const cudaStream_t s = stream;
  auto cover = [](P& g, const std::vector<std::pair<int, int>>& ranges, int part0) {
    g.a.sg_nr = static_cast<int32_t>(ranges.size());
    for (size_t r = 0; r < ranges.size(); ++r) {
      g.a.sg_lo[r] = static_cast<int16_t>(ranges[r].first);
      g.a.sg_hi[r] = static_cast<int16_t>(ranges[r].second);
    }
    g.a.sg_part0 = part0;
  };
  P qm = q, qs = q;
  cover(qm, beside_.main, 0);
  cover(qs, beside_.side, beside_.main_parts);
  CUDA_CHECK(cudaEventRecord(fork_.get(), s));   // after the head kernel: the backward's seeds
  launch_groups(qm, B, launch, beside_.nt_main, beside_.nt_main);
  CUDA_CHECK(cudaStreamWaitEvent(side_stream_.get(), fork_.get(), 0));
  stream = side_stream_.get();
  launch_groups(qs, B, launch, 1, beside_.nt_main - 1);
  pdl = false;   // also for the sums after the join (the caller restores it)
  gemm(qs, beside_.side_parts);
  CUDA_CHECK(cudaEventRecord(join_.get(), side_stream_.get()));
  stream = s;
  gemm(qm, beside_.main_parts);
  CUDA_CHECK(cudaStreamWaitEvent(s, join_.get(), 0));
}

// The step's launches for the layers' fields lp (layer_params): each layer's forward in turn, then down the layers.
template <class P>
void FusedLstm::launch_layers(std::vector<P>& lp, int64_t B, int64_t T, bool drop_between,
                              const FusedHeadDropout& between, cudaStream_t s) {
  const int64_t L = shape_.layers, H = shape_.hidden;
  const Args& a = lp.front().a;
  if (record_ && !marks_[0])
    for (Event& e : marks_) e = Event::create(true);
  auto mark = [&](int i) {
    if (record_) CUDA_CHECK(cudaEventRecord(marks_[i].get(), s));
  };
  const unsigned ub = static_cast<unsigned>(B);
  // Programmatic dependent launch (launch_kernel) unless recorded: a recorded run launches plainly, so that the
  // events between the kernels measure each one. On `stream`: s, or the side stream of backward_beside, which also
  // turns `with_pdl` off for some launches.
  cudaStream_t stream = s;
  bool with_pdl = !record_;
  auto launch = [&](Params& q, const void* fn, dim3 grid, int threads, size_t smem, unsigned cluster = 1) {
    launch_kernel(fn, &q, grid, threads, smem, cluster, stream, with_pdl);
  };
  // The cluster variant's pack blocks first (the first kPack blocks of the first rows), then a row per sequence of
  // its time chunks.
  const int64_t proj_x = (T + a.tc - 1) / a.tc;
  // Grouped (Args::group_n): the recurrences run in stages, the head between them, as when the directions run apart;
  // their kernels read W_hh from the parameters (no packed copy).
  const bool grouped = a.group_n > 0, staged = apart_ || grouped;
  const int32_t pack_rows = hr_ > 0 || grouped ? 0 : static_cast<int32_t>((kPack + proj_x - 1) / proj_x);
  const unsigned ud = static_cast<unsigned>(dirs_);
  const int G = static_cast<int>(4 * H);
  auto project = [&](Params& q) {
    q.a.pack_rows = pack_rows;
    launch(q, fused_projection_kernel(),
           dim3(static_cast<unsigned>(proj_x), ub + static_cast<unsigned>(pack_rows),
                ud * static_cast<unsigned>(proj_tiles_)),
           proj_threads_, static_cast<size_t>((kProjT + proj_threads_) * (q.a.fc + 4)) * sizeof(float));
  };
  // The cluster variant: cl_ blocks a sequence and direction; one block: a cluster of the 2 directions' blocks.
  auto recur = [&](Params& q, bool ext) {
    if (grouped) {
      launch_groups(q, B, launch, 1, kGroupMaxNT);
      return;
    }
    launch(q, kernel(ext, q.a.proj_flags != nullptr), dim3(ub * ud * (hr_ > 0 ? 1u : static_cast<unsigned>(cl_))),
           rec_threads_, smem_bytes_, hr_ > 0 ? ud : static_cast<unsigned>(cl_));
  };
  // A layer's weight gradients (split GEMM: `parts` of its q.a.groups partial sums, those of q.a.sg_* slots), then
  // (K > 1) the sums over groups and (head: the top layer) over sequences.
  auto split_gemm = [&](Params& q, const SplitTiles& tiles, int parts) {
    launch(q, fused_split_grad_kernel(),
           dim3(static_cast<unsigned>(parts) * ud, static_cast<unsigned>(tiles.mtiles),
                static_cast<unsigned>(tiles.ntiles)),
           32 * tiles.wm * tiles.wn, split_smem_bytes(B, tiles));
  };
  auto sums = [&](Params& q, bool head) {
    mark(3);
    if (B > 1) {   // (then groups > 1 too) the sums over groups and over sequences
      const int head_blocks = head ? static_cast<int>(((q.a.n_grad - q.a.head_lo) * 32 + 255) / 256) : 0;
      launch(q, fused_sums_kernel(), dim3(static_cast<unsigned>(q.a.sum_blocks * dirs_ + head_blocks)), 256, 0);
    }
    mark(4);
  };
  auto weight_grads = [&](Params& q, const SplitTiles& tiles, bool head) {
    const int NW = q.a.F + static_cast<int>(H) + 1;
    if (B > kStreamMaxB)
      split_gemm(q, tiles, q.a.groups);
    else
      launch(q, fused_weight_grad_kernel(),
             dim3(static_cast<unsigned>((G + kWgM - 1) / kWgM), static_cast<unsigned>((NW + kWgN - 1) / kWgN),
                  static_cast<unsigned>(q.a.groups) * ud),
             kWgThreads, 0);
    sums(q, head);
  };
  // Stacked, each layer's forward in turn (the layer above's projection reads its h), the top layer's forward, head and
  // backward, then down the layers: the input gradient of the layer above (through the dropout mask), the backward
  // of the layer below seeded by it, its weight gradients. Directions apart, the top layer too runs its forward
  // stage, then the head kernel, then its backward stage seeded by the head's d loss / d h_t.
  const int64_t HI = shape_.head_input();
  const bool copy = copies_between(drop_between);
  // Overlapped (Args::fwd_words): the chain's flags.
  const bool ov = overlap_ && overlap_on_ && a.stream && !drop_between;
  if (ov) set_chain_flags(lp);
  mark(0);
  for (int64_t l = 0; l < L; ++l) {
    Params& q = lp[static_cast<size_t>(l)];
    const bool top = l + 1 == L;
    q.a.stage = !top || staged ? kStageForward : kStageAll;
    q.a.pooled_out = top && staged ? pooled_.get() : nullptr;
    q.a.pooled_at = top && staged ? pooled_at_.get() : nullptr;
    project(q);
    mark(1);
    recur(q, false);
    mark(2);
    if (!top && copy) {
      Params x = lp[static_cast<size_t>(l + 1)];   // its slots (lengths and positions), F = HI
      x.a.h_below = q.a.scratch;
      x.a.x_next = xbuf_.get() + l * cap_B_ * cap_T_ * HI;
      x.a.between = drop_between ? between : FusedHeadDropout{};
      x.a.between_layer = static_cast<int32_t>(l);
      launch(x, fused_layer_input_kernel(), dim3(static_cast<unsigned>((T * HI + 255) / 256), ub), 256, 0);
    }
  }
  if (staged) {
    Params& q = lp.back();
    q.a.dx = dh_ext_.get();
    q.a.dh_ext = dh_ext_.get();
    launch(q, fused_pool_head_kernel(), dim3(ub), 256, head_smem_bytes_);
    q.a.stage = kStageBackward;
    if (!gemm_beside()) recur(q, true);
  }
  if (gemm_beside()) {   // (one layer: the top layer's tiles are sg_[0])
    backward_beside(lp.back(), B, launch, [&](Params& g, int parts) { split_gemm(g, sg_[0], parts); }, stream,
                    with_pdl);
    sums(lp.back(), true);
    with_pdl = !record_;
  } else {
    weight_grads(lp.back(), sg_[L > 1 ? 1 : 0], true);
  }
  for (int64_t l = L - 2; l >= 0; --l) {
    Params g = lp[static_cast<size_t>(l + 1)];   // layer l + 1's d gates and W_ih
    float* const dh = dh_ext_.get() + (ov ? l * cap_B_ * cap_T_ * H : 0);   // (overlapped: its own slab)
    g.a.dx = dh;
    g.a.overlap = ov;
    g.a.dx_flags = lp[static_cast<size_t>(l)].a.dx_flags;
    g.a.dx_epoch = lp[static_cast<size_t>(l)].a.epoch;
    g.a.between = drop_between ? between : FusedHeadDropout{};
    g.a.between_layer = static_cast<int32_t>(l);
    launch(g, fused_input_grad_kernel(),
           dim3(static_cast<unsigned>((T + kIgT - 1) / kIgT), ub, static_cast<unsigned>((HI + kIgK - 1) / kIgK)), 256,
           0);
    Params& q = lp[static_cast<size_t>(l)];
    q.a.stage = kStageBackward;
    q.a.dh_ext = dh;
    recur(q, true);
    weight_grads(q, sg_[l == 0 ? 0 : 1], false);
  }
}

void FusedLstm::run(const std::vector<GatherSlot>& batch, const float* features, const int32_t* labels,
                    const float* targets, const float* params, float* grads, cudaStream_t s,
                    const FusedHeadDropout& drop, const FusedHeadDropout& between) {
  const int64_t B = static_cast<int64_t>(batch.size());
  // Grouped, the slots run longest first, so that each group's members take about as many steps (a group runs as
  // long as its longest). The order is the kernels' alone: every output is a sum over the slots.
  const int group_n = group_size(B);
  std::vector<GatherSlot> sorted;
  if (group_n > 0) {
    sorted = batch;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const GatherSlot& x, const GatherSlot& y) { return x.length > y.length; });
  }
  const std::vector<GatherSlot>& slots = group_n > 0 ? sorted : batch;
  RT_CHECK(B >= 1 && B <= kMaxGatherSlots, "fused LSTM: " << B << " sequences in one step");
  int64_t T = 0, timesteps = 0;
  for (const GatherSlot& g : slots) {
    RT_CHECK(g.length >= 1, "fused LSTM: a sequence of length " << g.length);
    T = std::max<int64_t>(T, g.length);
    timesteps += g.length;
  }
  if (B > cap_B_ || T > cap_T_) {
    CUDA_CHECK(cudaStreamSynchronize(s));   // the buffers may still be in use by a queued launch
    reserve(B, T);
  }
  Params p = common_params<Params>(B, T, features, labels, targets, params, grads, drop);
  p.a.group_n = group_n;
  // Groups of their own sizes where the step fits the clusters at once (group_plan.hpp): the longest members in
  // groups of fewer tiles, each tile count on its own kernel (launch_layers); and then, one layer and direction, the
  // GEMM over the groups of fewer tiles beside the others' backward stage (backward_beside).
  plan_.clear();
  beside_ = BesideSplit{};
  if (group_n > 0 && !wide_ && planning_on_) {
    std::vector<int> lengths;
    for (const GatherSlot& g : slots) lengths.push_back(static_cast<int>(g.length));
    plan_ = plan_groups(lengths, std::min(kMaxPlannedGroups, group_clusters_ / dirs_), kGroupMaxN);
    if (!plan_.empty() && beside_on_ && !record_ && shape_.layers == 1 && dirs_ == 1)
      beside_ = split_beside(plan_, weight_grad_groups(B, timesteps, sg_[0]), sms_, GroupMap::kCl,
                             sg_[0].mtiles * sg_[0].ntiles);
  }
  const int64_t L = shape_.layers, H = shape_.hidden;
  RT_CHECK(!record_ || (L == 1 && !apart_ && !wide_),
           "fused LSTM: a recorded run times one layer of one kernel chain (H <= 256)");
  RT_CHECK(between.threshold == 0 || between.indices, "fused LSTM: dropout between layers without the shard's indices");
  // A layer above reads the layer below's h as its features: in place (h_t of slot b is row b per_seq / H + t from
  // the h block of that layer's scratch), or, with dropout between layers or two directions, copied (masked) into
  // xbuf_ (row b cap_T + t).
  const bool drop_between = L > 1 && between.threshold != 0;
  const int64_t up_rows = copies_between(drop_between) ? cap_T_ : per_seq() / H;
  std::vector<GatherSlot> upper;
  if (L > 1)
    for (int64_t i = 0; i < B; ++i) {
      GatherSlot u = slots[static_cast<size_t>(i)];
      u.row = i * up_rows;
      upper.push_back(u);
    }
  Params pu = p;   // the layers above: their slots
  set_slots(slots, upper, p, pu);
  std::vector<Params> lp = layer_params(p, pu, features, drop_between, B, timesteps);
  if (gemm_beside()) {   // the two GEMMs' parts, summed as one set (backward_beside)
    Args& x = lp.back().a;
    x.groups = beside_.main_parts + beside_.side_parts;
    x.sum_blocks = sum_blocks_for(x.groups, x.F, H);
  }
  launch_layers(lp, B, T, drop_between, between, s);
}

FusedCycles FusedLstm::last_cycles(cudaStream_t s) {
  CUDA_CHECK(cudaStreamSynchronize(s));
  long long c[8] = {};
  CUDA_CHECK(cudaMemcpy(c, cycles_.get(), sizeof(c), cudaMemcpyDeviceToHost));
  FusedCycles r;
  r.stage = c[1] - c[0];
  r.forward = c[2] - c[1];
  r.head = c[3] - c[2];
  r.backward = c[4] - c[3];
  r.total = c[4] - c[0];
  if (marks_[0]) {
    float ms[4] = {};
    for (int i = 0; i < 4; ++i) CUDA_CHECK(cudaEventElapsedTime(&ms[i], marks_[i].get(), marks_[i + 1].get()));
    r.projection_us = 1e3 * ms[0];
    r.recurrence_us = 1e3 * ms[1];
    r.weight_grads_us = 1e3 * ms[2];
    r.sums_us = 1e3 * ms[3];
  }
  return r;
}

double FusedLstm::time_us(int64_t B, int64_t T, cudaStream_t s) {
  const int64_t F = shape_.input_size, C = shape_.outputs;
  DeviceBuffer<float> feats(static_cast<size_t>(B * T * F)), params(static_cast<size_t>(n_grad_)),
      grads(static_cast<size_t>(n_grad_)), targets(static_cast<size_t>(B * C));
  DeviceBuffer<int32_t> labels(static_cast<size_t>(B));
  launch_fill_uniform(feats.get(), B * T * F, 11, -1.0f, 1.0f, s);
  launch_fill_uniform(params.get(), n_grad_, 12, -0.1f, 0.1f, s);
  launch_fill_uniform(targets.get(), B * C, 13, -1.0f, 1.0f, s);
  launch_fill_int(labels.get(), B, 0, s);
  CUDA_CHECK(cudaMemsetAsync(grads.get(), 0, static_cast<size_t>(n_grad_) * sizeof(float), s));
  std::vector<GatherSlot> slots;
  for (int64_t b = 0; b < B; ++b)
    slots.push_back(GatherSlot{b * T, static_cast<int32_t>(T), static_cast<int32_t>(b)});
  Event e0 = Event::create(true), e1 = Event::create(true);
  std::vector<float> us;
  for (int i = 0; i < 23; ++i) {
    CUDA_CHECK(cudaEventRecord(e0.get(), s));
    run(slots, feats.get(), labels.get(), targets.get(), params.get(), grads.get(), s);
    CUDA_CHECK(cudaEventRecord(e1.get(), s));
    CUDA_CHECK(cudaEventSynchronize(e1.get()));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0.get(), e1.get()));
    if (i >= 3) us.push_back(1e3f * ms);   // the first runs include module load and buffer growth
  }
  std::sort(us.begin(), us.end());
  return static_cast<double>(us[us.size() / 2]);
}

bool FusedLstm::copies_between(bool drop_between) const { return shape_.layers > 1 && (drop_between || dirs_ == 2); }

std::string FusedLstm::describe() const {
  const std::string overlap = overlap_ && overlap_on_ ? "overlapped" : "in turn";
  const std::string layers = RT_MSG((shape_.layers > 1 ? RT_MSG(shape_.layers << " layers " << overlap << ", ") : "")
                                    << (apart_ ? "bidirectional, the directions apart, " : ""));
  if (wide_)
    return RT_MSG("fused kernel (" << layers << "groups of up to " << kGroupMaxN << " sequences in lock step on "
                                   << WideMap::kBlocks << " blocks each, " << wide_cohorts_
                                   << " at once, recurrent weights in registers on the tensor cores, exchanged "
                                      "through L2)");
  if (hr_ == 0)
    return RT_MSG("fused kernel (" << layers << "recurrent weights in the registers of a " << cl_
                                   << "-block cluster per sequence"
                                   << ", " << rec_threads_ << " threads a block"
                                   << (grouped_ok_ && grouping_on_
                                           ? RT_MSG("; above " << kStreamMaxB << " sequences a step, groups of up to "
                                                               << kGroupMaxN << " in lock step a cluster, "
                                                               << group_clusters_
                                                               << " clusters at once, on the tensor cores")
                                           : "")
                                   << ")");
  return RT_MSG("fused kernel (" << layers
                                  << (dirs_ == 2 && !apart_ ? "bidirectional, a 2-block cluster per sequence, " : "")
                                  << "recurrent weights in registers, " << rec_threads_ << " threads, "
                                  << (smem_bytes_ + 1023) / 1024 << " KiB shared)");
}

}  // namespace ragtrain
