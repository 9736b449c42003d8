// The GPU-vs-CPU agreement check shared by the GPU test files: the CUDA backend's fused buffer for a batch against
// the float and double CPU references, then the step's totals against the CPU backend's; the backend pair and the
// batches of an agreement grid.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "../../src/backend/cuda/cuda_backend.hpp"
#include "gpu_test_util.hpp"
#include "ragtrain/core/error.hpp"

namespace ragtrain::gputest {

constexpr double kGradRtol = 1e-5;
constexpr double kGradAtolScale = 1e-5;   // atol = 1e-5 * max |ref| of the tensor (near-zero entries)

// K: the most sequences a step of the backend will take (the CUDA backend is built for it and takes no more).
inline BackendOptions options(const std::string& device, const std::string& optimizer, int64_t batch = 1) {
  BackendOptions o;
  o.batch = batch;
  o.device = *parse_device(device);
  o.optimizer.kind = *parse_optimizer_kind(optimizer);
  o.comm = MPI_COMM_SELF;
  o.local_rank = 0;
  return o;
}

// Checks the GPU's fused buffer for `batch` against the float reference (and reports the double one); then the
// StepTotals of update(lr = 0) against the CPU backend's. With dropout (the backends built with these rates and
// seed) both draw the masks of global step `step`.
inline void check_batch(CudaBackend& gpu, Backend& cpu, const ParamLayout& layout, const std::vector<float>& params,
                        const Shard& shard, const std::vector<int64_t>& batch, const std::string& label,
                        double atol_scale, const DropoutRates& rates = {}, uint64_t seed = 0, int64_t step = 0) {
  const int64_t P = layout.total();
  gpu.set_global_step(step);
  cpu.set_global_step(step);
  gpu.forward_backward(batch);
  const std::vector<float> got = gpu.fused_buffer();
  const std::vector<double> ref = reference_fused<float>(layout, params, shard, batch, rates, seed, step);
  const std::vector<double> truth = reference_fused<double>(layout, params, shard, batch, rates, seed, step);

  const Agreement a = compare_params(layout, got, ref, kGradRtol, atol_scale);
  const Agreement t = compare_params(layout, got, truth, kGradRtol, atol_scale);
  const Agreement cpu_vs_truth = [&] {
    std::vector<float> cpu_f(ref.begin(), ref.begin() + P);
    return compare_params(layout, cpu_f, truth, kGradRtol, atol_scale);
  }();
  std::printf("[ agree    ] %-46s (%s) grads: worst %.3f of tol (%s), max rel %.1e (%.1e on |g| >= 0.1 max); vs f64: "
              "gpu %.1e (%.1e), cpu %.1e (%.1e); nonzero %lld/%lld; loss rel %.1e\n",
              label.c_str(), rnn_algo_name(gpu.algorithm()), a.worst_ratio, a.worst_tensor.c_str(), a.max_rel, a.max_rel_large, t.max_rel,
              t.max_rel_large, cpu_vs_truth.max_rel, cpu_vs_truth.max_rel_large,
              static_cast<long long>(a.nonzero), static_cast<long long>(a.total),
              rel(got[static_cast<size_t>(P)], ref[static_cast<size_t>(P)]));
  EXPECT_TRUE(a.ok) << label << ": " << a.first_failure << " (worst ratio " << a.worst_ratio << " in "
                    << a.worst_tensor << ")";
  // Not trivially passing: the reference gradient is substantially nonzero and the GPU filled in every entry the
  // reference has. With T = 1 every weight_hh gradient is exactly zero (h_0 being zero), so the bar is then a tenth
  // of the other entries (at H = 200, F = 20 weight_hh is 90% of the model).
  int64_t can_be_nonzero = a.total;
  int64_t longest = 0;
  for (const int64_t p : batch) longest = std::max(longest, shard.length(p));
  if (longest == 1)
    for (const ParamTensor& tensor : layout.tensors())
      if (tensor.name.rfind("lstm.weight_hh", 0) == 0) can_be_nonzero -= tensor.size;
  EXPECT_GT(a.ref_nonzero, can_be_nonzero / 10) << label;
  EXPECT_EQ(a.missing, 0) << label;
  EXPECT_LE(rel(got[static_cast<size_t>(P)], ref[static_cast<size_t>(P)]), 1e-5) << label << ": loss";
  EXPECT_EQ(got[static_cast<size_t>(P + 1)], ref[static_cast<size_t>(P + 1)]) << label << ": count";
  EXPECT_EQ(got[static_cast<size_t>(P + 2)], ref[static_cast<size_t>(P + 2)]) << label << ": correct";

  // The same step through the Backend interface on both sides; lr = 0 keeps the parameters.
  gpu.allreduce();
  const StepTotals tg = gpu.update(0.0f);
  cpu.forward_backward(batch);
  cpu.allreduce();
  const StepTotals tc = cpu.update(0.0f);
  EXPECT_LE(rel(tg.loss_sum, tc.loss_sum), 1e-5) << label;
  EXPECT_EQ(tg.count, tc.count) << label;
  EXPECT_EQ(tg.correct, tc.correct) << label;
  EXPECT_LE(rel(tg.grad_norm, tc.grad_norm), 1e-5) << label << ": grad norm " << tg.grad_norm << " vs " << tc.grad_norm;
  EXPECT_GT(tc.grad_norm, 0.0) << label;
}

// A CUDA and a CPU backend built alike (SGD; K = every sequence of the shard and an empty slot), holding the same
// parameters and the same shard of `lengths`: the pair the agreement grids check.
struct GridPair {
  std::unique_ptr<CudaBackend> gpu;
  std::unique_ptr<Backend> cpu;
  std::vector<float> params;
  Shard shard;
};

inline GridPair grid_pair(const ModelShape& shape, const std::vector<int64_t>& lengths, const CudaTuning& tuning) {
  GridPair g;
  g.gpu = std::make_unique<CudaBackend>(shape, options("cuda", "sgd", static_cast<int64_t>(lengths.size()) + 1),
                                        tuning);
  g.cpu = make_backend(shape, options("cpu", "sgd"));
  g.params = init_params(ParamLayout(shape), 1234);
  g.gpu->set_params(g.params);
  g.cpu->set_params(g.params);
  g.shard = make_shard(shape, lengths, 99);
  g.gpu->set_train_shard(g.shard);
  g.cpu->set_train_shard(g.shard);
  return g;
}

// The batches of an agreement grid: each sequence alone, `reps` times (the first run plain, a second one from a
// captured CUDA graph), then all of them in one step with an empty slot, then {-1, last, 0}.
inline void check_grid(GridPair& g, const ParamLayout& layout, const std::string& base, int reps,
                       double atol_scale) {
  const Shard& shard = g.shard;
  for (int rep = 0; rep < reps; ++rep)
    for (int64_t p = 0; p < shard.size(); ++p)
      check_batch(*g.gpu, *g.cpu, layout, g.params, shard, {p},
                  RT_MSG(base << " T=" << shard.length(p) << (reps == 1 ? "" : rep ? " graph" : " first")), atol_scale);
  std::vector<int64_t> all;
  for (int64_t p = 0; p < shard.size(); ++p) all.push_back(p);
  all.push_back(-1);
  check_batch(*g.gpu, *g.cpu, layout, g.params, shard, all, RT_MSG(base << " K=" << all.size()), atol_scale);
  check_batch(*g.gpu, *g.cpu, layout, g.params, shard, {-1, shard.size() - 1, 0}, RT_MSG(base << " K=3"), atol_scale);
}

}  // namespace ragtrain::gputest
