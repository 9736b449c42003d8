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
