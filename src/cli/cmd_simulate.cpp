// `ragtrain simulate`: the length imbalance, padding and batch repeats of the balanced and random schedules for
// any rank count, computed from the schedule alone (a pure function), so 1024 ranks can be studied on a laptop.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ragtrain/cli/commands.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/rng.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/shard.hpp"
#include "ragtrain/metrics/metrics.hpp"
#include "ragtrain/metrics/units.hpp"
#include "ragtrain/schedule/schedule.hpp"
#include "ragtrain/schedule/schedule_stats.hpp"

namespace ragtrain {

namespace {

// n lengths drawn from the distribution (rounded, at least 1); --lengths was checked when it was parsed.
std::vector<int64_t> draw_lengths(const LengthDistribution& d, int64_t n, uint64_t seed) {
  Rng rng(seed, 0x1E9);
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (d.kind == LengthDistribution::Kind::Uniform) {
    for (auto& v : out) v = static_cast<int64_t>(d.a) + static_cast<int64_t>(rng.below(static_cast<uint64_t>(d.b - d.a + 1)));
  } else {
    for (auto& v : out) v = std::max<int64_t>(1, std::llround(d.a * std::exp(d.b * rng.normal())));
  }
  return out;
}

// Every sequence's class id, read on rank 0 a chunk at a time (read_shard is collective: the other ranks join with
// empty selections), so a large file is never held whole.
std::vector<int32_t> read_class_ids(const DatasetInfo& info, const Context& ctx) {
  constexpr int64_t kChunk = 4096;
  std::vector<int32_t> out;
  for (int64_t first = 0; first < info.num_sequences; first += kChunk) {
    std::vector<int64_t> indices;
    if (ctx.is_root())
      for (int64_t i = first; i < std::min(first + kChunk, info.num_sequences); ++i) indices.push_back(i);
    const Shard shard = read_shard(info, indices, ctx.world);
    out.insert(out.end(), shard.labels.begin(), shard.labels.end());
  }
  return out;
}

}  // namespace

int run_simulate(const Context& ctx, const SimulateConfig& cfg) {
  DatasetInfo info;
  std::vector<int32_t> classes;   // every sequence's class id: a classification --data only
  collective_phase(ctx, [&] {
    if (!cfg.data.empty()) info = read_dataset_info(cfg.data, ctx.world);
  });
  if (!cfg.data.empty() && info.labeled && info.task == Task::Classification)   // no class ids without labels
    collective_phase(ctx, [&] { classes = read_class_ids(info, ctx); });
  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    const std::string source = cfg.data.empty() ? cfg.simulate.lengths.text : cfg.data;
    std::printf("# ragtrain simulate: means over %s of the length imbalance (1 - mean/max of per-rank "
                "timesteps), the padding of a rank's K sequences run as one call padded to its longest, and the "
                "batch repeats (share of an epoch's global batches, as sets, also trained the epoch before); with a "
                "classification --data, the distinct classes in a global batch\n",
                count_of(cfg.schedule.epochs, "epoch").c_str());
    std::printf("# %-24s %6s %4s %9s %7s | %9s %9s | %9s %9s | %9s %9s | %9s %9s\n", "", "", "", "", "", "imbalance",
                "", "padding", "", "repeats", "", "classes", "");
    std::printf("# %-24s %6s %4s %9s %7s | %9s %9s | %9s %9s | %9s %9s | %9s %9s\n", "lengths", "ranks", "K", "N",
                "steps", "balanced", "random", "balanced", "random", "balanced", "random", "balanced", "random");
    auto pct = [](double v) {
      char b[32];
      if (std::isnan(v)) std::snprintf(b, sizeof b, "%9s", "-");
      else std::snprintf(b, sizeof b, "%8.2f%%", 100 * v);
      return std::string(b);
    };
    auto count = [](double v) {
      char b[32];
      if (std::isnan(v)) std::snprintf(b, sizeof b, "%9s", "-");
      else std::snprintf(b, sizeof b, "%9.2f", v);
      return std::string(b);
    };
    auto json_num = [](double v) { return std::isnan(v) ? Json(nullptr) : Json(v); };
    const double none = std::nan("");
    Json rows = Json::array();
    std::string floors;   // K = 1: the sorted deal's imbalance, the reference for the mixing's cost
    for (int64_t p : cfg.simulate.ranks.values) {
      const std::vector<int64_t> lengths =
          cfg.data.empty()
              ? draw_lengths(cfg.simulate.lengths, p * cfg.schedule.batch_per_rank * cfg.simulate.sequences_per_rank,
                             cfg.schedule.seed)
              : info.lengths();
      const int64_t n = static_cast<int64_t>(lengths.size());
      const Schedule bal(lengths, p, cfg.schedule.batch_per_rank, cfg.schedule.seed, ScheduleKind::Balanced);
      const Schedule rnd(lengths, p, cfg.schedule.batch_per_rank, cfg.schedule.seed, ScheduleKind::Random);
      const ScheduleStats b = measure_schedule(bal, lengths, cfg.schedule.epochs),
                          r = measure_schedule(rnd, lengths, cfg.schedule.epochs);
      const double bc = classes.empty() ? none : classes_per_batch(bal, classes, cfg.schedule.epochs);
      const double rc = classes.empty() ? none : classes_per_batch(rnd, classes, cfg.schedule.epochs);
      std::printf("  %-24s %6lld %4lld %9lld %7lld | %s %s | %s %s | %s %s | %s %s\n", source.c_str(),
                  static_cast<long long>(p), static_cast<long long>(cfg.schedule.batch_per_rank),
                  static_cast<long long>(n), static_cast<long long>(bal.steps_per_epoch()), pct(b.imbalance).c_str(),
                  pct(r.imbalance).c_str(), pct(b.padding).c_str(), pct(r.padding).c_str(), pct(b.repeat).c_str(),
                  pct(r.repeat).c_str(), count(bc).c_str(), count(rc).c_str());
      const int64_t k = cfg.schedule.batch_per_rank;
      const double sorted_floor = k == 1 ? sorted_deal_imbalance(lengths, p) : none;
      if (k == 1) {
        char text[64];
        std::snprintf(text, sizeof text, "%s%lld ranks %.2f%%", floors.empty() ? "" : ", ", static_cast<long long>(p),
                      100 * sorted_floor);
        floors += text;
      }
      rows.push_back(Json{{"lengths", source},
                          {"ranks", p},
                          {"batch_per_rank", cfg.schedule.batch_per_rank},
                          {"sequences", n},
                          {"steps_per_epoch", bal.steps_per_epoch()},
                          {"epochs", cfg.schedule.epochs},
                          {"balanced_imbalance", b.imbalance},
                          {"sorted_deal_imbalance", json_num(sorted_floor)},
                          {"random_imbalance", r.imbalance},
                          {"balanced_padding", b.padding},
                          {"random_padding", r.padding},
                          {"balanced_batch_repeat_fraction", json_num(b.repeat)},
                          {"random_batch_repeat_fraction", json_num(r.repeat)},
                          {"balanced_classes_per_batch", json_num(bc)},
                          {"random_classes_per_batch", json_num(rc)}});
    }
    if (!floors.empty())
      std::printf("# imbalance floor at K = 1 (sorted lengths dealt in blocks of G, never mixed): %s\n", floors.c_str());
    if (!cfg.out.empty()) write_json_atomic(cfg.out, Json{{"simulation", "schedules"}, {"rows", rows}});
    std::fflush(stdout);
  });
  return kExitOk;
}

}  // namespace ragtrain
