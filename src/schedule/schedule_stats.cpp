// Batch repeats between epochs, padding and imbalance of a schedule, computed without training.
#include "ragtrain/schedule/schedule_stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ragtrain {

namespace {

// The global batches of >= 2 sequences of one epoch, each sorted, the list sorted (for set lookups).
std::vector<std::vector<int64_t>> batch_sets(const Schedule& s, const Schedule::Epoch& ep) {
  std::vector<std::vector<int64_t>> out;
  out.reserve(static_cast<size_t>(s.steps_per_epoch()));
  for (int64_t step = 0; step < s.steps_per_epoch(); ++step) {
    std::vector<int64_t> b = ep.global_batch(step);
    b.erase(std::remove(b.begin(), b.end(), int64_t{-1}), b.end());
    if (b.size() < 2) continue;
    std::sort(b.begin(), b.end());
    out.push_back(std::move(b));
  }
  std::sort(out.begin(), out.end());
  return out;
}

double repeat_between(const std::vector<std::vector<int64_t>>& before, const std::vector<std::vector<int64_t>>& now) {
  if (now.empty()) return std::numeric_limits<double>::quiet_NaN();
  int64_t met = 0;
  for (const auto& b : now) met += std::binary_search(before.begin(), before.end(), b) ? 1 : 0;
  return static_cast<double>(met) / static_cast<double>(now.size());
}

}  // namespace

double batch_repeat_fraction(const Schedule& s, int64_t epoch) {
  if (epoch < 1 || s.global_batch() < 2) return std::numeric_limits<double>::quiet_NaN();
  return batch_repeat_fraction(s, s.epoch(epoch - 1), s.epoch(epoch));
}

double batch_repeat_fraction(const Schedule& s, const Schedule::Epoch& before, const Schedule::Epoch& now) {
  if (s.global_batch() < 2) return std::numeric_limits<double>::quiet_NaN();
  return repeat_between(batch_sets(s, before), batch_sets(s, now));
}

Padding step_padding(const Schedule::Epoch& epoch, int64_t step, const Schedule& s, const std::vector<int64_t>& lengths) {
  Padding p;
  for (int64_t r = 0; r < s.world_size(); ++r) {
    double sum = 0, most = 0, k = 0;
    for (int64_t i : epoch.rank_batch(step, r)) {
      if (i < 0) continue;
      const double len = static_cast<double>(lengths[static_cast<size_t>(i)]);
      sum += len;
      most = std::max(most, len);
      k += 1;
    }
    p.padded += k * most;
    p.real += sum;
  }
  return p;
}

ScheduleStats measure_schedule(const Schedule& s, const std::vector<int64_t>& lengths, int64_t epochs) {
  ScheduleStats out;
  Padding pad;
  double imbalance = 0, repeat = 0;
  int64_t steps = 0, pairs = 0;
  std::vector<std::vector<int64_t>> before;
  for (int64_t e = 0; e < epochs; ++e) {
    const Schedule::Epoch ep = s.epoch(e);
    for (int64_t step = 0; step < s.steps_per_epoch(); ++step, ++steps) {
      imbalance += step_imbalance(ep, step, s, lengths);
      const Padding p = step_padding(ep, step, s, lengths);
      pad.padded += p.padded;
      pad.real += p.real;
    }
    if (s.global_batch() < 2) continue;
    std::vector<std::vector<int64_t>> now = batch_sets(s, ep);
    if (e > 0) {
      const double r = repeat_between(before, now);
      if (!std::isnan(r)) {
        repeat += r;
        ++pairs;
      }
    }
    before = std::move(now);
  }
  out.imbalance = steps > 0 ? imbalance / static_cast<double>(steps) : 0.0;
  out.padding = pad.fraction();
  out.repeat = pairs > 0 ? repeat / static_cast<double>(pairs) : std::numeric_limits<double>::quiet_NaN();
  return out;
}

double sorted_deal_imbalance(std::vector<int64_t> lengths, int64_t world_size) {
  std::sort(lengths.begin(), lengths.end());
  const int64_t n = static_cast<int64_t>(lengths.size()), g = world_size;
  double total = 0;
  int64_t steps = 0;
  for (int64_t begin = 0; begin < n; begin += g, ++steps) {
    const int64_t end = std::min(n, begin + g);   // the partial last step: the idle ranks count 0
    double sum = 0;
    for (int64_t i = begin; i < end; ++i) sum += static_cast<double>(lengths[static_cast<size_t>(i)]);
    const double longest = static_cast<double>(lengths[static_cast<size_t>(end - 1)]);
    if (longest > 0) total += 1.0 - sum / static_cast<double>(g) / longest;
  }
  return steps > 0 ? total / static_cast<double>(steps) : 0.0;
}

double classes_per_batch(const Schedule& s, const std::vector<int32_t>& labels, int64_t epochs) {
  double classes = 0;
  int64_t batches = 0;
  std::vector<int32_t> seen;
  for (int64_t e = 0; e < epochs; ++e) {
    const Schedule::Epoch ep = s.epoch(e);
    for (int64_t step = 0; step < s.steps_per_epoch(); ++step) {
      seen.clear();
      for (int64_t i : ep.global_batch(step))
        if (i >= 0) seen.push_back(labels[static_cast<size_t>(i)]);
      if (seen.size() < 2) continue;
      std::sort(seen.begin(), seen.end());
      classes += static_cast<double>(std::unique(seen.begin(), seen.end()) - seen.begin());
      ++batches;
    }
  }
  return batches > 0 ? classes / static_cast<double>(batches) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace ragtrain
