// The gather that feeds a batch of K sequences to a fixed-address (CUDA-graph) step: it copies the sequences from
// the shard into the time-major padded input, zeroes the padding and dy, and fills the per-slot lengths, labels and
// targets. The slot table travels in the kernel's parameters, so a captured graph is repointed at the next batch
// by updating one kernel node (no copy, no extra launch).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace ragtrain {

// One sequence of the batch.
struct GatherSlot {
  int64_t row = 0;      // its first timestep in the shard's feature rows
  int32_t length = 0;   // its number of timesteps (>= 1)
  int32_t pos = 0;      // its shard position (label / target index)
};
inline bool operator==(const GatherSlot& a, const GatherSlot& b) {
  return a.row == b.row && a.length == b.length && a.pos == b.pos;
}

// The fixed-address destinations and the batch shape (identical for every batch one graph replays).
struct GatherArgs {
  float* x = nullptr;                 // (T, B, F) out: x[t*B + b] = step t of slot b, zero for t >= its length
  const float* features = nullptr;    // (timesteps, F) the shard
  float* dy = nullptr;                // (T, B, H) out: zeroed (the head then writes where it pooled); H = D * hidden
  int32_t* cudnn_lengths = nullptr;   // (B) out: T (padded layout) or the true lengths (ragged layout)
  int32_t* lengths = nullptr;         // (B) out: the true lengths (where each head reads)
  int32_t* label = nullptr;           // (B) out: labels[pos], classification
  const int32_t* labels = nullptr;    // (n) the shard's labels
  float* target = nullptr;            // (B, C) out: targets[pos], regression
  const float* targets = nullptr;     // (n, C) the shard's targets
  int64_t* seq = nullptr;             // (B) out: indices[pos], the global sequence indices (dropout keys); optional
  const int64_t* indices = nullptr;   // (n) the shard's global sequence indices
  int64_t* step_out = nullptr;        // (1) out: `step` (dropout key); optional
  int64_t step = 0;                   // the global step of this batch
  int32_t B = 0, T = 0, F = 0, H = 0, C = 0;
  bool ragged = false;
};

// Largest batch one gather launch takes (its slot table is a kernel parameter).
inline constexpr int64_t kMaxGatherSlots = 1024;

// Enqueues the gather of `slots` (size a.B, lengths <= a.T) on `s`.
void launch_gather_batch(const GatherArgs& a, const std::vector<GatherSlot>& slots, cudaStream_t s);

// The gather inside a captured CUDA graph: finds its kernel node (null when the graph has none), and points it at
// another batch of the same shape before the next launch (cudaGraphExecKernelNodeSetParams affects later launches
// only, so launches already queued keep theirs).
cudaGraphNode_t find_gather_node(cudaGraph_t graph);
void update_gather_node(cudaGraphExec_t exec, cudaGraphNode_t node, const GatherArgs& a,
                        const std::vector<GatherSlot>& slots);

}  // namespace ragtrain
