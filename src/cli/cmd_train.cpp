// `ragtrain train`: read shards, train data-parallel, validate every epoch, write metrics, summary, checkpoint.
// Reads top to bottom like the data path: config -> data -> schedule -> shards -> backend -> loop -> report.
#include <cstdio>
#include <iostream>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/checkpoint/checkpoint.hpp"
#include "ragtrain/cli/commands.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/normalization.hpp"
#include "ragtrain/data/shard.hpp"
#include "ragtrain/metrics/evaluation.hpp"
#include "ragtrain/metrics/metrics.hpp"
#include "ragtrain/schedule/schedule.hpp"
#include "ragtrain/train/step.hpp"

namespace ragtrain {

namespace {

OptimizerConfig optimizer_config(const RunConfig& c) {
  OptimizerConfig o;
  o.kind = c.optimizer;
  o.momentum = c.momentum;
  o.beta1 = c.beta1;
  o.beta2 = c.beta2;
  o.eps = c.eps;
  o.weight_decay = c.weight_decay;
  o.clip = c.clip;
  return o;
}

void check_compatible(const DatasetInfo& train, const DatasetInfo& val) {
  USER_CHECK(val.num_features == train.num_features,
             "validation file '" << val.path << "' has " << val.num_features << " features per timestep, the training file '"
                                 << train.path << "' has " << train.num_features,
             "both files must come from the same feature pipeline");
  USER_CHECK(val.task == train.task, "validation file '" << val.path << "' is a " << task_name(val.task)
                                                         << " set, the training file is " << task_name(train.task),
             "use a validation set of the same task");
  USER_CHECK(val.num_outputs == train.num_outputs,
             "validation file '" << val.path << "' declares " << val.num_outputs << (val.task == Task::Classification ? " classes" : " targets")
                                 << ", the training file '" << train.path << "' " << train.num_outputs,
             "the attribute num_classes must agree between training and validation files");
}

// One line of the end-of-run table per rank-spread quantity.
void print_spread_row(const char* name, const Json& s) {
  std::printf("#  %-12s %12.4f %12.4f %12.4f\n", name, s["min"].get<double>(), s["median"].get<double>(),
              s["max"].get<double>());
}

}  // namespace

int run_train(const Context& ctx, const RunConfig& cfg) {
  Stopwatch wall;
  const bool talk = ctx.is_root() && !cfg.quiet;
  if (talk) {
    std::printf("# effective configuration (%d ranks)\n%s", ctx.size, cfg.effective.c_str());
    std::fflush(stdout);
  }

  // Data headers: shapes, task and offsets only (cheap, identical on every rank).
  RankCounters run;   // this rank's totals for the whole run
  Stopwatch io;
  DatasetInfo train_info, val_info;
  const bool has_val = !cfg.val.empty();
  collective_phase(ctx, [&] {
    train_info = read_dataset_info(cfg.data, ctx.world);
    if (has_val) {
      val_info = read_dataset_info(cfg.val, ctx.world);
      check_compatible(train_info, val_info);
    }
  });

  // Which sequences this rank owns for the whole run, then only those are read.
  const std::vector<int64_t> lengths = train_info.lengths();
  const Schedule schedule(lengths, ctx.size, cfg.batch_per_rank, cfg.seed, parse_schedule_kind(cfg.schedule));
  Shard train, val;
  collective_phase(ctx, [&] { train = read_shard(train_info, schedule.rank_sequences(ctx.rank), ctx.world); });
  if (has_val)
    collective_phase(ctx, [&] {
      val = read_shard(val_info, block_indices(val_info.num_sequences, ctx.size, ctx.rank), ctx.world);
    });
  run.io_s += io.seconds();

  // Standardisation uses training statistics only, over every rank's shard, so validation stays held out.
  FeatureScaling scaling;
  if (cfg.normalize) {
    scaling = compute_scaling(train, ctx.world);
    apply_scaling(scaling, train);
    apply_scaling(scaling, val);
  }

  // Output folder only once the inputs are known to be good: a bad input leaves nothing behind.
  JsonlWriter log;
  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    ensure_output_dir(cfg.out);
    log.open(cfg.out + "/metrics.jsonl");
  });

  const ModelShape shape{train_info.num_features, cfg.hidden, cfg.layers, train_info.num_outputs, train_info.task};
  const ParamLayout layout(shape);
  BackendOptions bopts;
  bopts.device = cfg.device;
  bopts.optimizer = optimizer_config(cfg);
  bopts.comm = ctx.world;
  bopts.local_rank = ctx.local_rank;
  std::unique_ptr<Backend> backend;
  collective_phase(ctx, [&] { backend = make_backend(shape, bopts); });
  backend->set_params(init_params(layout, cfg.seed));
  backend->set_train_shard(train);

  const ShardIndex index(train);

  const int64_t steps_per_epoch = schedule.steps_per_epoch();
  LrSchedule lr_schedule{cfg.lr, cfg.warmup_steps, cfg.lr_decay, cfg.lr_final_fraction, cfg.epochs * steps_per_epoch};
  if (talk) {
    std::printf("# ragtrain train: %lld sequences (F=%lld, %s, %lld %s) on %d ranks x %lld per step = %lld steps/epoch, "
                "backend %s, %lld parameters\n",
                static_cast<long long>(train_info.num_sequences), static_cast<long long>(shape.input_size),
                task_name(shape.task), static_cast<long long>(shape.outputs),
                shape.task == Task::Classification ? "classes" : "targets", ctx.size,
                static_cast<long long>(cfg.batch_per_rank), static_cast<long long>(steps_per_epoch),
                backend->name().c_str(), static_cast<long long>(layout.total()));
    std::fflush(stdout);
  }

  int64_t step = 0;
  double last_train_loss = 0, last_train_acc = 0;
  EvalTotals last_val;
  RankCounters interval;
  double interval_loss = 0, interval_count = 0;
  // Length imbalance 1 - mean/max of per-rank timesteps: a pure function of the schedule, so rank 0 computes it
  // for every step without communication.
  double interval_imbalance = 0, run_imbalance = 0;
  int64_t interval_steps = 0;
  Stopwatch interval_clock;
  std::vector<int64_t> positions(static_cast<size_t>(cfg.batch_per_rank));

  for (int64_t epoch = 0; epoch < cfg.epochs; ++epoch) {
    const Schedule::Epoch order = schedule.epoch(epoch);
    double epoch_loss = 0, epoch_count = 0, epoch_correct = 0, epoch_imbalance = 0;
    Stopwatch epoch_clock;
    for (int64_t s = 0; s < steps_per_epoch; ++s, ++step) {
      index.positions(order, s, ctx.rank, positions, interval);
      const float lr = static_cast<float>(lr_schedule.at(step));
      const StepTotals tot = train_step(*backend, positions, lr, interval);

      epoch_loss += tot.loss_sum;
      epoch_count += tot.count;
      epoch_correct += tot.correct;
      interval_loss += tot.loss_sum;
      interval_count += tot.count;
      if (ctx.is_root()) {
        const double imbalance = step_imbalance(order, s, schedule, lengths);
        interval_imbalance += imbalance;
        epoch_imbalance += imbalance;
        run_imbalance += imbalance;
      }
      ++interval_steps;

      const bool last = s + 1 == steps_per_epoch;
      if ((step + 1) % cfg.log_every == 0 || last) {
        const double secs = interval_clock.seconds();
        const std::vector<RankCounters> all = gather_counters(ctx, interval);
        if (ctx.is_root()) {
          RankCounters sum;
          for (const auto& r : all) sum += r;
          Json rec{{"event", "step"},          {"epoch", epoch + 1},
                   {"step", step + 1},         {"lr", lr},
                   {"loss", interval_loss / interval_count}, {"grad_norm", tot.grad_norm},
                   {"length_imbalance", interval_imbalance / static_cast<double>(interval_steps)},
                   {"comm_wait_fraction", spread_fraction(all)},
                   {"sequences", sum.sequences}, {"timesteps", sum.timesteps},
                   {"seconds", secs},          {"sequences_per_second", sum.sequences / secs},
                   {"timesteps_per_second", sum.timesteps / secs},
                   {"compute_s", spread(all, &RankCounters::compute_s)},
                   {"comm_s", spread(all, &RankCounters::comm_s)}};
          log.write(rec);
          if (talk) {
            std::printf("epoch %lld/%lld  step %lld/%lld  loss %.4f  lr %.2e  %.0f seq/s\n",
                        static_cast<long long>(epoch + 1), static_cast<long long>(cfg.epochs),
                        static_cast<long long>(s + 1), static_cast<long long>(steps_per_epoch),
                        interval_loss / interval_count, lr, sum.sequences / secs);
            std::fflush(stdout);
          }
        }
        run += interval;
        interval = RankCounters{};
        interval_loss = interval_count = interval_imbalance = 0;
        interval_steps = 0;
        interval_clock.restart();
      }
    }

    last_train_loss = epoch_loss / epoch_count;
    last_train_acc = epoch_correct / epoch_count;
    Json rec{{"event", "epoch"},
             {"epoch", epoch + 1},
             {"step", step},
             {"train_loss", last_train_loss},
             {"length_imbalance", epoch_imbalance / static_cast<double>(steps_per_epoch)},
             {"seconds", epoch_clock.seconds()}};
    if (shape.task == Task::Classification) rec["train_accuracy"] = last_train_acc;
    if (has_val) {
      Stopwatch t;
      last_val = allreduce(score(val, backend->infer(val)), ctx.world);
      run.compute_s += t.seconds();
      rec["val_loss"] = last_val.loss();
      if (shape.task == Task::Classification)
        rec["val_accuracy"] = last_val.accuracy();
      else
        rec["val_mae"] = last_val.mae();
    }
    if (ctx.is_root()) {
      log.write(rec);
      if (talk) {
        std::printf("epoch %lld/%lld done: train loss %.4f", static_cast<long long>(epoch + 1),
                    static_cast<long long>(cfg.epochs), last_train_loss);
        if (shape.task == Task::Classification) std::printf(" acc %.4f", last_train_acc);
        if (has_val) {
          std::printf("  val loss %.4f", last_val.loss());
          if (shape.task == Task::Classification) std::printf(" acc %.4f", last_val.accuracy());
        }
        std::printf("  (%.2f s)\n", epoch_clock.seconds());
        std::fflush(stdout);
      }
    }
  }

  // Final record: every rank holds identical parameters, rank 0 writes them.
  Checkpoint ckpt;
  ckpt.shape = shape;
  ckpt.params = backend->params();
  ckpt.class_names = train_info.class_names;
  ckpt.epoch = cfg.epochs;
  ckpt.step = step;
  ckpt.config = cfg.effective;
  ckpt.optimizer = cfg.optimizer;
  ckpt.optimizer_steps = backend->optimizer().steps_taken();
  ckpt.opt_m = backend->optimizer().m();
  ckpt.opt_v = backend->optimizer().v();
  ckpt.feature_mean = scaling.mean;
  ckpt.feature_std = scaling.std;
  Stopwatch write_clock;
  collective_phase(ctx, [&] {
    if (ctx.is_root()) write_checkpoint(cfg.out + "/checkpoint.h5", ckpt);
  });
  run.io_s += write_clock.seconds();

  const double wall_s = wall.seconds();
  const std::vector<RankCounters> all = gather_counters(ctx, run);
  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    RankCounters sum;
    for (const auto& r : all) sum += r;
    Json summary{{"world_size", ctx.size},
                 {"backend", backend->name()},
                 {"epochs", cfg.epochs},
                 {"steps", step},
                 {"sequences", train_info.num_sequences},
                 {"batch_per_rank", cfg.batch_per_rank},
                 {"parameters", layout.total()},
                 {"train_loss", last_train_loss}};
    if (shape.task == Task::Classification) summary["train_accuracy"] = last_train_acc;
    if (has_val) {
      summary["val_loss"] = last_val.loss();
      if (shape.task == Task::Classification)
        summary["val_accuracy"] = last_val.accuracy();
      else
        summary["val_mae"] = last_val.mae();
    } else {
      summary["val_loss"] = nullptr;
    }
    summary["sequences_per_second"] = sum.sequences / wall_s;
    summary["timesteps_per_second"] = sum.timesteps / wall_s;
    summary["schedule"] = cfg.schedule;
    summary["length_imbalance"] = step > 0 ? run_imbalance / static_cast<double>(step) : 0.0;
    double wait = 0;
    for (const auto& r : all) wait += wait_fraction(r);
    summary["comm_wait_fraction"] = wait / static_cast<double>(all.size());
    summary["wall_seconds"] = wall_s;
    summary["timings"] = Json{{"compute_s", spread(all, &RankCounters::compute_s)},
                              {"comm_s", spread(all, &RankCounters::comm_s)},
                              {"io_s", spread(all, &RankCounters::io_s)},
                              {"comm_wait_fraction", spread_fraction(all)},
                              {"sequences", spread(all, &RankCounters::sequences)},
                              {"timesteps", spread(all, &RankCounters::timesteps)}};
    summary["config"] = cfg.effective;
    write_json_atomic(cfg.out + "/summary.json", summary);

    if (!cfg.quiet) {
      std::printf("#\n# %-10s %8s %6s %7s %11s %11s %9s %10s %13s %9s\n", "result", "ranks", "epochs", "steps",
                  "train_loss", "val_loss", "val_acc", "seq/s", "timesteps/s", "wall_s");
      std::printf("# %-10s %8d %6lld %7lld %11.5f %11s %9s %10.1f %13.1f %9.2f\n", backend->name().c_str(), ctx.size,
                  static_cast<long long>(cfg.epochs), static_cast<long long>(step), last_train_loss,
                  has_val ? std::to_string(last_val.loss()).c_str() : "-",
                  has_val && shape.task == Task::Classification ? std::to_string(last_val.accuracy()).c_str() : "-",
                  sum.sequences / wall_s, sum.timesteps / wall_s, wall_s);
      std::printf("#\n#  %-12s %12s %12s %12s   (seconds per rank)\n", "", "min", "median", "max");
      print_spread_row("compute", summary["timings"]["compute_s"]);
      print_spread_row("comm wait", summary["timings"]["comm_s"]);
      print_spread_row("io", summary["timings"]["io_s"]);
      std::printf("# outputs: %s/{metrics.jsonl,summary.json,checkpoint.h5}\n", cfg.out.c_str());
    }
    if (has_val && shape.task == Task::Classification)
      std::printf("validation accuracy: %.4f (%lld/%lld)\n", last_val.accuracy(),
                  static_cast<long long>(last_val.correct), static_cast<long long>(last_val.count));
    std::fflush(stdout);
  });
  return kExitOk;
}

}  // namespace ragtrain
