// The shared training step.
#include "ragtrain/train/step.hpp"

namespace ragtrain {

ShardIndex::ShardIndex(const Shard& shard) : shard_(shard) {
  for (int64_t p = 0; p < shard.size(); ++p) pos_[shard.indices[static_cast<size_t>(p)]] = p;
}

void ShardIndex::positions(const Schedule::Epoch& epoch, int64_t step, int64_t rank, std::vector<int64_t>& out,
                           RankCounters& counters) const {
  out = epoch.rank_batch(step, rank);
  for (int64_t& i : out) {
    if (i < 0) continue;
    i = pos_.at(i);
    counters.sequences += 1;
    counters.timesteps += static_cast<double>(shard_.length(i));
  }
}

StepTotals train_step(Backend& backend, const std::vector<int64_t>& positions, float lr, RankCounters& counters,
                      Timeline* timeline, int64_t step, const std::function<void()>& while_computing) {
  // On a GPU these phases are asynchronous; the all-reduce's host wait is then where the time shows up,
  // and the backend's own event timings (take_phase_seconds) split it properly.
  Stopwatch t;
  {
    PhaseScope phase(timeline, Phase::Compute, step);
    backend.forward_backward(positions);
  }
  counters.compute_s += t.seconds();
  if (while_computing) while_computing();
  t.restart();
  {
    PhaseScope phase(timeline, Phase::AllreduceWait, step);
    backend.allreduce();
  }
  counters.comm_s += t.seconds();
  t.restart();
  StepTotals totals;
  {
    PhaseScope phase(timeline, Phase::Update, step);
    totals = backend.update(lr);
  }
  counters.compute_s += t.seconds();
  return totals;
}

}  // namespace ragtrain
