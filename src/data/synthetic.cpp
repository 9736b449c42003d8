// make_synthetic: learnable ragged sequences for `ragtrain gen`, deterministic for a seed.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/rng.hpp"
#include "ragtrain/data/parallel_blocks.hpp"
#include "ragtrain/data/synthetic.hpp"

namespace ragtrain {

namespace {

constexpr double kTwoPi = 6.283185307179586;
constexpr double kNoise = 0.5;          // std of the gaussian noise on every value; the wave has amplitude 1
constexpr double kClassShift = 0.25;    // size of the per-class mean shift of each feature
constexpr uint64_t kPatternSeed = 0x5EEDCAFE;
constexpr double kMinPeriod = 5.0, kMaxPeriod = 25.0;   // timesteps per cycle of the wave

// Separate streams, so that e.g. the length of sequence i does not depend on how many sequences came before.
enum Stream : uint64_t { kPatterns = 1, kLabels = 2, kSequences = 1000 };

void check_spec(const SyntheticSpec& s) {
  const char* hint = "fix the options of `ragtrain gen`";
  USER_CHECK(s.sequences >= 1, "synthetic data: sequences is " << s.sequences << "; expected >= 1", hint);
  USER_CHECK(s.features >= 1, "synthetic data: features is " << s.features << "; expected >= 1", hint);
  USER_CHECK(s.min_length >= 1 && s.max_length >= s.min_length,
             "synthetic data: lengths " << s.min_length << ".." << s.max_length << "; expected 1 <= min <= max", hint);
  if (s.task == Task::Classification)
    USER_CHECK(s.classes >= 2 && s.classes <= INT32_MAX,
               "synthetic data: classes is " << s.classes << "; expected >= 2", hint);
  else
    USER_CHECK(s.outputs >= 1 && s.outputs <= s.features,
               "synthetic data: outputs is " << s.outputs << "; expected 1..features (" << s.features << ")",
               "each regression target is carried by its own group of features, so outputs <= features");
}

}  // namespace

// Every value is a noisy wave, x[t, f] = sin(2*pi*(t + t0)/period + phase[f]) + shift[f] + noise, with a random
// start t0 per sequence and a phase pattern shared by all classes.
//  - classification: each class has its own period and a small mean shift per feature. The wave alone says
//    nothing at a single timestep (every class passes through the same values), and the shift is small against
//    the noise, so the class has to be read from the dynamics or from an average over many timesteps.
//  - regression: each sequence draws K levels z_k in [-1, 1] and a period; feature f carries z_(f mod K);
//    the targets are z, which a model recovers by averaging its features over time.
RaggedData make_synthetic(const SyntheticSpec& spec, int threads) {
  check_spec(spec);
  const bool classification = spec.task == Task::Classification;
  const int64_t F = spec.features, n = spec.sequences;
  const int64_t C = classification ? spec.classes : 0, K = classification ? spec.classes : spec.outputs;

  // The task (class periods, shifts, phases) is fixed for a shape; the seed only draws the samples, so that
  // `gen --seed 1` and `gen --seed 2` are training and validation sets of the same problem.
  Rng patterns(kPatternSeed ^ mix64(static_cast<uint64_t>(F) * 1000003u + static_cast<uint64_t>(K)), kPatterns);
  std::vector<double> phase(static_cast<size_t>(F));                   // (F)
  for (double& p : phase) p = patterns.uniform(0.0, kTwoPi);
  std::vector<double> class_period(static_cast<size_t>(C));             // (C) log-spaced, shuffled over classes
  for (int64_t c = 0; c < C; ++c)
    class_period[static_cast<size_t>(c)] =
        kMinPeriod * std::pow(kMaxPeriod / kMinPeriod, C > 1 ? static_cast<double>(c) / static_cast<double>(C - 1) : 0.0);
  shuffle(class_period, patterns);
  std::vector<double> class_shift(static_cast<size_t>(C * F));          // (C, F) +-kClassShift
  for (double& s : class_shift) s = patterns.below(2) ? kClassShift : -kClassShift;

  RaggedData d;
  d.task = spec.task;
  d.num_features = F;
  d.num_outputs = K;
  d.source = RT_MSG("ragtrain gen: synthetic " << task_name(spec.task) << ", seed " << spec.seed << ", "
                                               << n << " sequences, " << F << " features, lengths " << spec.min_length
                                               << ".." << spec.max_length << ", "
                                               << (classification ? "classes " : "outputs ") << K);
  if (classification) {
    // Balanced classes in a seeded order: every class is present even in small sets.
    d.labels.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) d.labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % C);
    Rng label_rng(spec.seed, kLabels);
    shuffle(d.labels, label_rng);
  } else {
    d.targets.resize(static_cast<size_t>(n * K));
  }

  // Each sequence draws from a stream of its own (seed, kSequences + i): its length first, so the offsets come from
  // one cheap pass, then the sequences fill their rows in blocks on `threads` threads, the same bits whatever the
  // thread count (600,000 sequences of F = 36 are 2 G draws of sin and a normal).
  d.offsets.assign(static_cast<size_t>(n + 1), 0);
  auto draw_length = [&](Rng& rng) {
    return spec.min_length +
           static_cast<int64_t>(rng.below(static_cast<uint64_t>(spec.max_length - spec.min_length + 1)));
  };
  for (int64_t i = 0; i < n; ++i) {
    Rng rng(spec.seed, kSequences + static_cast<uint64_t>(i));
    d.offsets[static_cast<size_t>(i + 1)] = d.offsets[static_cast<size_t>(i)] + draw_length(rng);
  }
  d.features.resize(static_cast<size_t>(d.offsets.back() * F));
  constexpr int64_t kBlock = 256;   // sequences a block
  parallel_blocks((n + kBlock - 1) / kBlock, std::max(1, threads), [&](int64_t b) {
    std::vector<double> level(static_cast<size_t>(F));   // (F) the mean of each feature in this sequence
    for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
      Rng rng(spec.seed, kSequences + static_cast<uint64_t>(i));
      const int64_t length = draw_length(rng);
      double period = 0.0;
      if (classification) {
        const auto c = static_cast<size_t>(d.labels[static_cast<size_t>(i)]);
        period = class_period[c];
        for (int64_t f = 0; f < F; ++f)
          level[static_cast<size_t>(f)] = class_shift[c * static_cast<size_t>(F) + static_cast<size_t>(f)];
      } else {
        period = rng.uniform(kMinPeriod, kMaxPeriod);
        float* z = d.targets.data() + i * K;
        for (int64_t k = 0; k < K; ++k) z[k] = static_cast<float>(rng.uniform(-1.0, 1.0));
        for (int64_t f = 0; f < F; ++f) level[static_cast<size_t>(f)] = z[f % K];
      }
      const double t0 = rng.uniform(0.0, period);
      float* row = d.features.data() + d.offsets[static_cast<size_t>(i)] * F;
      for (int64_t t = 0; t < length; ++t)
        for (int64_t f = 0; f < F; ++f)
          *row++ = static_cast<float>(std::sin(kTwoPi * (static_cast<double>(t) + t0) / period +
                                               phase[static_cast<size_t>(f)]) +
                                      level[static_cast<size_t>(f)] + kNoise * rng.normal());
    }
  });
  return d;
}

}  // namespace ragtrain
