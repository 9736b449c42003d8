// Which registers and shared-memory columns a lane of the one-block fused LSTM recurrence (fused_recurrence.cu,
// H <= 64) uses: pure index maps, host and device, so the unit tests check on the host that every weight is held
// exactly once and every load is aligned (a map that drops or repeats a column would still compile, and only some H
// would show it).
#pragma once

#include "host_device.hpp"

namespace ragtrain {

// The padded width of the one-block kernel's matvecs for H <= 64 (every FMA beyond H is wasted on the recurrence's
// critical path; the unrolled loops need whole float4s), 0 above (the cluster variant).
RAGTRAIN_HD int one_block_width(int H) {
  return H <= 32 ? 32 : (H <= 48 ? 48 : (H <= 52 ? 52 : (H <= 56 ? 56 : (H <= 64 ? 64 : 0))));
}

// The pitch of h and of each gate's d gates in shared memory: >= the padded width and >= H rounded to 8 (the matvecs
// read up to the width; zeros past H), and 8 (mod 32), so the backward's quarter warp reads 8 float4s — 4 gates' rows
// (HP apart) x the slices of 2 units (16 bytes apart) — on distinct banks.
RAGTRAIN_HD int one_block_pitch(int H, int width) {
  int hp = (H + 7) / 8 * 8;
  if (hp < width) hp = width;   // (std::max is not a device function)
  return hp + ((8 - hp % 32) + 32) % 32;
}

// A lane's slice of the HR columns (forward: lane q of unit j's quad, for its four gates' rows) or rows (backward:
// lane (j & 3, q) of a group of four units' quads, for gate q and the group's four columns): float4 blocks k, k + 4,
// ... (kF4 of them) and then its share of the tail (HR = 4 (mod 16): float k of the last 4; 8 (mod 16): float2 k of
// the last 8) — kS = HR / 4 elements.
template <int HR>
struct LaneSlice {
  static constexpr int kF4 = HR / 16, kTail = (HR % 16) / 4, kS = HR / 4;   // float4 rounds, tail floats, a slice
  // The column (row) of element s of slice k.
  RAGTRAIN_HD static int col(int k, int s) {
    return s < 4 * kF4 ? 16 * (s / 4) + 4 * k + s % 4 : 16 * kF4 + kTail * k + (s - 4 * kF4);
  }
};

}  // namespace ragtrain

namespace ragtrain {

// The cluster variant (fused_cluster.cu, 64 < H <= 256): a sequence on CL blocks, one per SM; block `rank` owns the
// units j = CL jl + rank (jl < kUnits), each unit 16 lanes (q, p): gate q, part p. Part p of a vector is the units
// j = p (mod 4) — those of blocks p, p + 4, ... — kept contiguous in shared memory (kPart floats apart, so the four
// parts' float4 reads fall on distinct banks), block r's units of part p at (r / 4) kUnits + jl: the two units of a
// warp (jl, jl + 1) are neighbours and go out as one 8-byte store. Lane (q, p) holds
//   forward:  W_hh[q H + j][fwd_col(p, k)], k < kCols   (gate q's row of unit j, the columns of part p, in h_s order)
//   backward: W_hh[(k mod 4) H + bwd_row(q, p, k)][j]  (column j; rows 4 q + p + 16 (k / 4), the four gates of each)
// and sends the unit's h (forward) and d gates (backward) to block sender(q, p) of the cluster, where that is below
// CL (4 blocks: the lanes of gate 0; 16: all 16 lanes).
template <int CL, int HMAX>
struct ClusterMap {
  static constexpr int kCl = CL, kHmax = HMAX;
  static constexpr int kUnits = HMAX / CL;      // units per block
  static constexpr int kThreads = 16 * kUnits;
  static constexpr int kCols = HMAX / 4;        // forward columns (backward: rows x gates) per lane
  static constexpr int kPart = kCols + 4;       // 4 (mod 32) past a multiple of 32: kPart * 4 bytes = 16 (mod 128)
  static constexpr int kVec = 4 * kPart;        // one vector of HMAX (h), parts by part
  static_assert(CL % 4 == 0 && HMAX % (2 * CL) == 0 && kCols % 32 == 0, "a cluster shape the kernel cannot run");
  RAGTRAIN_HD static int unit(int rank, int tid) { return CL * (tid >> 4) + rank; }
  RAGTRAIN_HD static int fwd_col(int p, int k) { return CL * (k % kUnits) + 4 * (k / kUnits) + p; }
  RAGTRAIN_HD static int h_slot(int j) { return kPart * (j & 3) + ((j % CL) >> 2) * kUnits + j / CL; }
  RAGTRAIN_HD static int bwd_row(int q, int p, int k) { return 4 * q + p + 16 * (k >> 2); }
  RAGTRAIN_HD static int sender(int q, int p) { return 4 * q + p; }   // a block of the cluster where < CL
};

using ClusterMap4 = ClusterMap<4, 128>;     // 64 < H <= 128
using ClusterMap16 = ClusterMap<16, 256>;   // 128 < H <= 256: a non-portable cluster size (Hopper: up to 16)

// The grouped variant (fused_group.cu, 128 < H <= 256, more than 16 sequences a step): a group of up to 16 sequences
// in lock step on a cluster of 16 blocks, each block owning the 16 units j = 16 rank + u (its 64 gate rows 4 u + q,
// unit-major as in the scratch) and holding its share of W_hh in registers as tf32 fragments of the tensor cores'
// m16n8k8 (tf32_split.hpp: lane (g, t) = (lane / 4, lane % 4) holds A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4]
// of a 16 x 8 tile, element i of a tile being row g + 8 (i & 1), column t + 4 (i >> 1)).
//   forward:  warp w: the 16 gate rows 16 (w & 3) .. of the block (local row r = 4 u + q: W_hh[q H + j]) times the
//             columns k of half w / 4 (kFwdTiles tiles of 8): A = W_hh rows; B = h of the group, by sequence.
//   backward: warp w: W_hh^T for the units of blocks 2 w and 2 w + 1 (m = destination unit) over the block's own 64
//             gate rows (k): each block sums W_hh^T d gates over its rows for every unit, and sends each block the
//             partial sums of that block's units (a reduce-scatter over the cluster), so the d gates never leave it.
// Host and device, so the unit tests check that every weight of the block's rows is held exactly once per pass.
struct GroupMap {
  static constexpr int kCl = 16, kUnits = 16, kHmax = kCl * kUnits, kThreads = 256, kRows = 4 * kUnits;
  static constexpr int kFwdTiles = kHmax / 2 / 8;   // k tiles of a forward warp (its half of the columns)
  static constexpr int kBwdTiles = kRows / 8;       // k tiles of a backward warp (the block's gate rows)
  // Forward: element i of k tile kt of warp w, lane: the block's gate row and the column.
  RAGTRAIN_HD static int fwd_row(int w, int lane, int i) { return 16 * (w & 3) + (lane >> 2) + 8 * (i & 1); }
  RAGTRAIN_HD static int fwd_col(int w, int lane, int kt, int i) {
    return (kHmax / 2) * (w >> 2) + 8 * kt + (lane & 3) + 4 * (i >> 1);
  }
  // Backward: element i of tile (mm, kt) of warp w: the column (the unit of block 2 w + mm) and the block's gate row.
  RAGTRAIN_HD static int bwd_col(int w, int lane, int mm, int i) {
    return kUnits * (2 * w + mm) + (lane >> 2) + 8 * (i & 1);
  }
  RAGTRAIN_HD static int bwd_row(int lane, int kt, int i) { return 8 * kt + (lane & 3) + 4 * (i >> 1); }
  // The forward's h: lane u of a sequence's 16 lanes sends units 4 (u % 4) .. + 3 of its block to blocks
  // u / 4 + 4 i, i < 4 (each block gets all four float4s of every block).
  RAGTRAIN_HD static int h_chunk(int u) { return u & 3; }
  RAGTRAIN_HD static int h_dest(int u, int i) { return (u >> 2) + 4 * i; }
};

// The wide variant (fused_wide.cu, 256 < H <= 512): a group of sequences in lock step (and direction) on kBlocks
// blocks anywhere on the GPU, each block owning the 8 units j = 8 rank + u (its 32 gate rows 4 u + q, unit-major) with
// its share of W_hh in registers as GroupMap's fragments; h (forward) and the partial sums (backward) go through global
// memory, not a cluster's shared memory: in the split form W_hh takes 8 MB at H = 512, twice the registers of the 16
// SMs a cluster can span.
//   forward:  warp w: the 16 gate rows 16 (w & 1) .. of the block times the columns of quarter w / 2 (kFwdTiles tiles
//             of 8);
//   backward: warp w: W_hh^T for the units 64 w .. 64 w + 63 (kBwdM m tiles: the units of blocks 8 w .. 8 w + 7) over
//             the block's 32 gate rows (kBwdTiles k tiles): the partial sums of d h_{t-1} over the block's rows, which
//             each owner sums over the kBlocks blocks in block order (a reduce-scatter).
struct WideMap {
  static constexpr int kBlocks = 64, kUnits = 8, kHmax = kBlocks * kUnits, kThreads = 256, kRows = 4 * kUnits;
  static constexpr int kFwdTiles = kHmax / 4 / 8;   // k tiles of a forward warp (its quarter of the columns)
  static constexpr int kBwdM = kHmax / 8 / 16;      // m tiles of a backward warp
  static constexpr int kBwdTiles = kRows / 8;       // k tiles of a backward warp (the block's gate rows)
  RAGTRAIN_HD static int fwd_row(int w, int lane, int i) { return 16 * (w & 1) + (lane >> 2) + 8 * (i & 1); }
  RAGTRAIN_HD static int fwd_col(int w, int lane, int kt, int i) {
    return (kHmax / 4) * (w >> 1) + 8 * kt + (lane & 3) + 4 * (i >> 1);
  }
  RAGTRAIN_HD static int bwd_col(int w, int lane, int mm, int i) {
    return 16 * (kBwdM * w + mm) + (lane >> 2) + 8 * (i & 1);
  }
  RAGTRAIN_HD static int bwd_row(int lane, int kt, int i) { return 8 * kt + (lane & 3) + 4 * (i >> 1); }
};

}  // namespace ragtrain
