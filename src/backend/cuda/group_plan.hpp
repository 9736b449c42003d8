// How the grouped recurrence (fused_group.cu) cuts a step's slots into groups: pure host code, so the unit tests
// check it without a GPU.
//
// Why groups of their own sizes: a group runs in lock step for as many steps as its longest member, and each lock
// step costs more the more tiles of 8 members the group holds (a tile adds ~0.8 us to a lock step of ~0.6 us at
// H = 256: the sweep over K on one H100, doc/performance.md). Groups of one size, sorted longest first, make the
// group of the longest members as large as the others, and that group sets the stage's time while the groups of short
// members finish early (at K = 128 on lengths 60..130, groups of 19, the cluster of the shortest group idles about
// half of a stage). Giving the longest members smaller groups and the shortest larger ones, on the same clusters,
// shortens the longest group.
// Each tile count runs on the stage kernel instantiated for it (FusedLstm::launch_groups: a launch per tile count, at
// once), since skipping unused tiles at run time in the largest kernel cost 7%. Measured (2026-12-07, one H100): a step
// of 128 at H = 256 whose lengths spread over 60..130 (--schedule random) 17.5% shorter, at H = 200 K = 64 28%; balanced
// steps (nearly equal lengths) unchanged, as 16 tiles on 7 clusters leave 3 tiles on the clusters that set the stage.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace ragtrain {

// A lock step's cost for a group of nt tiles, in the sweep's units (0.6 us + 0.8 us a tile, x 5).
inline int64_t group_step_cost(int nt) { return 3 + 4 * static_cast<int64_t>(nt); }

// The group starts (and, last, the number of slots) for `lengths`, sorted longest first, in at most `groups_max`
// groups of at most `n_max` members (a multiple of 8), so that the largest of (a group's first length x its lock
// step's cost) is as small as it can be: the threshold is the smallest product for which groups, each as large as the
// threshold lets its first member's length allow, cover every slot. Empty when no plan fits (more slots than
// groups_max x n_max). Depends on the lengths alone: a batch gets the same groups every time.
inline std::vector<int> plan_groups(const std::vector<int>& lengths, int groups_max, int n_max) {
  const int B = static_cast<int>(lengths.size()), nt_max = n_max / 8;
  std::vector<int> first;
  if (B == 0 || groups_max < 1 || nt_max < 1 || static_cast<int64_t>(groups_max) * n_max < B) return first;
  // Greedy cover under threshold `cap`: each group takes as many tiles as its first length allows.
  auto cover = [&](int64_t cap, std::vector<int>* out) {
    int i = 0, groups = 0;
    while (i < B) {
      int nt = nt_max;
      while (nt >= 1 && lengths[static_cast<size_t>(i)] * group_step_cost(nt) > cap) --nt;
      if (nt < 1 || ++groups > groups_max) return false;
      if (out) out->push_back(i);
      i = std::min(B, i + 8 * nt);
    }
    if (out) out->push_back(B);
    return true;
  };
  std::vector<int64_t> caps;   // every value the largest product can take
  for (int len : lengths)
    for (int nt = 1; nt <= nt_max; ++nt) caps.push_back(len * group_step_cost(nt));
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  // Feasibility grows with the cap, and the largest cap always fits (the first length is the largest and every group
  // may take n_max): the smallest feasible one by bisection.
  size_t lo = 0, hi = caps.size() - 1;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (cover(caps[mid], nullptr)) hi = mid;
    else lo = mid + 1;
  }
  cover(caps[lo], &first);
  return first;
}

// The weight-gradient GEMM beside the backward stage (FusedLstm::backward_beside): the plan's groups of its largest
// tile count run their backward on the step's stream and the GEMM over their slots after it; the other groups run
// theirs on a second stream, with the GEMM over their slots as soon as they end, on the SMs the longer stage leaves
// free (why: at K = 128 balanced, 2-tile groups end their backward stage at ~0.65 of the 3-tile ones' time).
// A GEMM block sums one part of its slots' timesteps, and the GEMM's `parts` are as many as fill the GPU twice, so
// its time is one part's: the main stream's GEMM keeps all `parts` (a part of its fewer timesteps is shorter), and
// the side's takes as many as its blocks (`tiles_per_part` a part, two an SM) fit beside the long stage's clusters
// (`cluster_sms` each) on `sms`, at least one, at most `parts`. Measured first with the parts shared between the two
// in proportion to their timesteps, each GEMM took what the whole one did (one part's time); so, a step of 128 at
// H = 256 took 963.7 instead of 1,050.3 us (balanced schedule, one H100, 2026-12-07).
struct BesideSplit {
  int nt_main = 0;                                 // the tile count whose groups stay on the step's stream
  std::vector<std::pair<int, int>> main, side;     // their slot ranges [lo, hi), and the others', merged where adjacent
  int main_parts = 0, side_parts = 0;              // 0: no split (one tile count, or fewer than 2 parts)
};

// From the plan (group starts, then B) for a GEMM of `parts` parts.
inline BesideSplit split_beside(const std::vector<int>& plan, int parts, int sms, int cluster_sms,
                                int tiles_per_part) {
  BesideSplit s;
  if (plan.size() < 3 || parts < 2 || tiles_per_part < 1) return s;
  auto tiles = [&](size_t g) { return (plan[g + 1] - plan[g] + 7) / 8; };
  for (size_t g = 0; g + 1 < plan.size(); ++g) s.nt_main = std::max(s.nt_main, tiles(g));
  int main_groups = 0;
  for (size_t g = 0; g + 1 < plan.size(); ++g) {
    const bool side = tiles(g) < s.nt_main;
    main_groups += side ? 0 : 1;
    auto& ranges = side ? s.side : s.main;
    if (!ranges.empty() && ranges.back().second == plan[g]) ranges.back().second = plan[g + 1];
    else ranges.emplace_back(plan[g], plan[g + 1]);
  }
  if (s.side.empty()) {
    s.main.clear();
    return s;
  }
  s.main_parts = parts;
  s.side_parts = std::clamp(2 * std::max(0, sms - main_groups * cluster_sms) / tiles_per_part, 1, parts);
  return s;
}

}  // namespace ragtrain
