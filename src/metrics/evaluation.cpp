// Scoring of head outputs, shared by validation in train, eval and predict.
#include "ragtrain/metrics/evaluation.hpp"

#include <cmath>

#include "ragtrain/backend/cpu_lstm.hpp"
#include "ragtrain/comm/watchdog.hpp"
#include "ragtrain/core/error.hpp"

namespace ragtrain {

EvalTotals score(const Shard& shard, const std::vector<float>& outputs) {
  EvalTotals t;
  score_into(t, shard, outputs);
  return t;
}

void score_into(EvalTotals& t, const Shard& shard, const std::vector<float>& outputs) {
  const int64_t C = shard.num_outputs;
  RT_CHECK(static_cast<int64_t>(outputs.size()) == shard.size() * C, "outputs do not match the shard");
  std::vector<double> out(static_cast<size_t>(C)), d(static_cast<size_t>(C));
  for (int64_t p = 0; p < shard.size(); ++p) {
    for (int64_t j = 0; j < C; ++j) out[static_cast<size_t>(j)] = outputs[static_cast<size_t>(p * C + j)];
    const bool cls = shard.task == Task::Classification;
    const int32_t label = cls ? shard.labels[static_cast<size_t>(p)] : 0;
    t.loss_sum += loss_and_grad<double>(shard.task, out.data(), C, label, cls ? nullptr : shard.target(p), d.data());
    if (cls) {
      t.correct += argmax(out.data(), C) == label ? 1 : 0;
    } else {
      double a = 0;
      for (int64_t j = 0; j < C; ++j) a += std::fabs(out[static_cast<size_t>(j)] - shard.target(p)[j]);
      t.abs_sum += a / static_cast<double>(C);
    }
    t.count += 1;
  }
}

EvalTotals allreduce(const EvalTotals& local, MPI_Comm comm) {
  double in[4] = {local.loss_sum, local.abs_sum, local.correct, local.count}, sum[4];
  MPI_CHECK(MPI_Allreduce(in, sum, 4, MPI_DOUBLE, MPI_SUM, comm));
  return EvalTotals{sum[0], sum[1], sum[2], sum[3]};
}

EvalTotals allreduce(const EvalTotals& local, const Context& ctx) {
  double in[4] = {local.loss_sum, local.abs_sum, local.correct, local.count}, sum[4];
  watched_allreduce(ctx, in, sum, 4, MPI_DOUBLE, MPI_SUM, "the sum of the validation scores");
  return EvalTotals{sum[0], sum[1], sum[2], sum[3]};
}

std::vector<double> softmax_rows(const std::vector<float>& logits, int64_t classes) {
  std::vector<double> p(logits.size());
  for (size_t r = 0; r + static_cast<size_t>(classes) <= logits.size(); r += static_cast<size_t>(classes)) {
    double mx = logits[r];
    for (int64_t j = 1; j < classes; ++j) mx = std::max(mx, static_cast<double>(logits[r + static_cast<size_t>(j)]));
    double s = 0;
    for (int64_t j = 0; j < classes; ++j) s += (p[r + static_cast<size_t>(j)] = std::exp(logits[r + static_cast<size_t>(j)] - mx));
    for (int64_t j = 0; j < classes; ++j) p[r + static_cast<size_t>(j)] /= s;
  }
  return p;
}

}  // namespace ragtrain
