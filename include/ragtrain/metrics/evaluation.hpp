// Loss, accuracy and predictions of head outputs, summed over all ranks.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "ragtrain/comm/context.hpp"
#include "ragtrain/data/shard.hpp"

namespace ragtrain {

struct EvalTotals {
  double loss_sum = 0;   // classification: cross-entropy; regression: mean-over-K squared error
  double abs_sum = 0;    // regression: sum over sequences of the mean-over-K absolute error
  double correct = 0;    // classification
  double count = 0;

  double loss() const { return count > 0 ? loss_sum / count : 0.0; }
  double accuracy() const { return count > 0 ? correct / count : 0.0; }
  double mae() const { return count > 0 ? abs_sum / count : 0.0; }
};

// Scores `outputs` (n, C) of a shard against its labels/targets; local, no communication.
EvalTotals score(const Shard& shard, const std::vector<float>& outputs);
// The same added to `totals` sequence by sequence: a block scored in consecutive pieces gets the sums (to the bit)
// of the block scored at once.
void score_into(EvalTotals& totals, const Shard& shard, const std::vector<float>& outputs);

// Sums totals over `comm` (collective).
EvalTotals allreduce(const EvalTotals& local, MPI_Comm comm);
// The same over ctx.world, under ctx's watchdog (train's validation: a rank that never arrives is named).
EvalTotals allreduce(const EvalTotals& local, const Context& ctx);

// Row-wise softmax of (n, C) logits, in double for stable probabilities.
std::vector<double> softmax_rows(const std::vector<float>& logits, int64_t classes);

}  // namespace ragtrain
