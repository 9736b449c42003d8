// Counter-based random numbers: the same (seed, stream, index) gives the same value on every rank and run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "ragtrain/core/host_device.hpp"

namespace ragtrain {

__extension__ using uint128 = unsigned __int128;   // for the multiply-shift range reduction

// SplitMix64 finaliser: a bijective mix of 64 bits, good enough to drive shuffles and initialisation. Also callable
// from CUDA kernels (dropout masks, model/dropout_mask.hpp), so both backends draw the same numbers.
RAGTRAIN_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A small sequential generator seeded from a hash of (seed, stream): std:: distributions are
// implementation-defined, so ragtrain draws its own numbers to keep runs identical across compilers.
class Rng {
 public:
  explicit Rng(uint64_t seed, uint64_t stream = 0) : state_(mix64(seed ^ mix64(stream + 0x5851F42D4C957F2Dull))) {}

  uint64_t next_u64() { return mix64(state_++); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n), n > 0, without modulo bias worth caring about for n << 2^64.
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<uint128>(next_u64()) * n) >> 64); }
  // Standard normal (Box-Muller; one value per call keeps the stream position simple).
  double normal();

 private:
  uint64_t state_;
};

// Fisher-Yates shuffle driven by Rng.
template <class Vec>
void shuffle(Vec& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    size_t j = static_cast<size_t>(rng.below(i));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace ragtrain
