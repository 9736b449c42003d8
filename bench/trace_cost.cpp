// The cost of one traced phase (doc/performance.md, "Timeline"): a PhaseScope around nothing, a million times,
// with the Timeline recording (--trace) and not; best of 7 trials each, in ns per phase. In CUDA builds both
// include the NVTX push/pop (no tool attached). Build and run (after `make`; as measured for doc/performance.md):
//   g++ -std=c++17 -O2 -Iinclude -I/usr/lib/x86_64-linux-gnu/openmpi/include -I/usr/local/cuda/include \
//       -DRAGTRAIN_WITH_CUDA=1 -DOMPI_SKIP_MPICXX=1 bench/trace_cost.cpp build/lib/libragtrain.a \
//       -L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi -ldl -o /tmp/trace_cost && /tmp/trace_cost
// (a CPU-only build: without -DRAGTRAIN_WITH_CUDA=1 and the CUDA include).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "ragtrain/metrics/trace.hpp"

using namespace ragtrain;

namespace {
double ns_per_phase(bool record, int n) {
  double best = 1e30;
  for (int trial = 0; trial < 7; ++trial) {
    Timeline t(record, static_cast<size_t>(n));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      PhaseScope s(&t, Phase::Compute, i);
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, ns / n);
  }
  return best;
}
}  // namespace

int main() {
  const int n = 1000000;
  const double off = ns_per_phase(false, n), on = ns_per_phase(true, n);
  std::printf("phase scope, not recording: %.1f ns\nphase scope, recording:     %.1f ns\n", off, on);
  return 0;
}
