// `ragtrain bench`: a fixed number of timed training steps after a warm-up, on synthetic data in memory or a
// file; prints a '#'-commented table and writes JSON. The same Trainer set-up and step as `train`.
#include <algorithm>
#include <cstdio>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/cli/commands.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/metrics/metrics.hpp"
#include "ragtrain/metrics/provenance.hpp"
#include "ragtrain/metrics/units.hpp"
#include "ragtrain/train/trainer.hpp"

namespace ragtrain {

namespace {

// What the timed steps measured.
struct Timed {
  double slowest = 0;                                    // seconds of the slowest rank's timed steps
  std::vector<RankCounters> all;                         // every rank's counters of the timed steps (rank 0)
  std::vector<std::pair<std::string, double>> phases;    // the backend's phases (names; this rank's seconds)
  std::vector<double> all_phases;                        // (ranks x phases) us/step, rank-major (rank 0)
  std::vector<double> losses;                            // (warmup + steps) mean loss of every global step
};

// The warm-up, then the timed steps (every rank starts the clock together), then what every rank measured.
Timed time_steps(const Context& ctx, Trainer& trainer, const BenchTiming& timing) {
  Backend& backend = trainer.backend();
  Timed t;
  auto one_step = [&](RankCounters& c) {
    const StepTotals s = trainer.step(c);
    t.losses.push_back(s.loss_sum / s.count);   // host values the step returned anyway: no extra synchronisation
  };
  RankCounters warm;
  for (int64_t s = 0; s < timing.warmup; ++s) one_step(warm);
  backend.synchronize();
  backend.take_phase_seconds();
  MPI_CHECK(MPI_Barrier(ctx.world));   // every rank starts the clock together

  RankCounters mine;
  Stopwatch clock;
  for (int64_t s = 0; s < timing.steps; ++s) one_step(mine);
  backend.synchronize();
  const double seconds = clock.seconds();
  t.phases = backend.take_phase_seconds();
  t.slowest = seconds;
  MPI_CHECK(MPI_Allreduce(&seconds, &t.slowest, 1, MPI_DOUBLE, MPI_MAX, ctx.world));
  t.all = gather_counters(ctx, mine);
  // Every rank's phases (GPU events), not only rank 0's: the all-reduce phase is where a rank waits for the
  // slowest one, so its spread over ranks is the per-rank wait. Same backend everywhere: same names, same order.
  std::vector<double> my_phases;
  t.all_phases.resize(t.phases.size() * static_cast<size_t>(ctx.size));
  for (const auto& p : t.phases) my_phases.push_back(1e6 * p.second / static_cast<double>(timing.steps));
  if (!t.phases.empty())
    MPI_CHECK(MPI_Gather(my_phases.data(), static_cast<int>(my_phases.size()), MPI_DOUBLE, t.all_phases.data(),
                         static_cast<int>(my_phases.size()), MPI_DOUBLE, 0, ctx.world));
  return t;
}

// Rank 0: the table of the run and of its phases on stdout; returns the phases as JSON (rank 0's, and by rank).
std::pair<Json, Json> print_table(const Context& ctx, const BenchConfig& cfg, Trainer& trainer, const Timed& t,
                                  const std::string& source) {
  const ModelShape& shape = trainer.shape();
  RankCounters sum;
  for (const auto& r : t.all) sum += r;
  const double seq_s = sum.sequences / t.slowest, ts_s = sum.timesteps / t.slowest;
  const double us_step = 1e6 * t.slowest / static_cast<double>(cfg.timing.steps);
  const bool talk = !cfg.run.talk.quiet;   // --quiet: the result rows and the validity line only
  if (talk)
    std::printf(
      "# ragtrain bench: %s, F=%lld H=%lld L=%lld, lengths %lld..%lld, %s x %lld per step, %lld steps "
      "after %lld warm-up\n",
      source.c_str(), static_cast<long long>(shape.input_size), static_cast<long long>(shape.hidden),
      static_cast<long long>(shape.layers), static_cast<long long>(cfg.synthetic.min_length),
      static_cast<long long>(cfg.synthetic.max_length), count_of(ctx.size, "rank").c_str(),
      static_cast<long long>(cfg.run.schedule.batch_per_rank), static_cast<long long>(cfg.timing.steps),
      static_cast<long long>(cfg.timing.warmup));
  if (talk)
    std::printf("# model: %s, dropout %g, head dropout %g\n", describe(shape).c_str(), cfg.run.model.dropout.between,
              cfg.run.model.dropout.head);
  std::printf("# %-8s %6s %6s %6s %6s %12s %14s %12s %14s\n", "backend", "ranks", "K", "H", "L", "seq/s",
              "timesteps/s", "us/step", "seq/s/rank");
  std::printf("# %-8s %6s %6s %6s %6s %12s %14s %12s %14s\n", "", "", "", "", "", "(1/s)", "(1/s)", "(us)", "(1/s)");
  std::printf("  %-8s %6d %6lld %6lld %6lld %12.1f %14.1f %12.1f %14.1f\n", trainer.backend().name().c_str(),
              ctx.size, static_cast<long long>(cfg.run.schedule.batch_per_rank), static_cast<long long>(shape.hidden),
              static_cast<long long>(shape.layers), seq_s, ts_s, us_step, seq_s / ctx.size);
  Json phase_json = Json::object(), by_rank = Json::object();
  if (!t.phases.empty()) {
    if (talk) std::printf("# phase                rank 0 us/step   min..max over ranks\n");
    for (size_t k = 0; k < t.phases.size(); ++k) {
      std::vector<double> v;
      for (int r = 0; r < ctx.size; ++r) v.push_back(t.all_phases[static_cast<size_t>(r) * t.phases.size() + k]);
      if (talk)
        std::printf("  %-20s %14.1f   %.1f..%.1f\n", t.phases[k].first.c_str(), v[0],
                    *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
      phase_json[t.phases[k].first] = v[0];
      by_rank[t.phases[k].first] = v;
    }
  }
  return {phase_json, by_rank};
}

// The JSON record of the run (rank 0), with the phases print_table returned.
Json bench_record(const Context& ctx, const BenchConfig& cfg, Trainer& trainer, const Timed& t,
                  const std::string& source, const std::pair<Json, Json>& phases, const Json& validity,
                  const Json& provenance) {
  const ModelShape& shape = trainer.shape();
  RankCounters sum;
  for (const auto& r : t.all) sum += r;
  return Json{{"benchmark", "train_step"},
              {"backend", trainer.backend().name()},
              {"backend_description", trainer.backend().describe()},
              {"source", source},
              {"world_size", ctx.size},
              {"batch_per_rank", cfg.run.schedule.batch_per_rank},
              {"features", shape.input_size},
              {"hidden", shape.hidden},
              {"layers", shape.layers},
              {"bidirectional", shape.bidirectional},
              {"pool", pool_name(shape.pool)},
              {"dropout", cfg.run.model.dropout.between},
              {"head_dropout", cfg.run.model.dropout.head},
              {"outputs", shape.outputs},
              {"min_length", cfg.synthetic.min_length},
              {"max_length", cfg.synthetic.max_length},
              {"optimizer", optimizer_name(cfg.run.optimizer.kind)},
              {"warmup_steps", cfg.timing.warmup},
              {"steps", cfg.timing.steps},
              {"seconds", t.slowest},
              {"sequences_per_second", sum.sequences / t.slowest},
              {"timesteps_per_second", sum.timesteps / t.slowest},
              {"us_per_step", 1e6 * t.slowest / static_cast<double>(cfg.timing.steps)},
              {"phase_us_per_step_rank0", phases.first},
              {"phase_us_per_step_by_rank", phases.second},
              {"timings", Json{{"compute_s", spread(t.all, &RankCounters::compute_s)},
                               {"comm_s", spread(t.all, &RankCounters::comm_s)},
                               {"wait_fraction", spread_fraction(t.all)}}},
              {"valid", validity["valid"]},
              {"validity", validity},
              {"config", cfg.run.provenance.effective},
              {"provenance", provenance}};
}

}  // namespace

int run_bench(const Context& ctx, const BenchConfig& cfg) {
  const std::string started_at = utc_now();
  // The Trainer's set-up and step, as train runs them: the rank's own columns of the schedule, from the file or
  // from the same synthetic set on every rank; the backend built for K; steps walk the schedule epoch by epoch.
  Trainer trainer(ctx, cfg.run);
  trainer.setup_data();
  trainer.setup_shards();
  trainer.setup_backend();
  const std::string source = cfg.run.source.data.empty() ? "synthetic" : cfg.run.source.data;
  const Timed t = time_steps(ctx, trainer, cfg.timing);

  // Validity: the mean loss of the last tenth of the steps below that of the first tenth, all ranks identical.
  const size_t window = std::max<size_t>(1, t.losses.size() / 10);
  double first_loss = 0, last_loss = 0;
  for (size_t i = 0; i < window; ++i) {
    first_loss += t.losses[i] / static_cast<double>(window);
    last_loss += t.losses[t.losses.size() - window + i] / static_cast<double>(window);
  }
  const Json validity = check_validity(ctx, trainer.backend().params(), first_loss, last_loss);
  const Json provenance = collect_provenance(ctx, cfg.run.provenance.command_line, cfg.run.provenance.effective,
                                             trainer.backend().name(), started_at);

  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    const auto phases = print_table(ctx, cfg, trainer, t, source);
    std::printf("# validity: %s (loss %.4f -> %.4f, finite %s, falling %s, ranks agree %s)\n",
                validity["valid"].get<bool>() ? "OK" : "FAILED", first_loss, last_loss,
                validity["loss_finite"].get<bool>() ? "yes" : "no", validity["loss_falling"].get<bool>() ? "yes" : "no",
                validity["ranks_agree"].get<bool>() ? "yes" : "no");
    if (!cfg.out.empty())
      write_json_atomic(cfg.out, bench_record(ctx, cfg, trainer, t, source, phases, validity, provenance));
    std::fflush(stdout);
  });
  trainer.write_trace();   // --trace: warm-up and timed steps, every rank
  return kExitOk;
}

}  // namespace ragtrain
