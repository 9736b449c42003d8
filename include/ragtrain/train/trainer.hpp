// The training engine that `train` and `bench` share, in named phases: set-up (data, model, backend, resume),
// step, log, validate, checkpoint, summarize. The phases run in the order they are declared; each set-up phase
// and every phase of the loop is collective over the ranks (every rank calls it, in the same order).
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/checkpoint/checkpoint.hpp"
#include "ragtrain/checkpoint/resume.hpp"
#include "ragtrain/checkpoint/rotation.hpp"
#include "ragtrain/comm/context.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/normalization.hpp"
#include "ragtrain/metrics/evaluation.hpp"
#include "ragtrain/metrics/metrics.hpp"
#include "ragtrain/metrics/progress.hpp"
#include "ragtrain/metrics/run_records.hpp"
#include "ragtrain/metrics/trace.hpp"
#include "ragtrain/schedule/schedule.hpp"
#include "ragtrain/train/shard_window.hpp"
#include "ragtrain/train/step.hpp"
#include "ragtrain/train/train_config.hpp"
#include "ragtrain/train/window_plan.hpp"

namespace ragtrain {

class CommWatchdog;
class ShardLoad;

class Trainer {
 public:
  // `watchdog` (train's --comm-timeout) may be null (bench). Nothing happens until the phases are called.
  Trainer(const Context& ctx, const TrainConfig& cfg, CommWatchdog* watchdog = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // ---- set-up (in this order) ----
  // Data headers, or the synthetic set (bench); the schedule and the model shape. Checks N >= ranks.
  void setup_data();
  // --resume: reads the checkpoint and checks that it continues this run; refuses step checkpoints in --out that
  // are newer than the start. Returns false when the checkpoint is already at the last step (nothing to train).
  bool setup_resume();
  // Each rank reads its own training sequences and its block of --val; --normalize standardises both. A resident
  // shard in a file the reader can pread is only started here: it is read while setup_backend runs.
  void setup_shards();
  // The backend, built whole for (shape, K), and its parameters: the checkpoint's, --init-from's, or the seed's;
  // then the training shard (waited for if it was read in the background, scaled) handed to it.
  void setup_backend();
  // train: --out with metrics.jsonl (a "resume" record when continuing) and --write-order's order.csv.
  void open_run_folder();
  // train, after every set-up phase succeeded (rank 0, not --quiet): where a resumed run continues, the run's size
  // and the model.
  void announce() const;

  // ---- the loop ----
  // One global step at the current position of the schedule (forward+backward, all-reduce, update), then the
  // position moves on by one step (into the next epoch's order after the last step of one). Time and sequences
  // go to `counters`. A non-finite step is returned with finite = false, not acted on.
  StepTotals step(RankCounters& counters);
  // train: every step to the end (or a stop signal, a non-finite step with --on-nonfinite stop, --early-stop),
  // with logging, validation and checkpoints. Returns the exit code.
  int run();
  // train: summary.json and the end-of-run table (rank 0).
  void summarize();
  // --trace: every rank's phases merged into one Chrome trace file by rank 0 (collective; nothing without it).
  void write_trace();

  // ---- what bench reads ----
  const ModelShape& shape() const { return shape_; }
  Backend& backend() { return *backend_; }
  int64_t steps_per_epoch() const { return schedule_->steps_per_epoch(); }

  // ---- what tune reads after run() (or after it stopped with RunAborted) ----
  const EvalTotals& last_validation() const { return last_val_; }   // the last --val figures (zeros: none yet)
  int64_t epochs_done() const { return schedule_ ? step_ / steps_per_epoch() : 0; }
  bool stopped_nonfinite() const { return stopped_nonfinite_; }    // --on-nonfinite stop ended the run

 private:
  struct Records {              // rank 0's open files of the run folder
    RunRecords log;             // metrics.jsonl, metrics.csv, TensorBoard events; its clock starts with the run
    std::ofstream order_csv;    // --write-order: epoch,step,slot,sequence of every trained slot
  };

  void log_interval(const StepTotals& tot, float lr);   // a metrics.jsonl "step" record and the progress line
  void end_epoch();                                     // the "epoch" record and line (after validation)
  void validate(bool at_epoch_end);                     // --val scored; the best model kept (--select)
  void keep_if_best();                                  // best.h5 when this validation improved on the best;
                                                        // counts validations without one (--early-stop)
  void checkpoint(const char* reason, bool complete);   // collective: rank 0 writes, every rank learns the outcome
  Checkpoint make_checkpoint(bool complete) const;      // everything a checkpoint holds, from this state
  void handle_nonfinite(const StepTotals& tot);         // stop every rank (exit 2) or count the skipped step
  int stop_for_signal(int signal);                      // the "stop" record and message; returns the exit code
  int finish();
  Json data_record() const;                             // summary.json's data-path fields (collective)
  void print_best_and_last() const;                     // the end table's rows for best.h5 and checkpoint.h5                                         // after the last step (or early stop): end checkpoint
  bool classification() const { return shape_.task == Task::Classification; }
  SelectMetric select_metric() const;                   // --select, or the task's default
  std::string best_path() const { return cfg_.out + "/" + kBestCheckpointName; }

  Context ctx_;
  TrainConfig cfg_;
  CommWatchdog* watchdog_;
  bool talk_;   // rank 0 prints (not --quiet)
  std::string started_at_;
  Stopwatch wall_;
  Timeline timeline_;   // the phases, for --trace and (CUDA builds) NVTX

  // set-up
  MemoryBudget budget_;
  DatasetInfo train_info_, val_info_;
  RaggedData synthetic_;   // bench without --data
  std::vector<int64_t> lengths_;
  std::unique_ptr<Schedule> schedule_;
  int64_t total_steps_ = 0;
  ModelShape shape_;
  Shard train_, val_;
  // A training shard over --max-memory streams: where the file's values lie, the window and its size. One over
  // the device's budget (CUDA) is held in device windows (placement_, doc/hpc.md "The device window").
  std::optional<DirectSource> stream_;
  std::unique_ptr<ShardWindow> window_;
  int64_t window_steps_ = 0, window_bytes_ = 0;
  WindowPlan placement_;
  int64_t device_budget_ = -1;   // bytes the device copy of the shard may take; -1: no device of its own
  void setup_window(const std::vector<int64_t>& mine);
  void open_window();                     // setup_backend's last phase: the shard to the backend, whole or windowed
  int64_t label_bytes() const;            // one sequence's label or targets
  int reader_threads_for_window() const;
  FeatureScaling streamed_scaling(const std::vector<int64_t>& mine);
  // A resident shard the reader can pread is read on a background thread (ShardLoad) while the backend is built;
  // finish_shards waits for it, then computes and applies the statistics (`mine`: a streamed shard's sequences).
  std::unique_ptr<ShardLoad> load_;
  double shard_wait_s_ = 0;   // how long finish_shards waited for the background read (the part not overlapped)
  void start_load(const DirectSource& src, const std::vector<int64_t>& mine);
  void finish_shards(const std::vector<int64_t>& mine);
  void take_train_shard(const std::vector<int64_t>& mine);   // finish_shards' part for the training shard
  void finish_validation();                                  // and its part for --val and the step's buffers
  // Start streamed, become resident (doc/hpc.md "Where the first step stands"): while load_ reads a resident shard
  // whose scaling is known before its data, the run trains on host windows read from this file, and at the first
  // window switch where every rank's load has finished it drops the window for the whole shard.
  std::optional<DirectSource> early_;
  bool started_streamed_ = false;
  int64_t resident_from_step_ = 0;   // the step from which the run trains on the resident shard (-1: never)
  int64_t early_shard_bytes_ = 0;    // this rank's whole shard (shard_bytes), for the device's budget
  void plan_early(const DirectSource& src, const std::vector<int64_t>& mine);
  bool open_early_window();   // false: the device's budget holds neither the shard nor two steps (start resident)
  void open_device_slots();   // the device window's two slots for W = window_steps_
  bool load_done_everywhere() const;   // collective
  void become_resident(bool steps_follow);   // collective; steps_follow: false at the end of the run
  void build_backend();
  // --normalize feature with statistics stored in the file (/statistics): their moments, used from the start and
  // checked against the data as it is read (a resident shard at set-up, a streamed one after its first epoch).
  std::optional<FeatureMoments> stored_;
  // The scaling is known before the data is read: nothing to compute (none, series, a checkpoint's or stored).
  bool scaling_known() const { return normalizer_.mode != Normalization::Feature || resuming_ || stored_; }
  void check_stored_statistics(const FeatureMoments& mine);
  void check_first_epoch();
  ShardReadStats read_stats_;   // this rank's reads of --data and --val
  double first_step_s_ = -1;    // wall time from the Trainer's start to the end of this invocation's first step
  std::unique_ptr<ShardIndex> index_;
  Normalizer normalizer_;   // --normalize, with the training statistics for `feature`
  std::unique_ptr<Backend> backend_;
  bool resuming_ = false;
  std::string resume_path_;
  Checkpoint from_;   // the checkpoint resumed from
  ResumePlan plan_;
  Records records_;

  // position and running sums
  int64_t step_ = 0;
  TrainAccumulators acc_;
  std::vector<int64_t> positions_, next_positions_;   // this step's and (prepare_next) the next one's
  Schedule::Epoch order_;
  int64_t order_epoch_ = -1;
  // The next epoch's order, built while the GPU runs an epoch's last step (Trainer::step): at K = 128 on 2,000
  // sequences an epoch is 16 steps, and building an order (~30 us) between two steps left the GPU idle. The previous
  // epoch's order, for the batch repeat fraction of the epoch record.
  Schedule::Epoch next_order_, prev_order_;
  int64_t next_order_epoch_ = -1, prev_order_epoch_ = -1;
  RankCounters run_, interval_;
  Stopwatch interval_clock_, epoch_clock_, since_checkpoint_;
  // The epoch's throughput as this invocation saw it (a resumed run starts mid-epoch): sequences trained since
  // the epoch (or the loop) began, and the validation time within it, which is not training.
  double epoch_sequences_ = 0, epoch_val_s_ = 0;
  // Validation time inside the current --log-every interval: its throughput counts training time only, and its
  // sequences are those of every step since the interval began (so the clock runs on through a validation).
  double interval_val_s_ = 0;
  void restart_interval_clock() { interval_clock_.restart(); interval_val_s_ = 0; }
  std::unique_ptr<Progress> progress_;
  double last_train_loss_ = 0, last_train_acc_ = 0;
  EvalTotals last_val_;
  BestSoFar best_;
  // The file that holds best_'s model: best.h5 in --out, or empty while no file does (a run resumed from a
  // checkpoint whose best model is in neither folder; its next better validation writes best.h5).
  std::string best_file_;
  void carry_best_model();   // resume: best.h5 into --out from the checkpoint's folder, or best_file_ left empty
  bool early_stopped_ = false;           // --early-stop: N validations in a row without a better one
  std::string stop_reason_ = "epochs";   // why the run ended: epochs | early_stop
  int64_t saved_step_ = -1;
  std::string saved_path_;
  bool warned_skip_ = false;
  bool stopped_nonfinite_ = false;
};

}  // namespace ragtrain
