// The dropout mask as a pure function of (seed, global step, global sequence index, layer, timestep, unit): the same
// bits on every rank count, in every run, and on both backends (host C++ and CUDA kernels include this header).
#pragma once

#include <cstdint>

#include "ragtrain/core/host_device.hpp"
#include "ragtrain/core/rng.hpp"

namespace ragtrain {

// The `layer` key of the head's dropout (the LSTM layers use 0 .. L-2).
inline constexpr int64_t kHeadDropoutLayer = -1;

// A unit is dropped when its 24-bit draw is below this threshold: P(drop) = floor(p * 2^24) / 2^24. Computed once on
// the host and handed to kernels as an integer, so no float comparison can differ between CPU and GPU.
inline uint32_t dropout_threshold(double p) { return p <= 0 ? 0u : static_cast<uint32_t>(p * 16777216.0); }

// Inverted dropout as in PyTorch: kept units are scaled by 1/(1-p) so the expectation is unchanged.
inline double dropout_scale(double p) { return 1.0 / (1.0 - p); }

// Which sequence of which step draws the mask.
struct DropoutKey {
  uint64_t seed = 0;
  int64_t step = 0;       // global step (0-based) of the training run
  int64_t sequence = 0;   // global index of the sequence in the training set
};

// True when the unit survives. Every key goes through its own round of mix64, so neighbouring counters are
// uncorrelated; the constant separates these draws from ragtrain's other counter-based streams.
RAGTRAIN_HOST_DEVICE inline bool dropout_keep(const DropoutKey& k, int64_t layer, int64_t t, int64_t unit,
                                              uint32_t threshold) {
  uint64_t h = mix64(k.seed ^ 0x64726F706F75745Full);
  h = mix64(h ^ static_cast<uint64_t>(k.step));
  h = mix64(h ^ static_cast<uint64_t>(k.sequence));
  h = mix64(h ^ static_cast<uint64_t>(layer));
  h = mix64(h ^ static_cast<uint64_t>(t));
  h = mix64(h ^ static_cast<uint64_t>(unit));
  return static_cast<uint32_t>(h >> 40) >= threshold;
}

}  // namespace ragtrain
