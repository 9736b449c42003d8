// Which registers and shared-memory columns a lane of the one-block fused LSTM recurrence (fused_lstm.cu, H <= 64)
// uses: pure index maps, host and device, so the unit tests check on the host that every weight is held exactly once
// and every load is aligned (a map that drops or repeats a column would still compile, and only some H would show it).
#pragma once

#include <algorithm>

#ifndef RAGTRAIN_HD
#ifdef __CUDACC__
#define RAGTRAIN_HD __host__ __device__ __forceinline__
#else
#define RAGTRAIN_HD inline
#endif
#endif

namespace ragtrain {

// The padded width of the one-block kernel's matvecs for H <= 64 (every FMA beyond H is wasted on the recurrence's
// critical path; the unrolled loops need whole float4s), 0 above (the cluster variant).
RAGTRAIN_HD int one_block_width(int H) {
  return H <= 32 ? 32 : (H <= 48 ? 48 : (H <= 52 ? 52 : (H <= 56 ? 56 : (H <= 64 ? 64 : 0))));
}

// The pitch of h and of each gate's d gates in shared memory: >= the padded width and >= H rounded to 8 (the matvecs
// read up to the width; zeros past H), and 8 (mod 32), so the backward's quarter warp reads 8 float4s — 4 gates' rows
// (HP apart) x 2 halves (16 bytes apart) — on distinct banks.
RAGTRAIN_HD int one_block_pitch(int H, int width) {
  int hp = std::max((H + 7) / 8 * 8, width);
  return hp + ((8 - hp % 32) + 32) % 32;
}

// Forward: lane q of unit j's quad holds all four gates' rows at its slice of the HR columns — float4 blocks q, q + 4,
// ... (kF4 of them) and then its share of the tail (HR = 4 (mod 16): float q of the last 4; 8 (mod 16): float2 q of
// the last 8) — kS = HR / 4 columns a gate.
template <int HR>
struct FwdSlice {
  static constexpr int kF4 = HR / 16, kTail = (HR % 16) / 4, kS = HR / 4;   // float4 rounds, tail floats, a gate
  // The column of element s of lane q's slice.
  RAGTRAIN_HD static int col(int q, int s) {
    return s < 4 * kF4 ? 16 * (s / 4) + 4 * q + s % 4 : 16 * kF4 + kTail * q + (s - 4 * kF4);
  }
};

// Backward: lane (j, q) takes gate q's d gates at the rows of its half h = j & 1, float4 blocks 2 b + h for b < kNB
// (the last block of a half may lie past HR: zero weights, zeros in shared memory below the pitch).
template <int HR>
struct BwdHalf {
  static constexpr int kNB = (HR + 7) / 8;   // float4 blocks a half
  RAGTRAIN_HD static int row(int h, int s) { return 4 * (2 * (s / 4) + h) + s % 4; }
};

}  // namespace ragtrain
