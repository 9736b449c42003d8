// What each mbarrier phase of the multi-sequence cluster kernel (fused_cluster_multi.cu) expects: pure arithmetic,
// host and device, so a unit test plays the kernel's schedule of sends, waits and re-arms on the host for ragged
// lengths (a phase that expects more bytes than arrive hangs the GPU; fewer lets a block read a vector half sent).
// A cluster runs S sequences (len[s]; 0: none) in lock step to the longest, T = max len.
//   forward step t (0 <= t < T): waits (t > 0) on h buffer t % 2 for h_{t-1}, re-arms it for h_{t+1}; sequence s
//     takes part while t < len[s] and sends h_t into buffer (t + 1) % 2 while t + 1 < len[s].
//   backward step k (t = T - 1 - k): waits (k > 0) on d-gate buffer k % 2 for step t + 1's d gates, re-arms it for
//     step t - 1's; sequence s takes part while t < len[s] and sends its d gates into buffer (k + 1) % 2 while t > 0.
#pragma once

#include <cstdint>

#include "host_device.hpp"

namespace ragtrain {

// How many of the S sequences are longer than u.
RAGTRAIN_HD int multi_longer_than(const int* len, int S, int u) {
  int n = 0;
  for (int s = 0; s < S; ++s) n += len[s] > u ? 1 : 0;
  return n;
}
// The bytes a block's h buffer receives in the phase that holds h_u: h_bytes from each sequence that sends h_u.
RAGTRAIN_HD uint32_t multi_h_expect(const int* len, int S, uint32_t h_bytes, int u) {
  return u >= 0 ? h_bytes * static_cast<uint32_t>(multi_longer_than(len, S, u + 1)) : 0u;
}
// The bytes a block's d-gate buffer receives in the phase that holds step u's d gates: 16 bytes a unit (H units)
// from each sequence that sends them (never at u = 0: nothing is upstream of the first step).
RAGTRAIN_HD uint32_t multi_dg_expect(const int* len, int S, int H, int u) {
  return u >= 1 ? 16u * static_cast<uint32_t>(H) * static_cast<uint32_t>(multi_longer_than(len, S, u)) : 0u;
}

// Whether the phase expecting `bytes` is armed at all: never for 0. A phase armed for no bytes completes at once, so
// the barrier runs two phases past a warp of the block that has not yet seen the phase before it complete (the lead
// thread re-arms right after its own wait); that warp then waits on the parity of the wrong phase, forever. Only
// phases nobody waits for expect 0 (the expectations fall to 0 after the last phase waited on, and stay there), so
// leaving them unarmed shifts no phase that is waited on.
RAGTRAIN_HD bool multi_arm_phase(uint32_t bytes) { return bytes != 0; }

}  // namespace ragtrain
