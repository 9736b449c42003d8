// The Trainer's loop phases: step, log, validate, checkpoint, and the ways a run ends (last step, stop signal,
// non-finite step).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>
#include <utility>

#include "ragtrain/checkpoint/rotation.hpp"
#include "ragtrain/comm/signals.hpp"
#include "ragtrain/comm/watchdog.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/metrics/provenance.hpp"
#include "ragtrain/metrics/units.hpp"
#include "ragtrain/schedule/schedule_stats.hpp"
#include "ragtrain/train/nonfinite.hpp"
#include "ragtrain/train/trainer.hpp"

namespace ragtrain {

StepTotals Trainer::step(RankCounters& counters) {
  const int64_t epoch = step_ / steps_per_epoch(), s = step_ % steps_per_epoch();
  const Stopwatch data_wait;   // until this step's sequences are at hand
  {
    PhaseScope phase(&timeline_, Phase::Read, step_ + 1);
    if (epoch != order_epoch_) {
      prev_order_ = std::move(order_);   // for the repeat fraction of this epoch's record
      prev_order_epoch_ = order_epoch_;
      order_ = next_order_epoch_ == epoch ? std::move(next_order_) : schedule_->epoch(epoch);
      order_epoch_ = epoch;
      next_order_epoch_ = -1;
    }
    if (window_ && !window_->covers(step_)) {
      // Every rank reaches the same window boundary at the same step: one agreement on the reads' outcome, so a
      // truncated or unreadable file stops every rank together (exit 2), with the last checkpoint untouched.
      // Every rank at this same step: the whole shard from here on (or, on a device that cannot hold it, the
      // windows gathered from it).
      if (early_ && load_done_everywhere()) become_resident(true);
      if (window_ && !window_->covers(step_)) {   // (a device window opened afresh at the switch covers it)
        collective_phase(ctx_, [&] { window_->advance(step_); });   // with a device window, the switch is in there
        if (!window_->on_device()) backend_->set_train_shard(window_->shard());
        index_ = std::make_unique<ShardIndex>(window_->shard());
      }
    }
    if (records_.order_csv.is_open()) {
      const std::vector<int64_t> slots = order_.global_batch(s);
      for (size_t j = 0; j < slots.size(); ++j)
        if (slots[j] >= 0) records_.order_csv << epoch << ',' << s << ',' << j << ',' << slots[j] << '\n';
    }
    index_->positions(order_, s, ctx_.rank, positions_, counters);
  }
  counters.io_wait_s += data_wait.seconds();
  const float lr = static_cast<float>(cfg_.lr.at(step_));
  backend_->set_global_step(step_);   // keys the dropout masks
  // While the GPU computes: at the epoch's last step the next epoch's order (a pure function of the schedule, so
  // every rank gets the same); then the next step's sequences, so that the backend can launch that step as soon as
  // this one's update is queued (Backend::prepare_next; if the run stops or does something else first, the backend
  // discards it).
  const bool last_of_epoch = s + 1 == steps_per_epoch();
  auto ahead = [&] {
    if (last_of_epoch) {
      next_order_ = schedule_->epoch(epoch + 1);
      next_order_epoch_ = epoch + 1;
    }
    if (window_ && !window_->covers(step_ + 1)) return;   // the next step is in the next window: nothing to launch
    RankCounters not_counted;   // the next step counts its sequences when it runs
    index_->positions(last_of_epoch ? next_order_ : order_, (s + 1) % steps_per_epoch(), ctx_.rank, next_positions_,
                      not_counted);
    backend_->prepare_next(next_positions_);
  };
  const StepTotals tot = train_step(*backend_, positions_, lr, counters, &timeline_, step_ + 1, ahead);
  ++step_;
  return tot;
}

int Trainer::run() {
  // A bar with rate and ETA on a terminal; one plain line per --log-every interval in a log file (rank 0 only).
  progress_ = std::make_unique<Progress>(
      stdout, talk_ ? progress_mode_for(stdout, cfg_.talk.quiet, cfg_.talk.verbose) : ProgressMode::Off, total_steps_,
      "step", step_);
  if (watchdog_) watchdog_->arm();   // set-up is done: from here on no rank waits on another longer than --comm-timeout
  epoch_clock_.restart();            // a resumed run's first (partial) epoch: its time without the set-up
  restart_interval_clock();
  while (step_ < total_steps_) {
    const int64_t s = step_ % steps_per_epoch();
    if (watchdog_) watchdog_->set_step(step_ + 1);
    if (s == 0) {
      acc_.epoch_loss_sum = acc_.epoch_count = acc_.epoch_correct = acc_.epoch_imbalance_sum = 0;
      epoch_clock_.restart();
      epoch_sequences_ = epoch_val_s_ = 0;
    }
    const float lr = static_cast<float>(cfg_.lr.at(step_));
    const StepTotals tot = step(interval_);   // step_ now counts it
    if (first_step_s_ < 0) first_step_s_ = wall_.seconds();   // the update's result is on the host: the step is done
    if (!tot.finite) handle_nonfinite(tot);   // stops the run, or counts the skipped step
    progress_->tick(step_);

    if (tot.finite) {   // a skipped step adds nothing: its loss is NaN or Inf
      acc_.epoch_loss_sum += tot.loss_sum;
      acc_.epoch_count += tot.count;
      epoch_sequences_ += tot.count;
      acc_.epoch_correct += tot.correct;
      acc_.interval_loss_sum += tot.loss_sum;
      acc_.interval_count += tot.count;
    }
    // Length imbalance 1 - mean/max of per-rank timesteps: a pure function of the schedule, so rank 0
    // computes it for every step without communication.
    if (ctx_.is_root()) {
      const double imbalance = step_imbalance(order_, s, *schedule_, lengths_);
      acc_.interval_imbalance_sum += imbalance;
      acc_.epoch_imbalance_sum += imbalance;
      acc_.run_imbalance_sum += imbalance;
    }
    acc_.interval_steps += 1;
    check_first_epoch();   // stored statistics against a streamed shard's first epoch, before its records

    const bool last_of_epoch = s + 1 == steps_per_epoch();
    if (step_ % cfg_.records.log_every == 0 || last_of_epoch) log_interval(tot, lr);
    // Validation after every epoch and every --val-every steps: a function of the step count, so every rank
    // validates at the same steps; each may keep a new best.h5 and decide an early stop (the same everywhere).
    const bool every_val = cfg_.validation.every > 0 && step_ % cfg_.validation.every == 0;
    if (!cfg_.validation.data.empty() && (last_of_epoch || every_val)) validate(last_of_epoch);
    if (last_of_epoch) end_epoch();
    if (early_stopped_) break;

    // Step boundary: every --signal-check-every steps all ranks decide together whether to stop and whether
    // rank 0's clock asks for a checkpoint (one tiny all-reduce; doc/hpc.md has its cost). --checkpoint-every
    // needs no agreement: every rank counts the same steps. The last step needs neither: the run ends anyway.
    if (step_ == total_steps_) break;
    StepAgreement agreed;
    if (step_ % cfg_.records.signal_check_every == 0) {
      const bool clock_due =
          cfg_.records.checkpoint_minutes > 0 && since_checkpoint_.seconds() >= 60.0 * cfg_.records.checkpoint_minutes;
      PhaseScope phase(&timeline_, Phase::Agree, step_);
      agreed = agree_at_step_boundary(ctx_, clock_due);
    }
    const bool every_due = cfg_.records.checkpoint_every > 0 && step_ % cfg_.records.checkpoint_every == 0;
    if (agreed.stop_signal != 0 || agreed.timed_checkpoint || every_due)
      checkpoint(agreed.stop_signal ? "signal" : every_due ? "every" : "minutes", false);
    if (agreed.stop_signal != 0) return stop_for_signal(agreed.stop_signal);
  }
  return finish();
}

void Trainer::log_interval(const StepTotals& tot, float lr) {
  const int64_t epoch = (step_ - 1) / steps_per_epoch(), s = (step_ - 1) % steps_per_epoch();
  const double secs = interval_clock_.seconds() - interval_val_s_;
  PhaseScope phase(&timeline_, Phase::Log, step_);
  const std::vector<RankCounters> all = gather_counters(ctx_, interval_);
  const double loss = acc_.interval_loss_sum / acc_.interval_count;   // NaN (null in JSON) if all were skipped
  if (acc_.first_loss < 0 && acc_.interval_count > 0) acc_.first_loss = loss;
  if (ctx_.is_root()) {
    RankCounters sum;
    for (const auto& r : all) sum += r;
    Json rec{{"event", "step"},          {"epoch", epoch + 1},
             {"step", step_},            {"lr", lr},
             {"loss", loss},             {"grad_norm", tot.grad_norm},
             {"length_imbalance", acc_.interval_imbalance_sum / acc_.interval_steps},
             {"comm_wait_fraction", spread_fraction(all)},
             {"sequences", sum.sequences}, {"timesteps", sum.timesteps},
             {"seconds", secs},          {"sequences_per_second", sum.sequences / secs},
             {"timesteps_per_second", sum.timesteps / secs},
             {"compute_s", spread(all, &RankCounters::compute_s)},
             {"comm_s", spread(all, &RankCounters::comm_s)},
             {"io_wait_s", spread(all, &RankCounters::io_wait_s)},
             {"skipped_steps", static_cast<int64_t>(acc_.skipped_steps)}};
    records_.log.write(rec);
    // The slowest rank's wait for data, shown once it is worth a look (>= 1% of the interval).
    double io_wait = 0;
    for (const auto& r : all) io_wait = std::max(io_wait, r.io_wait_s);
    const std::string wait_text = secs > 0 && io_wait >= 0.01 * secs ? RT_MSG("  io wait " << std::fixed << std::setprecision(0)
                                                                                  << 100.0 * io_wait / secs << "%")
                                                                     : std::string();
    char status[240];
    std::snprintf(status, sizeof status, "epoch %lld/%lld  step %lld/%lld  loss %.4f  lr %.2e  %s%s",
                  static_cast<long long>(epoch + 1), static_cast<long long>(cfg_.schedule.epochs),
                  static_cast<long long>(s + 1), static_cast<long long>(steps_per_epoch()), loss, lr,
                  with_unit(sum.sequences / secs, "seq/s").c_str(), wait_text.c_str());
    progress_->report(step_, status);
  }
  run_ += interval_;
  interval_ = RankCounters{};
  acc_.interval_loss_sum = acc_.interval_count = acc_.interval_imbalance_sum = acc_.interval_steps = 0;
  restart_interval_clock();
}

void Trainer::validate(bool at_epoch_end) {
  Stopwatch t;
  {
    PhaseScope phase(&timeline_, Phase::Validation, step_);
    last_val_ = allreduce(score(val_, backend_->infer(val_)), ctx_);
  }
  run_.compute_s += t.seconds();
  if (!at_epoch_end && ctx_.is_root()) {   // the epoch record carries the numbers of an epoch's end
    Json rec{{"event", "validation"}, {"epoch", (step_ - 1) / steps_per_epoch() + 1}, {"step", step_},
             {"val_loss", last_val_.loss()}};
    if (classification())
      rec["val_accuracy"] = last_val_.accuracy();
    else
      rec["val_mae"] = last_val_.mae();
    records_.log.write(rec);
  }
  keep_if_best();
  epoch_val_s_ += t.seconds();
  interval_val_s_ += t.seconds();   // validation is not training: keep it out of the interval's throughput
}

SelectMetric Trainer::select_metric() const {
  if (cfg_.validation.select) return *cfg_.validation.select;
  return classification() ? SelectMetric::ValAccuracy : SelectMetric::ValLoss;
}

void Trainer::keep_if_best() {
  const double loss = last_val_.loss(), acc = classification() ? last_val_.accuracy() : 0.0;
  bool better = false;
  if (!std::isfinite(loss))
    better = false;   // a diverged model is never the one to keep
  else if (best_.step < 0)
    better = true;
  else if (select_metric() == SelectMetric::ValLoss)
    better = loss < best_.val_loss;
  else   // accuracy moves in steps of 1/N: a tie goes to the lower loss
    better = acc > best_.val_accuracy || (acc == best_.val_accuracy && loss < best_.val_loss);
  if (!better) {
    ++best_.validations_since;
    if (cfg_.validation.early_stop > 0 && best_.validations_since >= cfg_.validation.early_stop) early_stopped_ = true;
    return;
  }
  best_ = BestSoFar{step_, (step_ - 1) / steps_per_epoch() + 1, loss, acc, 0};
  // Collective like checkpoint(): rank 0 writes (temporary file, fsync, rename: a reader never sees half a
  // best.h5), every rank learns whether it worked. The same writer and contents as checkpoint.h5, best included.
  Stopwatch t;
  PhaseScope phase(&timeline_, Phase::Checkpoint, step_);
  collective_phase(ctx_, [&] {
    if (!ctx_.is_root()) return;
    write_checkpoint(best_path(), make_checkpoint(false));
    Json rec{{"event", "best"}, {"epoch", best_.epoch}, {"step", best_.step}, {"select", select_metric_name(select_metric())},
             {"val_loss", loss}, {"path", best_path()}, {"seconds", t.seconds()}};
    if (classification()) rec["val_accuracy"] = acc;
    records_.log.write(rec);
  });
  best_file_ = best_path();
  run_.io_s += t.seconds();
}

void Trainer::end_epoch() {
  const int64_t epoch = step_ / steps_per_epoch();   // 1-based: the epoch just completed
  last_train_loss_ = acc_.epoch_loss_sum / acc_.epoch_count;
  last_train_acc_ = acc_.epoch_correct / acc_.epoch_count;
  // The epoch's training throughput: its sequences over its time without validation.
  const double epoch_s = epoch_clock_.seconds(), train_s = epoch_s - epoch_val_s_;
  Json rec{{"event", "epoch"},
           {"epoch", epoch},
           {"step", step_},
           {"train_loss", last_train_loss_},
           {"length_imbalance", acc_.epoch_imbalance_sum / static_cast<double>(steps_per_epoch())},
           {"lr", cfg_.lr.at(step_ - 1)},
           {"sequences_per_second", train_s > 0 ? epoch_sequences_ / train_s : 0.0},
           {"seconds", epoch_s}};
  if (classification()) rec["train_accuracy"] = last_train_acc_;
  const bool has_val = !cfg_.validation.data.empty();
  if (has_val) {
    rec["val_loss"] = last_val_.loss();
    if (classification())
      rec["val_accuracy"] = last_val_.accuracy();
    else
      rec["val_mae"] = last_val_.mae();
  }
  if (ctx_.is_root()) {
    // Share of this epoch's global batches the previous epoch also trained (schedule_stats.hpp); null if none.
    // From the two orders the trainer holds (not rebuilt) unless the run resumed within this epoch.
    const double repeat = epoch >= 2 && order_epoch_ == epoch - 1 && prev_order_epoch_ == epoch - 2
                              ? batch_repeat_fraction(*schedule_, prev_order_, order_)
                              : batch_repeat_fraction(*schedule_, epoch - 1);
    rec["batch_repeat_fraction"] = std::isnan(repeat) ? Json(nullptr) : Json(repeat);
    records_.log.write(rec);
    std::ostringstream line;
    line << std::fixed << std::setprecision(4) << "epoch " << epoch << "/" << cfg_.schedule.epochs
         << " done: train loss " << last_train_loss_;
    if (classification()) line << " acc " << last_train_acc_;
    if (has_val) {
      line << "  val loss " << last_val_.loss();
      if (classification()) line << " acc " << last_val_.accuracy();
    }
    line << "  (" << human_duration(epoch_clock_.seconds()) << ")";
    progress_->println(line.str());
  }
  restart_interval_clock();
}

void Trainer::checkpoint(const char* reason, bool complete) {
  // Collective: rank 0 writes, every rank learns whether it worked (a full disk stops all ranks with code 2).
  Stopwatch t;
  PhaseScope phase(&timeline_, Phase::Checkpoint, step_);
  collective_phase(ctx_, [&] {
    if (!ctx_.is_root()) return;
    try {
      saved_path_ = save_checkpoint(cfg_.out, make_checkpoint(complete), cfg_.records.keep);
    } catch (const UserError& e) {   // a full disk: say which checkpoint survives and how to go on from it
      throw UserError(e.what(), e.hint() + (saved_step_ >= 0 ? "; the last complete one is " + saved_path_ +
                                                                   " (step " + std::to_string(saved_step_) +
                                                                   "): continue it with --resume " + cfg_.out
                                                             : std::string()));
    }
    records_.log.write(Json{{"event", "checkpoint"}, {"step", step_}, {"reason", reason}, {"path", saved_path_},
                            {"seconds", t.seconds()}});
  });
  saved_step_ = step_;
  since_checkpoint_.restart();
  run_.io_s += t.seconds();
}

// A NaN/Inf in the summed loss or gradient (StepTotals::finite, the same on every rank; the update was not
// applied): find the rank and sequence, record it, then stop every rank with exit code 2 and the last good
// checkpoint untouched (--on-nonfinite stop), or count the step as skipped and go on (skip).
void Trainer::handle_nonfinite(const StepTotals& tot) {
  const NonfiniteStep bad = locate_nonfinite(ctx_, *backend_, positions_, train_, tot, step_);   // 1-based
  const std::string what = describe(bad, cfg_.source.data);
  const bool stop = cfg_.faults.on_nonfinite == NonfinitePolicy::Stop;
  if (ctx_.is_root())
    records_.log.write(Json{{"event", "nonfinite"}, {"step", bad.step}, {"rank", bad.rank}, {"sequence", bad.sequence},
                            {"what", bad.what()}, {"action", stop ? "stop" : "skip"}});
  if (stop) {
    stopped_nonfinite_ = true;
    progress_->finish();
    const bool have_good = saved_step_ >= 0;
    const std::string good = resuming_ && saved_step_ == plan_.step ? resume_path_
                                                                     : cfg_.out + "/" + kLatestCheckpointName;
    collective_phase(ctx_, [&] {
      if (ctx_.rank != std::max(bad.rank, 0)) return;   // the guilty rank reports (rank 0 if none is alone)
      throw UserError(
          what + "; the run stopped before applying it, on every rank",
          RT_MSG("lower --lr, set --clip (e.g. --clip 1), or check the data"
                 << (bad.rank >= 0 ? RT_MSG(" (sequence " << bad.sequence << ": extreme features or targets?)")
                                   : std::string())
                 << "; --on-nonfinite skip drops such steps instead. "
                 << (have_good ? RT_MSG("The last good checkpoint, " << good << " (step " << saved_step_
                                                                     << "), is kept: --init-from " << good
                                                                     << " starts a new run from its weights")
                               : std::string("No checkpoint was written before this step"))));
    });
  }
  acc_.skipped_steps += 1;
  if (ctx_.is_root() && !warned_skip_) {
    std::fprintf(stderr, "ragtrain: warning: %s: step skipped on every rank (--on-nonfinite skip); further skipped "
                         "steps are counted in metrics.jsonl and summary.json without a warning\n", what.c_str());
    std::fflush(stderr);
  }
  warned_skip_ = true;
}

int Trainer::stop_for_signal(int signal) {
  progress_->finish();
  collective_phase(ctx_, [&] {
    if (!ctx_.is_root()) return;
    records_.log.write(Json{{"event", "stop"}, {"step", step_}, {"signal", signal_name(signal)},
                            {"checkpoint", saved_path_}});
    std::printf("# stopped by %s at step %lld of %lld: checkpoint %s; continue with --resume %s (exit code %d)\n",
                signal_name(signal), static_cast<long long>(step_), static_cast<long long>(total_steps_),
                saved_path_.c_str(), cfg_.out.c_str(), kExitCheckpointed);
    std::fflush(stdout);
  });
  return kExitCheckpointed;
}

int Trainer::finish() {
  progress_->finish();
  early_stopped_ = early_stopped_ && step_ < total_steps_;   // patience ran out on the last step: a full run
  if (early_stopped_) {
    stop_reason_ = "early_stop";
    if (ctx_.is_root()) {
      records_.log.write(Json{{"event", "early_stop"}, {"step", step_}, {"validations", best_.validations_since},
                              {"best_step", best_.step}, {"best_epoch", best_.epoch}});
      if (!cfg_.talk.quiet) {
        std::printf("# early stop at step %lld of %lld: %lld validations without a better %s; the best model (epoch "
                    "%lld, step %lld) is %s\n",
                    static_cast<long long>(step_), static_cast<long long>(total_steps_),
                    static_cast<long long>(best_.validations_since), select_metric_name(select_metric()),
                    static_cast<long long>(best_.epoch), static_cast<long long>(best_.step),
                    best_file_.empty() ? "in no file at hand" : best_file_.c_str());
        std::fflush(stdout);
      }
    }
  }
  if (early_) become_resident(false);   // the whole shard's checks (stored statistics) run even if no switch came
  // Final record: every rank holds identical parameters (checked by summarize), rank 0 writes them.
  if (saved_step_ != step_) checkpoint(early_stopped_ ? "early_stop" : "end", true);
  return kExitOk;
}

}  // namespace ragtrain
