// A non-finite training step (NaN or Inf in the summed loss or gradient): which rank and which sequence caused
// it, worked out only on that failure path, and the words that name them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/comm/context.hpp"
#include "ragtrain/data/shard.hpp"

namespace ragtrain {

struct NonfiniteStep {
  int64_t step = 0;        // 1-based, as metrics.jsonl counts steps
  int rank = -1;           // the lowest rank with a sequence that is non-finite on its own; -1: none is
  int64_t sequence = -1;   // that sequence's index in the training file (its row in /offsets)
  bool loss = false;       // that sequence's loss is non-finite (else only its gradient); rank -1: the summed loss
  const char* what() const { return loss ? "loss" : "gradient"; }
};

// Collective over ctx.world; every rank calls it for the same step, because StepTotals::finite comes from the
// all-reduced buffer and is the same everywhere. Each rank recomputes its own sequences of the step one by one
// (Backend::first_nonfinite), then two small all-reduces find the lowest guilty rank and its sequence. Nothing
// of this runs on a finite step.
NonfiniteStep locate_nonfinite(const Context& ctx, Backend& backend, const std::vector<int64_t>& positions,
                               const Shard& shard, const StepTotals& totals, int64_t step);

// "step 17: non-finite loss on rank 1, sequence 42 (index in 'train.h5')".
std::string describe(const NonfiniteStep& s, const std::string& data_path);

}  // namespace ragtrain
