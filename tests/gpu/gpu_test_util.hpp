// Helpers of the GPU tests: skipping without a GPU, hand-made shards, the CPU reference of the fused buffer, and
// the |a - b| <= atol + rtol |ref| comparison with a report of how close the numbers really are.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/backend/cpu_lstm.hpp"
#include "ragtrain/core/rng.hpp"
#include "ragtrain/data/shard.hpp"
#include "ragtrain/model/model.hpp"

namespace ragtrain::gputest {

inline bool have_gpu() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

#define RT_SKIP_WITHOUT_GPU()                                                                      \
  do {                                                                                             \
    if (!::ragtrain::gputest::have_gpu())                                                          \
      GTEST_SKIP() << "no CUDA GPU visible (cudaGetDeviceCount reports none): GPU test skipped";   \
  } while (0)

// A shard with the given sequence lengths, random features in [-1, 1), random labels or targets.
inline Shard make_shard(const ModelShape& s, const std::vector<int64_t>& lengths, uint64_t seed) {
  Shard sh;
  sh.task = s.task;
  sh.num_features = s.input_size;
  sh.num_outputs = s.outputs;
  Rng rng(seed, 77);
  sh.offsets.push_back(0);
  for (size_t i = 0; i < lengths.size(); ++i) {
    sh.indices.push_back(static_cast<int64_t>(i));
    sh.offsets.push_back(sh.offsets.back() + lengths[i]);
    if (s.task == Task::Classification)
      sh.labels.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(s.outputs))));
    else
      for (int64_t k = 0; k < s.outputs; ++k) sh.targets.push_back(static_cast<float>(rng.uniform(-1.0, 1.0)));
  }
  sh.features.resize(static_cast<size_t>(sh.offsets.back() * s.input_size));
  for (float& v : sh.features) v = static_cast<float>(rng.uniform(-1.0, 1.0));
  return sh;
}

// The fused buffer (P gradient sums | loss_sum | count | correct) that the CPU backend computes for `batch`, with
// the reference functions in precision T (float: exactly the CPU backend's arithmetic; double: the truth).
// With dropout rates, each sequence draws the mask of (seed, step, its global index), as the backends do.
template <class T>
std::vector<double> reference_fused(const ParamLayout& layout, const std::vector<float>& params, const Shard& shard,
                                    const std::vector<int64_t>& batch, const DropoutRates& rates = {},
                                    uint64_t seed = 0, int64_t step = 0) {
  const int64_t P = layout.total(), C = layout.shape().outputs;
  std::vector<T> p(params.begin(), params.end()), grad(static_cast<size_t>(P), T(0)), d_out(static_cast<size_t>(C));
  LstmCache<T> cache;
  double loss = 0, count = 0, correct = 0;
  T loss_t = 0;
  for (int64_t pos : batch) {
    if (pos < 0) continue;
    const DropoutDraw drop{rates, DropoutKey{seed, step, shard.indices[static_cast<size_t>(pos)]}};
    const T* out = lstm_forward(layout, p.data(), shard.x(pos), shard.length(pos), cache, drop);
    const bool cls = shard.task == Task::Classification;
    const int32_t label = cls ? shard.labels[static_cast<size_t>(pos)] : 0;
    loss_t += loss_and_grad(shard.task, out, C, label, cls ? nullptr : shard.target(pos), d_out.data());
    count += 1;
    if (cls && argmax(out, C) == label) correct += 1;
    lstm_backward(layout, p.data(), shard.x(pos), cache, d_out.data(), grad.data());
  }
  loss = static_cast<double>(loss_t);
  std::vector<double> out(grad.begin(), grad.end());
  out.push_back(loss);
  out.push_back(count);
  out.push_back(correct);
  return out;
}

// Agreement of one flat buffer with a reference, tensor by tensor (atol = kAtolScale * max |ref| of the tensor,
// so near-zero entries of a tensor are judged against the tensor's own scale).
struct Agreement {
  bool ok = true;
  double worst_ratio = 0;     // max over elements of |a - b| / (atol + rtol |ref|); <= 1 passes
  double max_rel = 0;         // max |a - b| / |ref| over elements with |ref| >= 1e-3 max|ref| of their tensor
  double max_rel_large = 0;   // the same over elements with |ref| >= 0.1 max|ref| (no heavy cancellation)
  std::string worst_tensor;
  int64_t nonzero = 0, total = 0;
  int64_t ref_nonzero = 0, missing = 0;   // reference entries != 0, and those the GPU left at exactly 0
  std::string first_failure;
};

inline Agreement compare_params(const ParamLayout& layout, const std::vector<float>& got, const std::vector<double>& ref,
                                double rtol, double atol_scale) {
  Agreement a;
  for (const ParamTensor& t : layout.tensors()) {
    double scale = 0;
    for (int64_t i = 0; i < t.size; ++i) scale = std::max(scale, std::fabs(ref[static_cast<size_t>(t.offset + i)]));
    const double atol = atol_scale * scale + 1e-30;
    for (int64_t i = 0; i < t.size; ++i) {
      const size_t k = static_cast<size_t>(t.offset + i);
      const double r = ref[k], g = got[k], diff = std::fabs(g - r);
      a.total += 1;
      if (g != 0.0) a.nonzero += 1;
      if (r != 0.0) a.ref_nonzero += 1;
      if (r != 0.0 && g == 0.0) a.missing += 1;
      const double ratio = diff / (atol + rtol * std::fabs(r));
      if (!(ratio <= 1.0)) {   // NaN fails too
        if (a.ok)
          a.first_failure = t.name + "[" + std::to_string(i) + "]: gpu " + std::to_string(g) + " ref " +
                            std::to_string(r);
        a.ok = false;
      }
      if (!(ratio <= a.worst_ratio)) {
        a.worst_ratio = ratio;
        a.worst_tensor = t.name;
      }
      if (std::fabs(r) >= 1e-3 * scale && r != 0.0) a.max_rel = std::max(a.max_rel, diff / std::fabs(r));
      if (std::fabs(r) >= 0.1 * scale && r != 0.0) a.max_rel_large = std::max(a.max_rel_large, diff / std::fabs(r));
    }
  }
  return a;
}

inline double rel(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-30); }

}  // namespace ragtrain::gputest
