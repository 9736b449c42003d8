// How the streaming weight-gradient GEMM (fused_weight_grad.cu, K <= 16) cuts a sequence's timesteps into chunks,
// and which chunk boundary the backward recurrence publishes: pure index arithmetic, host and device, so the unit
// tests check on the host that the chunks cover every timestep exactly once and that no boundary is published before
// its steps are stored (a wrong bound would double-count or skip timesteps, and only some lengths would show it on
// the GPU).
#pragma once

#include "host_device.hpp"

namespace ragtrain {

// The chunks: [0, kWgLast), then kWgL steps each from kWgLast up; the GEMM sums them from the last down, as the
// backward stores them. The chunk left after the backward's last step is the short first one (the others are summed
// while the backward runs), so the step waits for 8 timesteps' products there instead of 32.
constexpr int kWgL = 32, kWgLast = 8;

// The start of the chunk holding step t (>= 0).
RAGTRAIN_HD int wg_chunk_floor(int t) { return t < kWgLast ? 0 : kWgLast + (t - kWgLast) / kWgL * kWgL; }
// The smallest chunk start >= x: the progress the backward publishes once every step from x on is stored.
RAGTRAIN_HD int wg_chunk_ceil(int x) {
  return x <= 0 ? 0 : (x <= kWgLast ? kWgLast : kWgLast + (x - kWgLast + kWgL - 1) / kWgL * kWgL);
}
// The end of the chunk starting at t0 in a sequence of len steps, and the start of the chunk below it (t0 > 0).
// (weight_grad_kernel writes the end as min(len, ...) inline: called through this function the kernel compiled to
// other code than the one measured on the H200.)
RAGTRAIN_HD int wg_chunk_end(int t0, int len) {
  const int e = t0 == 0 ? kWgLast : t0 + kWgL;
  return len < e ? len : e;
}
RAGTRAIN_HD int wg_chunk_below(int t0) { return t0 == kWgLast ? 0 : t0 - kWgL; }

}  // namespace ragtrain
