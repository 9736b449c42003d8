// The CPU backend: the reference LSTM per sequence, MPI_Allreduce, the reference optimizer.
#pragma once

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/backend/cpu_lstm.hpp"

namespace ragtrain {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const ModelShape& shape, const BackendOptions& opts);

  std::string name() const override { return "cpu"; }
  void set_params(const std::vector<float>& params) override;
  std::vector<float> params() const override { return params_; }
  Optimizer& optimizer() override { return opt_; }
  void set_train_shard(const Shard& shard) override { shard_ = &shard; }
  void forward_backward(const std::vector<int64_t>& positions) override;
  void allreduce() override;
  StepTotals update(float lr) override;
  std::vector<float> infer(const Shard& shard) override;

 private:
  ParamLayout layout_;
  MPI_Comm comm_;
  Optimizer opt_;
  const Shard* shard_ = nullptr;
  std::vector<float> params_;   // (P) PyTorch layout
  std::vector<float> fused_;    // (P + kFusedExtras) gradient sums, loss sum, count, correct
  LstmCache<float> cache_;
  std::vector<float> d_out_;    // (outputs)
};

}  // namespace ragtrain
