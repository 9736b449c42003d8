// `ragtrain train`: read shards, train data-parallel, validate every epoch, write metrics, checkpoints, summary.
// Reads top to bottom like the data path: config -> data -> schedule -> (resume) -> shards -> backend -> loop
// (step, log, epoch end, agreement on signals and checkpoints) -> report.
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/checkpoint/checkpoint.hpp"
#include "ragtrain/checkpoint/checksum.hpp"
#include "ragtrain/checkpoint/resume.hpp"
#include "ragtrain/checkpoint/rotation.hpp"
#include "ragtrain/cli/commands.hpp"
#include "ragtrain/comm/signals.hpp"
#include "ragtrain/comm/watchdog.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/normalization.hpp"
#include "ragtrain/data/shard.hpp"
#include "ragtrain/metrics/evaluation.hpp"
#include "ragtrain/metrics/metrics.hpp"
#include "ragtrain/metrics/progress.hpp"
#include "ragtrain/metrics/units.hpp"
#include "ragtrain/metrics/provenance.hpp"
#include "ragtrain/schedule/schedule.hpp"
#include "ragtrain/train/nonfinite.hpp"
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

uint32_t lengths_crc32(const std::vector<int64_t>& lengths) {
  return crc32(lengths.data(), lengths.size() * sizeof(int64_t));
}

// The step checkpoints already in --out must all be older than where this run starts (`step`, -1 for a fresh
// run): newer ones belong to another run or to a continuation being abandoned, and rotation, which keeps the
// highest step numbers, would delete the new checkpoints instead of them.
void check_no_newer_checkpoints(const std::string& out, int64_t step) {
  std::error_code ec;
  if (!std::filesystem::is_directory(out, ec)) return;
  for (const StepCheckpoint& s : list_step_checkpoints(out)) {
    USER_CHECK(step >= 0, "--out " << out << " holds the checkpoints of an earlier run (" << s.path << ")",
               "continue that run with --resume " << out << ", or start afresh in another (or an emptied) --out folder");
    USER_CHECK(s.step <= step,
               "--out " << out << " holds " << s.path << ", newer than the resume point (step " << step << ")",
               "resume from the newest checkpoint (--resume " << out << "), or write to another --out folder");
  }
}

}  // namespace

int run_train(const Context& launched, const RunConfig& cfg) {
  // Dead or stuck ranks: once the loop starts (watchdog.arm() below), every collective that takes `ctx` waits at
  // most --comm-timeout, then names the rank that did not come and ends the job (comm/watchdog.hpp).
  CommWatchdog watchdog(launched, cfg.comm_timeout);
  const Context ctx = launched.with_watchdog(&watchdog);
  Stopwatch wall;
  const std::string started_at = utc_now();
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
  MemoryBudget budget;   // --max-memory: what each read below may allocate, checked before it does
  collective_phase(ctx, [&] {
    budget = MemoryBudget::of(cfg.max_memory, ctx.local_size);
    train_info = read_dataset_info(cfg.data, ctx.world, budget);
    if (has_val) {
      val_info = read_dataset_info(cfg.val, ctx.world, budget);
      check_compatible(train_info, val_info);
    }
    // A rank without a single training sequence would only ever contribute empty gradients: almost certainly
    // a launch mistake (-np too large, or the wrong --data), and its device would sit idle for the whole run.
    USER_CHECK(train_info.num_sequences >= ctx.size,
               "--data " << cfg.data << " holds " << train_info.num_sequences << " sequence(s) but the job has "
                         << ctx.size << " ranks; every rank must train on at least one sequence",
               "use at most " << train_info.num_sequences << " rank(s) (mpirun -np " << train_info.num_sequences
                              << "), or train on a larger data set");
  });

  // Which sequences this rank owns for the whole run, then only those are read.
  const std::vector<int64_t> lengths = train_info.lengths();
  const Schedule schedule(lengths, ctx.size, cfg.batch_per_rank, cfg.seed, parse_schedule_kind(cfg.schedule));
  const int64_t steps_per_epoch = schedule.steps_per_epoch();
  const int64_t total_steps = cfg.epochs * steps_per_epoch;
  const ModelShape shape{train_info.num_features, cfg.hidden, cfg.layers, train_info.num_outputs, train_info.task};

  // Resume: every rank reads the checkpoint and checks that it continues this run (the same verdict everywhere).
  const bool resuming = !cfg.resume.empty();
  std::string resume_path;
  Checkpoint from;
  ResumePlan plan;
  if (resuming) {
    collective_phase(ctx, [&] {
      resume_path = resolve_resume_path(cfg.resume);
      from = read_checkpoint(resume_path);
      ResumeTarget target;
      target.shape = shape;
      target.world_size = ctx.size;
      target.batch_per_rank = cfg.batch_per_rank;
      target.steps_per_epoch = steps_per_epoch;
      target.epochs = cfg.epochs;
      target.seed = cfg.seed;
      target.schedule = cfg.schedule;
      target.data_sequences = train_info.num_sequences;
      target.data_lengths_crc32 = lengths_crc32(lengths);
      target.effective_config = cfg.effective;
      plan = plan_resume(resume_path, from, target);
      USER_CHECK(!from.opt_m.empty(), "checkpoint '" << resume_path << "' holds no optimizer state",
                 "the file is damaged; resume from another checkpoint");
      USER_CHECK(!cfg.normalize || !from.feature_mean.empty(),
                 "checkpoint '" << resume_path << "' holds no normalization, this run has --normalize",
                 "resume with the options of the run that wrote it");
      if (ctx.is_root() && !plan.finished) check_no_newer_checkpoints(cfg.out, plan.step);
    });
    if (talk) {
      std::printf("%s\n", plan.message.c_str());
      std::fflush(stdout);
    }
    if (plan.finished) {
      if (talk)
        std::printf("# nothing to train: the checkpoint is at the last step of --epochs %lld; raise --epochs to go on\n",
                    static_cast<long long>(cfg.epochs));
      return kExitOk;
    }
  }

  if (!resuming)
    collective_phase(ctx, [&] {
      if (ctx.is_root()) check_no_newer_checkpoints(cfg.out, -1);
    });

  Shard train, val;
  collective_phase(ctx, [&] { train = read_shard(train_info, schedule.rank_sequences(ctx.rank), ctx.world, budget); });
  if (has_val)
    collective_phase(ctx, [&] {
      val = read_shard(val_info, block_indices(val_info.num_sequences, ctx.size, ctx.rank), ctx.world, budget);
    });
  run.io_s += io.seconds();

  // Standardisation uses training statistics only, over every rank's shard, so validation stays held out. A
  // resumed run keeps the statistics the model was trained with.
  FeatureScaling scaling;
  if (cfg.normalize) {
    scaling = resuming ? FeatureScaling{from.feature_mean, from.feature_std} : compute_scaling(train, ctx.world);
    apply_scaling(scaling, train);
    apply_scaling(scaling, val);
  }

  const ParamLayout layout(shape);
  BackendOptions bopts;
  bopts.device = cfg.device;
  bopts.lstm = cfg.lstm;
  bopts.optimizer = optimizer_config(cfg);
  bopts.comm = ctx.world;
  bopts.local_rank = ctx.local_rank;
  bopts.watchdog = &watchdog;
  std::unique_ptr<Backend> backend;
  collective_phase(ctx, [&] { backend = make_backend(shape, bopts); });
  if (resuming) {
    backend->set_params(from.params);
    backend->set_optimizer_state(from.opt_m, from.opt_v, from.optimizer_steps);
  } else if (!cfg.init_from.empty()) {
    // Weights from elsewhere (e.g. PyTorch via tools/torch_interop.py); --resume, which restores the whole run,
    // takes precedence over it.
    Checkpoint init;
    collective_phase(ctx, [&] {
      init = read_checkpoint(cfg.init_from);
      USER_CHECK(init.shape == shape,
                 "--init-from '" << cfg.init_from << "' holds a model with input " << init.shape.input_size
                                 << ", hidden " << init.shape.hidden << ", layers " << init.shape.layers << ", outputs "
                                 << init.shape.outputs << "; this run needs input " << shape.input_size << ", hidden "
                                 << shape.hidden << ", layers " << shape.layers << ", outputs " << shape.outputs,
                 "match --hidden/--layers to the checkpoint, or train from scratch");
    });
    backend->set_params(init.params);
  } else {
    backend->set_params(init_params(layout, cfg.seed));
  }
  // Output folder only once the inputs (data, checkpoints, --init-from) and the backend are known to be good:
  // a bad input leaves nothing behind. A resumed run appends to the folder's metrics.jsonl, without the records
  // of steps it is about to redo.
  JsonlWriter log;
  std::ofstream order_csv;   // --write-order: epoch,step,slot,sequence of every trained slot (rank 0)
  collective_phase(ctx, [&] {
    if (!ctx.is_root()) return;
    ensure_output_dir(cfg.out);
    const std::string path = cfg.out + "/metrics.jsonl";
    if (cfg.write_order) {
      order_csv.open(cfg.out + "/order.csv", resuming ? std::ios::app : std::ios::trunc);
      USER_CHECK(order_csv.good(), "cannot create '" << cfg.out << "/order.csv'", "choose a writable --out folder");
      if (!resuming) order_csv << "epoch,step,slot,sequence\n";
    }
    if (!resuming) {
      log.open(path);
      return;
    }
    const int64_t dropped = keep_records_through_step(path, plan.step);
    log.open(path, /*append=*/true);
    log.write(Json{{"event", "resume"},
                   {"step", plan.step},
                   {"epoch", plan.epoch + 1},
                   {"checkpoint", resume_path},
                   {"checkpoint_world_size", from.position.world_size},
                   {"checkpoint_batch_per_rank", from.position.batch_per_rank},
                   {"world_size", ctx.size},
                   {"batch_per_rank", cfg.batch_per_rank},
                   {"dropped_records", dropped},
                   {"time", utc_now()}});
  });

  backend->set_train_shard(train);

  const ShardIndex index(train);

  LrSchedule lr_schedule{cfg.lr, cfg.warmup_steps, cfg.lr_decay, cfg.lr_final_fraction, total_steps};
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

  // Running sums; a resumed run starts from the checkpoint's, so its records equal an uninterrupted run's.
  int64_t step = resuming ? plan.step : 0;
  TrainAccumulators acc = resuming ? from.accumulators : TrainAccumulators{};
  double last_train_loss = 0, last_train_acc = 0;
  EvalTotals last_val;
  RankCounters interval;
  Stopwatch interval_clock, epoch_clock;
  Stopwatch since_checkpoint;   // rank 0's clock for --checkpoint-minutes
  std::vector<int64_t> positions(static_cast<size_t>(cfg.batch_per_rank));
  Schedule::Epoch order;
  int64_t order_epoch = -1;

  // Everything a checkpoint holds at the current step boundary (rank 0 only: other ranks hold the same).
  auto snapshot = [&](bool complete) {
    Checkpoint c;
    c.shape = shape;
    c.params = backend->params();
    c.class_names = train_info.class_names;
    c.epoch = step / steps_per_epoch;
    c.step = step;
    c.config = cfg.effective;
    c.optimizer = cfg.optimizer;
    Optimizer& opt = backend->optimizer();
    c.optimizer_steps = opt.steps_taken();
    c.opt_m = opt.m();
    c.opt_v = opt.v();
    c.feature_mean = scaling.mean;
    c.feature_std = scaling.std;
    c.resumable = true;
    c.position.steps_per_epoch = steps_per_epoch;
    c.position.global_batch = schedule.global_batch();
    c.position.world_size = ctx.size;
    c.position.batch_per_rank = cfg.batch_per_rank;
    c.position.epochs = cfg.epochs;
    c.position.seed = cfg.seed;
    c.position.schedule = cfg.schedule;
    c.position.data_sequences = train_info.num_sequences;
    c.position.data_lengths_crc32 = lengths_crc32(lengths);
    c.position.complete = complete;
    c.accumulators = acc;
    return c;
  };
  // Collective: rank 0 writes, every rank learns whether it worked (a full disk stops all ranks with code 2).
  int64_t saved_step = resuming ? plan.step : -1;
  std::string saved_path = resuming ? resume_path : "";
  auto save = [&](const char* reason, bool complete) {
    Stopwatch t;
    collective_phase(ctx, [&] {
      if (!ctx.is_root()) return;
      try {
        saved_path = save_checkpoint(cfg.out, snapshot(complete), cfg.keep);
      } catch (const UserError& e) {   // a full disk: say which checkpoint survives and how to go on from it
        throw UserError(e.what(), e.hint() + (saved_step >= 0 ? "; the last complete one is " + saved_path +
                                                                    " (step " + std::to_string(saved_step) +
                                                                    "): continue it with --resume " + cfg.out
                                                              : std::string()));
      }
      log.write(Json{{"event", "checkpoint"}, {"step", step}, {"reason", reason}, {"path", saved_path},
                     {"seconds", t.seconds()}});
    });
    saved_step = step;
    since_checkpoint.restart();
    run.io_s += t.seconds();
  };

  // A bar with rate and ETA on a terminal; one plain line per --log-every interval in a log file (rank 0 only).
  Progress progress(stdout, talk ? progress_mode_for(stdout, cfg.quiet, cfg.verbose) : ProgressMode::Off,
                    total_steps, "step", step);
  // A NaN/Inf in the summed loss or gradient (StepTotals::finite, the same on every rank; the update was not
  // applied): find the rank and sequence, record it, then stop every rank with exit code 2 and the last good
  // checkpoint untouched (--on-nonfinite stop), or count the step as skipped and go on (skip).
  bool warned_skip = false;
  auto on_nonfinite = [&](const StepTotals& tot) {
    const NonfiniteStep bad = locate_nonfinite(ctx, *backend, positions, train, tot, step + 1);
    const std::string what = describe(bad, cfg.data);
    const bool stop = cfg.on_nonfinite == "stop";
    if (ctx.is_root())
      log.write(Json{{"event", "nonfinite"}, {"step", bad.step}, {"rank", bad.rank}, {"sequence", bad.sequence},
                     {"what", bad.what()}, {"action", stop ? "stop" : "skip"}, {"time", utc_now()}});
    if (stop) {
      progress.finish();
      const bool have_good = saved_step >= 0;
      const std::string good = resuming && saved_step == plan.step ? resume_path
                                                                     : cfg.out + "/" + kLatestCheckpointName;
      collective_phase(ctx, [&] {
        if (ctx.rank != std::max(bad.rank, 0)) return;   // the guilty rank reports (rank 0 if none is alone)
        throw UserError(
            what + "; the run stopped before applying it, on every rank",
            RT_MSG("lower --lr, set --clip (e.g. --clip 1), or check the data"
                   << (bad.rank >= 0 ? RT_MSG(" (sequence " << bad.sequence << ": extreme features or targets?)")
                                     : std::string())
                   << "; --on-nonfinite skip drops such steps instead. "
                   << (have_good ? RT_MSG("The last good checkpoint, " << good << " (step " << saved_step
                                                                       << "), is kept: --init-from " << good
                                                                       << " starts a new run from its weights")
                                 : std::string("No checkpoint was written before this step"))));
      });
    }
    acc.skipped_steps += 1;
    if (ctx.is_root() && !warned_skip) {
      std::fprintf(stderr, "ragtrain: warning: %s: step skipped on every rank (--on-nonfinite skip); further skipped "
                           "steps are counted in metrics.jsonl and summary.json without a warning\n", what.c_str());
      std::fflush(stderr);
    }
    warned_skip = true;
  };
  watchdog.arm();   // set-up is done: from here on no rank waits on another longer than --comm-timeout
  while (step < total_steps) {
    const int64_t epoch = step / steps_per_epoch, s = step % steps_per_epoch;
    watchdog.set_step(step + 1);
    if (epoch != order_epoch) {
      order = schedule.epoch(epoch);
      order_epoch = epoch;
    }
    if (order_csv.is_open()) {
      const std::vector<int64_t> slots = order.global_batch(s);
      for (size_t j = 0; j < slots.size(); ++j)
        if (slots[j] >= 0) order_csv << epoch << ',' << s << ',' << j << ',' << slots[j] << '\n';
    }
    if (s == 0) {
      acc.epoch_loss_sum = acc.epoch_count = acc.epoch_correct = acc.epoch_imbalance_sum = 0;
      epoch_clock.restart();
    }
    index.positions(order, s, ctx.rank, positions, interval);
    const float lr = static_cast<float>(lr_schedule.at(step));
    const StepTotals tot = train_step(*backend, positions, lr, interval);
    if (!tot.finite) on_nonfinite(tot);   // stops the run, or counts the skipped step
    ++step;
    progress.tick(step);

    if (tot.finite) {   // a skipped step adds nothing: its loss is NaN or Inf
      acc.epoch_loss_sum += tot.loss_sum;
      acc.epoch_count += tot.count;
      acc.epoch_correct += tot.correct;
      acc.interval_loss_sum += tot.loss_sum;
      acc.interval_count += tot.count;
    }
    // Length imbalance 1 - mean/max of per-rank timesteps: a pure function of the schedule, so rank 0
    // computes it for every step without communication.
    if (ctx.is_root()) {
      const double imbalance = step_imbalance(order, s, schedule, lengths);
      acc.interval_imbalance_sum += imbalance;
      acc.epoch_imbalance_sum += imbalance;
      acc.run_imbalance_sum += imbalance;
    }
    acc.interval_steps += 1;

    const bool last = s + 1 == steps_per_epoch;
    if (step % cfg.log_every == 0 || last) {
      const double secs = interval_clock.seconds();
      const std::vector<RankCounters> all = gather_counters(ctx, interval);
      const double loss = acc.interval_loss_sum / acc.interval_count;   // NaN (null in JSON) if all were skipped
      if (acc.first_loss < 0 && acc.interval_count > 0) acc.first_loss = loss;
      if (ctx.is_root()) {
        RankCounters sum;
        for (const auto& r : all) sum += r;
        Json rec{{"event", "step"},          {"epoch", epoch + 1},
                 {"step", step},             {"lr", lr},
                 {"loss", loss},             {"grad_norm", tot.grad_norm},
                 {"length_imbalance", acc.interval_imbalance_sum / acc.interval_steps},
                 {"comm_wait_fraction", spread_fraction(all)},
                 {"sequences", sum.sequences}, {"timesteps", sum.timesteps},
                 {"seconds", secs},          {"sequences_per_second", sum.sequences / secs},
                 {"timesteps_per_second", sum.timesteps / secs},
                 {"compute_s", spread(all, &RankCounters::compute_s)},
                 {"comm_s", spread(all, &RankCounters::comm_s)},
                 {"skipped_steps", static_cast<int64_t>(acc.skipped_steps)}};
        log.write(rec);
        char status[200];
        std::snprintf(status, sizeof status, "epoch %lld/%lld  step %lld/%lld  loss %.4f  lr %.2e  %s",
                      static_cast<long long>(epoch + 1), static_cast<long long>(cfg.epochs),
                      static_cast<long long>(s + 1), static_cast<long long>(steps_per_epoch), loss, lr,
                      with_unit(sum.sequences / secs, "seq/s").c_str());
        progress.report(step, status);
      }
      run += interval;
      interval = RankCounters{};
      acc.interval_loss_sum = acc.interval_count = acc.interval_imbalance_sum = acc.interval_steps = 0;
      interval_clock.restart();
    }

    if (last) {
      last_train_loss = acc.epoch_loss_sum / acc.epoch_count;
      last_train_acc = acc.epoch_correct / acc.epoch_count;
      Json rec{{"event", "epoch"},
               {"epoch", epoch + 1},
               {"step", step},
               {"train_loss", last_train_loss},
               {"length_imbalance", acc.epoch_imbalance_sum / static_cast<double>(steps_per_epoch)},
               {"seconds", epoch_clock.seconds()}};
      if (shape.task == Task::Classification) rec["train_accuracy"] = last_train_acc;
      if (has_val) {
        Stopwatch t;
        last_val = allreduce(score(val, backend->infer(val)), ctx);
        run.compute_s += t.seconds();
        rec["val_loss"] = last_val.loss();
        if (shape.task == Task::Classification)
          rec["val_accuracy"] = last_val.accuracy();
        else
          rec["val_mae"] = last_val.mae();
      }
      if (ctx.is_root()) {
        log.write(rec);
        std::ostringstream line;
        line << std::fixed << std::setprecision(4) << "epoch " << epoch + 1 << "/" << cfg.epochs
             << " done: train loss " << last_train_loss;
        if (shape.task == Task::Classification) line << " acc " << last_train_acc;
        if (has_val) {
          line << "  val loss " << last_val.loss();
          if (shape.task == Task::Classification) line << " acc " << last_val.accuracy();
        }
        line << "  (" << human_duration(epoch_clock.seconds()) << ")";
        progress.println(line.str());
      }
      interval_clock.restart();   // validation is not training: keep it out of the next interval's throughput
    }

    // Step boundary: every --signal-check-every steps all ranks decide together whether to stop and whether
    // rank 0's clock asks for a checkpoint (one tiny all-reduce; doc/hpc.md has its cost). --checkpoint-every
    // needs no agreement: every rank counts the same steps. The last step needs neither: the run ends anyway.
    if (step == total_steps) break;
    StepAgreement agreed;
    if (step % cfg.signal_check_every == 0) {
      const bool clock_due = cfg.checkpoint_minutes > 0 && since_checkpoint.seconds() >= 60.0 * cfg.checkpoint_minutes;
      agreed = agree_at_step_boundary(ctx, clock_due);
    }
    const bool every_due = cfg.checkpoint_every > 0 && step % cfg.checkpoint_every == 0;
    if (agreed.stop_signal != 0 || agreed.timed_checkpoint || every_due)
      save(agreed.stop_signal ? "signal" : every_due ? "every" : "minutes", false);
    if (agreed.stop_signal != 0) {
      progress.finish();
      collective_phase(ctx, [&] {
        if (!ctx.is_root()) return;
        log.write(Json{{"event", "stop"}, {"step", step}, {"signal", signal_name(agreed.stop_signal)},
                       {"checkpoint", saved_path}, {"time", utc_now()}});
        std::printf("# stopped by %s at step %lld of %lld: checkpoint %s; continue with --resume %s (exit code %d)\n",
                    signal_name(agreed.stop_signal), static_cast<long long>(step),
                    static_cast<long long>(total_steps), saved_path.c_str(), cfg.out.c_str(), kExitCheckpointed);
        std::fflush(stdout);
      });
      return kExitCheckpointed;
    }
  }

  progress.finish();
  // Final record: every rank holds identical parameters (checked below), rank 0 writes them.
  if (saved_step != step) save("end", true);

  const double wall_s = wall.seconds();
  const std::vector<RankCounters> all = gather_counters(ctx, run);
  const Json provenance = collect_provenance(ctx, cfg, backend->name(), started_at);
  const Json validity = check_validity(ctx, backend->params(), acc.first_loss, last_train_loss);
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
    summary["valid"] = validity["valid"];
    summary["validity"] = validity;
    summary["sequences_per_second"] = sum.sequences / wall_s;
    summary["timesteps_per_second"] = sum.timesteps / wall_s;
    summary["schedule"] = cfg.schedule;
    summary["length_imbalance"] = step > 0 ? acc.run_imbalance_sum / static_cast<double>(step) : 0.0;
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
    // Per rank, for the compute/wait plot; timings, throughput and wall time cover this invocation only.
    Json per_rank = Json::array();
    for (size_t r = 0; r < all.size(); ++r)
      per_rank.push_back(Json{{"rank", r},
                              {"host", provenance["layout"]["ranks"][r]["host"]},
                              {"compute_s", all[r].compute_s},
                              {"comm_s", all[r].comm_s},
                              {"io_s", all[r].io_s},
                              {"sequences", all[r].sequences},
                              {"timesteps", all[r].timesteps}});
    summary["per_rank"] = per_rank;
    summary["checkpoint"] = saved_path;
    summary["skipped_steps"] = static_cast<int64_t>(acc.skipped_steps);   // --on-nonfinite skip
    if (resuming)
      summary["resumed_from"] = Json{{"checkpoint", resume_path},
                                     {"step", plan.step},
                                     {"world_size", from.position.world_size},
                                     {"batch_per_rank", from.position.batch_per_rank}};
    summary["config"] = cfg.effective;
    summary["provenance"] = provenance;
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
      std::printf("# validity: %s (loss finite %s, falling %s, ranks agree %s)\n",
                  validity["valid"].get<bool>() ? "OK" : "FAILED", validity["loss_finite"].get<bool>() ? "yes" : "no",
                  validity["loss_falling"].get<bool>() ? "yes" : "no", validity["ranks_agree"].get<bool>() ? "yes" : "no");
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
