// The Trainer's last phases: summary.json (rank 0, atomically), the end-of-run table on stdout, the --trace file.
#include <algorithm>
#include <cstdio>
#include <iomanip>

#include "ragtrain/checkpoint/rotation.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/metrics/provenance.hpp"
#include "ragtrain/metrics/trace_file.hpp"
#include "ragtrain/train/trainer.hpp"

namespace ragtrain {

namespace {

// One line of the end-of-run table per rank-spread quantity.
void print_spread_row(const char* name, const Json& s) {
  std::printf("#  %-12s %12.4f %12.4f %12.4f\n", name, s["min"].get<double>(), s["median"].get<double>(),
              s["max"].get<double>());
}

// The per-rank counters as summary.json lists them, for the compute/wait plot.
Json per_rank_json(const std::vector<RankCounters>& all, const Json& provenance) {
  Json per_rank = Json::array();
  for (size_t r = 0; r < all.size(); ++r)
    per_rank.push_back(Json{{"rank", r},
                            {"host", provenance["layout"]["ranks"][r]["host"]},
                            {"compute_s", all[r].compute_s},
                            {"comm_s", all[r].comm_s},
                            {"io_s", all[r].io_s},
                            {"sequences", all[r].sequences},
                            {"timesteps", all[r].timesteps}});
  return per_rank;
}

}  // namespace

// The model kept (best.h5, by --select) beside the model the run ended with (checkpoint.h5).
void Trainer::print_best_and_last() const {
  std::printf("#\n# %-6s %6s %8s %11s %9s  %s\n", "model", "epoch", "step", "val_loss", "val_acc", "file");
  auto row = [&](const char* name, int64_t epoch, int64_t step, double loss, double acc, const std::string& file) {
    char acc_text[32] = "-";
    if (classification()) std::snprintf(acc_text, sizeof acc_text, "%.4f", acc);
    std::printf("# %-6s %6lld %8lld %11.5f %9s  %s\n", name, static_cast<long long>(epoch),
                static_cast<long long>(step), loss, acc_text, file.c_str());
  };
  if (best_.step >= 0)
    row("best", best_.epoch, best_.step, best_.val_loss, best_.val_accuracy, best_file_.empty() ? "-" : best_file_);
  row("last", (step_ - 1) / steps_per_epoch() + 1, step_, last_val_.loss(), last_val_.accuracy(),
      cfg_.out + "/" + kLatestCheckpointName);
}

// The data path's record over all ranks (collective; rank 0's result is complete): bytes read by all ranks, the
// slowest rank's read, the time to the first step, the largest rank's resident memory.
Json Trainer::data_record() const {
  ShardReadStats reads = read_stats_;
  if (window_ && (stream_ || early_)) {   // windows read from the file: the reader's reads too (beside the steps)
    reads.add(window_->stats());
    reads.direct = true;
  }
  double mine[4] = {reads.read_s + reads.check_s, first_step_s_, static_cast<double>(peak_rss_bytes()), shard_wait_s_};
  double most[4] = {0, 0, 0, 0};
  MPI_CHECK(MPI_Reduce(mine, most, 4, MPI_DOUBLE, MPI_MAX, 0, ctx_.world));
  // Where --normalize feature's statistics came from: the checkpoint resumed from, the file's /statistics, or a
  // pass over the training shards.
  const char* statistics = normalizer_.mode != Normalization::Feature ? "none"
                           : resuming_                                ? "checkpoint"
                           : stored_                                  ? "stored"
                                                                      : "computed";
  int64_t bytes = 0;
  MPI_CHECK(MPI_Reduce(&reads.bytes, &bytes, 1, MPI_INT64_T, MPI_SUM, 0, ctx_.world));
  // Rank 0's backend set-up, part by part (GPU context, NCCL, cuDNN's measurement, the auto probe): the part of the
  // time to the first step that does not depend on the data.
  Json setup = Json::object();
  for (const auto& [part, seconds] : backend_->setup_seconds()) setup[part] = seconds;
  return Json{{"read_bytes", bytes},
              {"read_s", most[0]},
              {"read_bytes_per_second", most[0] > 0 ? static_cast<double>(bytes) / most[0] : 0.0},
              {"read_path", reads.direct ? "pread" : cfg_.synthetic ? "synthetic" : "hdf5"},
              {"reader_threads", reads.threads},
              {"streamed", stream_.has_value()},
              {"window_steps", window_steps_},
              {"shard_placement", shard_placement_name(placement_.placement)},
              {"started_streamed", started_streamed_},
              {"resident_from_step", stream_ ? int64_t{-1} : resident_from_step_},
              {"device_window_steps", placement_.on_device ? placement_.steps : int64_t{0}},
              {"device_shard_budget_bytes", device_budget_},
              {"time_to_first_step_s", most[1]},
              {"setup_s", setup},
              {"shard_wait_s", most[3]},
              {"feature_statistics", statistics},
              {"max_rss_bytes", static_cast<int64_t>(most[2])}};
}

void Trainer::summarize() {
  const double wall_s = wall_.seconds();
  const std::vector<RankCounters> all = gather_counters(ctx_, run_);
  const Json data = data_record();
  const Json provenance =
      collect_provenance(ctx_, cfg_.provenance.command_line, cfg_.provenance.effective, backend_->name(), started_at_);
  const Json validity = check_validity(ctx_, backend_->params(), acc_.first_loss, last_train_loss_);
  collective_phase(ctx_, [&] {
    if (!ctx_.is_root()) return;
    RankCounters sum;
    for (const auto& r : all) sum += r;
    const bool has_val = !cfg_.validation.data.empty();
    // The epochs the run reached (an early stop ends before --epochs, the planned number beside it).
    const int64_t epochs_run = (step_ + steps_per_epoch() - 1) / steps_per_epoch();
    Json summary{{"world_size", ctx_.size},
                 {"backend", backend_->name()},
                 {"epochs", epochs_run},
                 {"epochs_planned", cfg_.schedule.epochs},
                 {"steps", step_},
                 {"sequences", train_info_.num_sequences},
                 {"batch_per_rank", cfg_.schedule.batch_per_rank},
                 {"parameters", ParamLayout(shape_).total()},
                 {"train_loss", last_train_loss_}};
    if (classification()) summary["train_accuracy"] = last_train_acc_;
    if (has_val) {
      summary["val_loss"] = last_val_.loss();
      if (classification())
        summary["val_accuracy"] = last_val_.accuracy();
      else
        summary["val_mae"] = last_val_.mae();
    } else {
      summary["val_loss"] = nullptr;
    }
    summary["valid"] = validity["valid"];
    summary["validity"] = validity;
    summary["sequences_per_second"] = sum.sequences / wall_s;
    summary["timesteps_per_second"] = sum.timesteps / wall_s;
    summary["schedule"] = schedule_kind_name(cfg_.schedule.kind);
    summary["length_imbalance"] = step_ > 0 ? acc_.run_imbalance_sum / static_cast<double>(step_) : 0.0;
    double wait = 0;
    for (const auto& r : all) wait += wait_fraction(r);
    summary["comm_wait_fraction"] = wait / static_cast<double>(all.size());
    summary["wall_seconds"] = wall_s;
    // The data path: how fast the shards arrived, how long until training began, the loop's wait for data, memory.
    for (const auto& [key, value] : data.items()) summary[key] = value;
    double io_wait = 0;
    for (const auto& r : all) io_wait = std::max(io_wait, r.io_wait_s);
    summary["io_wait_s"] = io_wait;
    summary["timings"] = Json{{"compute_s", spread(all, &RankCounters::compute_s)},
                              {"comm_s", spread(all, &RankCounters::comm_s)},
                              {"io_s", spread(all, &RankCounters::io_s)},
                              {"io_wait_s", spread(all, &RankCounters::io_wait_s)},
                              {"comm_wait_fraction", spread_fraction(all)},
                              {"sequences", spread(all, &RankCounters::sequences)},
                              {"timesteps", spread(all, &RankCounters::timesteps)}};
    // Per rank, for the compute/wait plot; timings, throughput and wall time cover this invocation only.
    summary["per_rank"] = per_rank_json(all, provenance);
    summary["checkpoint"] = saved_path_;
    // The model a user keeps (--select): where the best validation was, and why the run ended.
    summary["select"] = has_val ? Json(select_metric_name(select_metric())) : Json(nullptr);
    const bool have_best = best_.step >= 0;
    summary["best_epoch"] = have_best ? Json(best_.epoch) : Json(nullptr);
    summary["best_step"] = have_best ? Json(best_.step) : Json(nullptr);
    summary["best_val_loss"] = have_best ? Json(best_.val_loss) : Json(nullptr);
    summary["best_val_accuracy"] = have_best && classification() ? Json(best_.val_accuracy) : Json(nullptr);
    summary["best_checkpoint"] = have_best && !best_file_.empty() ? Json(best_file_) : Json(nullptr);
    summary["stop_reason"] = stop_reason_;
    if (early_stopped_) summary["early_stop"] = Json{{"validations_without_improvement", best_.validations_since},
                                                     {"patience", cfg_.validation.early_stop}};
    summary["skipped_steps"] = static_cast<int64_t>(acc_.skipped_steps);   // --on-nonfinite skip
    if (resuming_)
      summary["resumed_from"] = Json{{"checkpoint", resume_path_},
                                     {"step", plan_.step},
                                     {"world_size", from_.position.world_size},
                                     {"batch_per_rank", from_.position.batch_per_rank}};
    summary["config"] = cfg_.provenance.effective;
    summary["provenance"] = provenance;
    write_json_atomic(cfg_.out + "/summary.json", summary);

    if (!cfg_.talk.quiet) {
      std::printf("#\n# %-10s %8s %6s %7s %11s %11s %9s %10s %13s %9s\n", "result", "ranks", "epochs", "steps",
                  "train_loss", "val_loss", "val_acc", "seq/s", "timesteps/s", "wall_s");
      std::printf("# %-10s %8d %6lld %7lld %11.5f %11s %9s %10.1f %13.1f %9.2f\n", backend_->name().c_str(), ctx_.size,
                  static_cast<long long>(epochs_run), static_cast<long long>(step_), last_train_loss_,
                  has_val ? std::to_string(last_val_.loss()).c_str() : "-",
                  has_val && classification() ? std::to_string(last_val_.accuracy()).c_str() : "-",
                  sum.sequences / wall_s, sum.timesteps / wall_s, wall_s);
      if (has_val) print_best_and_last();
      std::printf("#\n#  %-12s %12s %12s %12s   (seconds per rank)\n", "", "min", "median", "max");
      print_spread_row("compute", summary["timings"]["compute_s"]);
      print_spread_row("comm wait", summary["timings"]["comm_s"]);
      print_spread_row("io", summary["timings"]["io_s"]);
      std::printf("# validity: %s (loss finite %s, falling %s, ranks agree %s)\n",
                  validity["valid"].get<bool>() ? "OK" : "FAILED", validity["loss_finite"].get<bool>() ? "yes" : "no",
                  validity["loss_falling"].get<bool>() ? "yes" : "no",
                  validity["ranks_agree"].get<bool>() ? "yes" : "no");
      std::printf("# outputs: %s/{metrics.jsonl,metrics.csv,summary.json,checkpoint.h5%s} and TensorBoard events %s\n",
                  cfg_.out.c_str(), best_file_.empty() ? "" : ",best.h5", records_.log.event_file().c_str());
    }
    // The final result, printed even with --quiet: the validation's, else the last epoch's training numbers. With
    // validation, of both models, named: eval and predict given the run folder use best.h5, not the last model.
    const std::string last_file = cfg_.out + "/" + kLatestCheckpointName;
    if (has_val && classification())
      std::printf("validation accuracy: %.4f (%lld/%lld), last model (%s)\n", last_val_.accuracy(),
                  static_cast<long long>(last_val_.correct), static_cast<long long>(last_val_.count),
                  last_file.c_str());
    else if (has_val)
      std::printf("validation loss: %.6g (MAE %.6g), last model (%s)\n", last_val_.loss(), last_val_.mae(),
                  last_file.c_str());
    else if (classification())
      std::printf("train loss: %.6g, train accuracy: %.4f (the last epoch; no --val)\n", last_train_loss_, last_train_acc_);
    else
      std::printf("train loss: %.6g (the last epoch; no --val)\n", last_train_loss_);
    if (has_val && have_best && !best_file_.empty()) {
      const std::string figure = classification() ? RT_MSG(std::fixed << std::setprecision(4) << best_.val_accuracy)
                                                   : RT_MSG(std::setprecision(6) << best_.val_loss);
      std::printf("validation %s: %s, best model (epoch %lld, %s: what eval and predict take from %s)\n",
                  classification() ? "accuracy" : "loss", figure.c_str(), static_cast<long long>(best_.epoch),
                  best_file_.c_str(), cfg_.out.c_str());
    }
    std::fflush(stdout);
  });
}

void Trainer::write_trace() {
  if (cfg_.trace.empty()) return;
  collective_phase(ctx_, [&] {
    write_chrome_trace(ctx_, timeline_, cfg_.trace,
                       Json{{"ragtrain", "phases of every rank (doc/performance.md, \"Timeline\")"},
                            {"command_line", cfg_.provenance.command_line},
                            {"backend", backend_ ? backend_->name() : std::string()},
                            {"steps", step_},
                            {"started_at", started_at_}});
  });
  if (talk_) {
    std::printf("# trace: %s (%d ranks; open in ui.perfetto.dev or chrome://tracing)\n", cfg_.trace.c_str(), ctx_.size);
    std::fflush(stdout);
  }
}

}  // namespace ragtrain
