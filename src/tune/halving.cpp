// Successive halving: rung sizes and epochs, ranking and promotion (pure functions of the results).
#include "ragtrain/tune/halving.hpp"

#include <algorithm>
#include <cmath>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

const char* trial_status_name(TrialStatus s) {
  switch (s) {
    case TrialStatus::Done: return "done";
    case TrialStatus::Diverged: return "diverged";
    case TrialStatus::Failed: return "failed";
  }
  return "?";
}

bool parse_trial_status(const std::string& text, TrialStatus& s) {
  for (TrialStatus t : {TrialStatus::Done, TrialStatus::Diverged, TrialStatus::Failed})
    if (text == trial_status_name(t)) {
      s = t;
      return true;
    }
  return false;
}

int rung_count(int64_t trials, int eta) {
  int rungs = 1;
  for (int64_t n = trials; rungs < kMaxRungs && n / eta >= 1 && n > 1; n /= eta) ++rungs;
  return rungs;
}

int64_t rung_epochs(int64_t epochs, int rung, int rungs, int eta) {
  double e = static_cast<double>(epochs);
  for (int r = rung; r < rungs - 1; ++r) e /= eta;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(e - 1e-9)));
}

int64_t promoted_count(int64_t n, int eta) { return std::max<int64_t>(1, n / eta); }

std::vector<RungResult> ranked(std::vector<RungResult> results, bool classification) {
  std::sort(results.begin(), results.end(), [classification](const RungResult& a, const RungResult& b) {
    const bool da = a.status == TrialStatus::Done, db = b.status == TrialStatus::Done;
    if (da != db) return da;
    if (da) {
      if (classification && a.val_accuracy != b.val_accuracy) return a.val_accuracy > b.val_accuracy;
      if (a.val_loss != b.val_loss) return a.val_loss < b.val_loss;
    }
    return a.trial < b.trial;
  });
  return results;
}

std::vector<int64_t> promote(const std::vector<RungResult>& results, int64_t n, int eta, bool classification,
                             int64_t anchor) {
  const int64_t keep = promoted_count(n, eta);
  std::vector<int64_t> next;
  for (const RungResult& r : ranked(results, classification)) {
    if (r.status != TrialStatus::Done) break;
    const bool among_best = static_cast<int64_t>(next.size()) < keep;
    const bool anchor_left_out = !among_best && r.trial == anchor && anchor >= 0;
    if (among_best || anchor_left_out) next.push_back(r.trial);
  }
  std::sort(next.begin(), next.end());
  return next;
}

double accuracy_noise(double accuracy, int64_t validated) {
  if (validated <= 0) return 0;
  const double n = static_cast<double>(validated), a = std::clamp(accuracy, 0.0, 1.0);
  return std::max(1.0 / n, std::sqrt(a * (1 - a) / n));
}

RungResult choose_best(const std::vector<RungResult>& results, const std::vector<double>& cost, bool classification,
                       double noise) {
  RT_CHECK(cost.size() == results.size(), "costs " << cost.size() << " for " << results.size() << " results");
  const std::vector<RungResult> order = ranked(results, classification);
  RT_CHECK(!order.empty() && order.front().status == TrialStatus::Done, "no finished run to choose from");
  const RungResult& top = order.front();
  // A float32 figure averaged over folds: a hair of slack so that "one sequence behind" is within the noise.
  const double slack = 1e-9;
  const auto cost_of = [&](int64_t trial) {
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i].trial == trial) return cost[i];
    return 0.0;
  };
  const RungResult* best = &top;
  for (const RungResult& r : order) {   // best figure first: the first of least cost wins the ties
    if (r.status != TrialStatus::Done) break;
    const bool close = classification ? r.val_accuracy >= top.val_accuracy - noise - slack
                                      : r.val_loss <= top.val_loss + noise + slack;
    if (close && cost_of(r.trial) < cost_of(best->trial)) best = &r;
  }
  return *best;
}

const char* figure_name(bool classification) { return classification ? "val_accuracy" : "val_loss"; }

}  // namespace ragtrain
