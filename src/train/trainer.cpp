// The Trainer's set-up phases (data, resume, shards, backend, run folder) and the one function that turns its
// state into a checkpoint. Reads top to bottom like the data path: headers -> schedule -> (resume) -> shards ->
// backend -> run folder.
#include "ragtrain/train/trainer.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "ragtrain/checkpoint/checksum.hpp"
#include "ragtrain/checkpoint/rotation.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/memory.hpp"
#include "ragtrain/core/output_file.hpp"
#include "ragtrain/data/class_labels.hpp"
#include "ragtrain/data/direct_read.hpp"
#include "ragtrain/data/stored_statistics.hpp"
#include "ragtrain/metrics/provenance.hpp"
#include "ragtrain/metrics/units.hpp"
#include "ragtrain/train/window_plan.hpp"
#include "ragtrain/train/shard_load.hpp"

namespace ragtrain {

namespace {

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
  require_same_class_names(val.class_names, "validation file '" + val.path + "'", train.class_names,
                           "the training file '" + train.path + "'");
}

// Bytes the device copy of a resident shard takes: features, labels or targets, global indices.
int64_t device_shard_bytes(const Shard& s) {
  return static_cast<int64_t>(s.features.size() * sizeof(float) + s.labels.size() * sizeof(int32_t) +
                              s.targets.size() * sizeof(float) + s.indices.size() * sizeof(int64_t));
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

Trainer::Trainer(const Context& ctx, const TrainConfig& cfg, CommWatchdog* watchdog)
    : ctx_(ctx),
      cfg_(cfg),
      watchdog_(watchdog),
      talk_(ctx.is_root() && !cfg.talk.quiet),
      started_at_(utc_now()),
      timeline_(!cfg.trace.empty()) {
  timeline_.start(ctx_);   // --trace: every rank's time zero after one barrier
}

// The background read first (it may scale the shard with normalizer_, which is destroyed before load_ would be);
// the window's reader thread may be staging a window into the backend's device memory: it is joined (the window
// goes) before the backend, which the member order alone would destroy first.
Trainer::~Trainer() {
  load_.reset();
  window_.reset();
}

void Trainer::setup_data() {
  PhaseScope phase(&timeline_, Phase::SetupData, 0);
  Stopwatch io;
  if (cfg_.synthetic) {
    // The same synthetic set on every rank (a pure function of the spec): nothing to read, nothing to agree on.
    budget_ = MemoryBudget::of(cfg_.source.max_memory, ctx_.local_size);
    const SyntheticSpec& g = *cfg_.synthetic;
    const double data_bytes = 4.0 * static_cast<double>(g.sequences) * static_cast<double>(g.max_length) *
                              static_cast<double>(g.features + 1);
    collective_phase(ctx_, [&] {   // the same verdict on every rank: each exits 2
      USER_CHECK(data_bytes <= static_cast<double>(budget_.bytes),
                 "the synthetic data (" << g.sequences << " sequences of up to " << g.max_length << " steps, "
                                        << g.features << " features) needs " << byte_string(data_bytes)
                                        << " but this rank may use " << byte_string(static_cast<double>(budget_.bytes)),
                 "lower --sequences, --max-length or --features, or raise --max-memory if the machine has the memory");
    });
    synthetic_ = make_synthetic(g, reader_threads(ctx_.world));   // every rank the whole set, on its cores
    for (int64_t i = 0; i < synthetic_.num_sequences(); ++i)
      lengths_.push_back(synthetic_.offsets[static_cast<size_t>(i + 1)] - synthetic_.offsets[static_cast<size_t>(i)]);
    train_info_.num_sequences = synthetic_.num_sequences();
    copy_header(train_info_, synthetic_);
  } else {
    // Data headers: shapes, task and offsets only (cheap, identical on every rank).
    collective_phase(ctx_, [&] {
      budget_ = MemoryBudget::of(cfg_.source.max_memory, ctx_.local_size);
      train_info_ = read_dataset_info(cfg_.source.data, ctx_.world, budget_);
      require_labels(train_info_, "--data", "training");
      if (!cfg_.validation.data.empty()) {
        val_info_ = read_dataset_info(cfg_.validation.data, ctx_.world, budget_);
        require_labels(val_info_, "--val", "validation");
        check_compatible(train_info_, val_info_);
      }
      // A rank without a single training sequence would only ever contribute empty gradients: almost certainly
      // a launch mistake (-np too large, or the wrong --data), and its device would sit idle for the whole run.
      USER_CHECK(train_info_.num_sequences >= ctx_.size,
                 "--data " << cfg_.source.data << " holds " << count_of(train_info_.num_sequences, "sequence")
                           << " but the job has " << count_of(ctx_.size, "rank")
                           << "; every rank must train on at least one sequence",
                 "use at most " << count_of(train_info_.num_sequences, "rank") << " (mpirun -np " << train_info_.num_sequences
                                << "), or train on a larger data set");
      USER_CHECK(!(cfg_.validation.select == SelectMetric::ValAccuracy && train_info_.task != Task::Classification),
                 "option --select val_accuracy: --data " << cfg_.source.data << " is a regression set (no accuracy)",
                 "use --select val_loss, or leave --select out");
    });
    lengths_ = train_info_.lengths();
  }
  // The model, checked before the schedule, which deals P x K columns: a --batch-per-rank typo of 2^31 is a
  // message at once, not seconds of dealing empty columns first.
  shape_ = ModelShape{train_info_.num_features, cfg_.model.hidden,        cfg_.model.layers, train_info_.num_outputs,
                      train_info_.task,         cfg_.model.bidirectional, cfg_.model.pool};
  // The model and a step's activations must fit before the backend allocates them: a --hidden or
  // --batch-per-rank typo, or a file declaring 2^31 classes, is a message, not std::bad_alloc or the OOM killer.
  const int64_t max_length = lengths_.empty() ? 0 : *std::max_element(lengths_.begin(), lengths_.end());
  const double need = training_bytes(shape_, cfg_.schedule.batch_per_rank, max_length);
  collective_phase(ctx_, [&] {
    USER_CHECK(need <= static_cast<double>(budget_.bytes),
               "training " << describe(shape_) << (cfg_.synthetic ? "" : " for --data '" + cfg_.source.data + "'")
                           << " on " << cfg_.schedule.batch_per_rank << " sequence(s) of up to "
                           << max_length << " steps per rank needs about " << byte_string(need)
                           << " but this rank may use " << byte_string(static_cast<double>(budget_.bytes))
                           << (budget_.max_memory == "auto" ? " (--max-memory auto: node memory / ranks on the node)"
                                                            : " (--max-memory " + budget_.max_memory + ")"),
               "lower --hidden, --layers or --batch-per-rank; check the data's features and classes with `ragtrain "
               "inspect`; or raise --max-memory if the machine has the memory");
  });
  // Which sequences this rank owns for the whole run (only those are read).
  schedule_ = std::make_unique<Schedule>(lengths_, ctx_.size, cfg_.schedule.batch_per_rank, cfg_.schedule.seed,
                                         cfg_.schedule.kind);
  total_steps_ = cfg_.schedule.epochs * schedule_->steps_per_epoch();
  cfg_.lr.total_steps = total_steps_;
  run_.io_s += io.seconds();
}

bool Trainer::setup_resume() {
  resuming_ = !cfg_.start.resume.empty();
  if (!resuming_) {
    collective_phase(ctx_, [&] {
      if (ctx_.is_root()) check_no_newer_checkpoints(cfg_.out, -1);
    });
    return true;
  }
  // Every rank reads the checkpoint and checks that it continues this run (the same verdict everywhere).
  collective_phase(ctx_, [&] {
    resume_path_ = resolve_resume_path(cfg_.start.resume);
    from_ = read_checkpoint(resume_path_);
    ResumeTarget target;
    target.shape = shape_;
    target.position = make_checkpoint(false).position;
    target.dropout = cfg_.model.dropout;
    target.effective_config = cfg_.provenance.effective;
    plan_ = plan_resume(resume_path_, from_, target);
    USER_CHECK(!from_.opt_m.empty(), "checkpoint '" << resume_path_ << "' holds no optimizer state",
               "the file is damaged; resume from another checkpoint");
    USER_CHECK(from_.normalization == normalization_name(cfg_.normalize),
               "checkpoint '" << resume_path_ << "' was trained with --normalize " << from_.normalization
                              << ", this run has --normalize " << normalization_name(cfg_.normalize),
               "resume with the options of the run that wrote it: add --normalize " + from_.normalization +
                   " (runs started before --normalize feature became the default were trained with none)");
    if (ctx_.is_root() && !plan_.finished) check_no_newer_checkpoints(cfg_.out, plan_.step);
  });
  if (plan_.finished) {   // announce() will not run: say here where the checkpoint stands
    if (talk_)
      std::printf("%s\n# nothing to train: the checkpoint is at the last step of --epochs %lld; raise --epochs to go on\n",
                  plan_.message.c_str(), static_cast<long long>(cfg_.schedule.epochs));
    return false;
  }
  // Running sums, and the best model so far; a resumed run starts from the checkpoint's, so its records equal
  // an uninterrupted run's.
  step_ = plan_.step;
  acc_ = from_.accumulators;
  best_ = from_.best;
  saved_step_ = plan_.step;
  saved_path_ = resume_path_;
  return true;
}

void Trainer::setup_shards() {
  std::optional<PhaseScope> phase(std::in_place, &timeline_, Phase::ReadShard, 0);
  Stopwatch io;
  // In file order: neighbours in the file are neighbours in the shard, so they are read as one request. The
  // shard's order is only where each sequence lies (ShardIndex maps the schedule's indices to it), so it changes
  // nothing that is trained.
  std::vector<int64_t> mine = schedule_->rank_sequences(ctx_.rank);
  std::sort(mine.begin(), mine.end());
  // A shard that does not fit --max-memory on some rank streams on every rank: windows change at the same steps
  // everywhere, with one agreement each.
  int fits = cfg_.synthetic || shard_bytes(train_info_, mine) <= budget_.bytes ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &fits, 1, MPI_INT, MPI_MIN, ctx_.world));
  // Standardisation uses training statistics only, over every rank's shard, so validation stays held out. A
  // resumed run keeps the statistics the model was trained with; statistics stored in the file (by gen, convert,
  // tune's splits) are known before the data is read, and checked against it as it arrives.
  normalizer_ = Normalizer{cfg_.normalize, {}};
  if (normalizer_.mode == Normalization::Feature && resuming_) {
    normalizer_.scaling = FeatureScaling{from_.feature_mean, from_.feature_std};
  } else if (normalizer_.mode == Normalization::Feature && train_info_.statistics_error) {
    collective_phase(ctx_, [&] { throw *train_info_.statistics_error; });   // the same file: every rank throws
  } else if (normalizer_.mode == Normalization::Feature && train_info_.statistics) {
    stored_ = from_stored(*train_info_.statistics);
    normalizer_.scaling = scaling_of(*stored_, train_info_.num_features);
  }
  if (cfg_.synthetic) {
    train_ = make_shard(synthetic_, mine);
  } else {
    if (fits) {
      // A file the reader can pread is read on a background thread while setup_backend runs (finish_shards
      // joins it); any other through HDF5, collectively, here.
      std::optional<DirectSource> src;
      collective_phase(ctx_, [&] { src = probe_direct(train_info_, ctx_.world); });
      if (src) {
        start_load(*src, mine);
        plan_early(*src, mine);
      } else
        collective_phase(ctx_, [&] { train_ = read_shard(train_info_, mine, ctx_.world, budget_, &read_stats_); });
    } else {
      setup_window(mine);
    }
    if (!cfg_.validation.data.empty())
      collective_phase(ctx_, [&] {
        val_ = read_shard(val_info_, block_indices(val_info_.num_sequences, ctx_.size, ctx_.rank), ctx_.world, budget_,
                          &read_stats_);
      });
  }
  run_.io_s += io.seconds();
  phase.reset();   // finish_shards is a read_shard span of its own
  if (!load_) finish_shards(mine);
}

void Trainer::start_load(const DirectSource& src, const std::vector<int64_t>& mine) {
  read_stats_.threads = reader_threads(ctx_.world);
  ShardLoadPlan plan;
  plan.moments = normalizer_.mode == Normalization::Feature && !resuming_;   // to compute or to check statistics
  if (scaling_known()) plan.apply = &normalizer_;   // then the thread scales the shard too
  // Test hook (tests/e2e/test_data_path_e2e.cpp): RAGTRAIN_TEST_LOAD_DELAY_MS=N (at most 60,000) makes the
  // background read finish late, so that a run which starts streamed switches after several windows.
  if (const char* knob = std::getenv("RAGTRAIN_TEST_LOAD_DELAY_MS")) plan.delay_ms = std::clamp(std::atoi(knob), 0, 60000);
  load_ = std::make_unique<ShardLoad>(train_info_, src, mine, read_stats_.threads, plan, &timeline_);
}

// The shards' statistics and scaling once their values are in memory; for a shard read in the background, after
// waiting for it. The reader's threads compute and apply them; the result does not depend on how many there are.
void Trainer::finish_shards(const std::vector<int64_t>& mine) {
  take_train_shard(mine);
  finish_validation();
}

void Trainer::take_train_shard(const std::vector<int64_t>& mine) {
  PhaseScope phase(&timeline_, Phase::ReadShard, 0);
  Stopwatch io;
  std::optional<FeatureMoments> moments;
  const bool scaled = load_ && scaling_known();
  if (load_) {
    collective_phase(ctx_, [&] {
      ShardLoad::Result r = load_->take();
      train_ = std::move(r.shard);
      moments = std::move(r.moments);
      read_stats_.add(r.stats);
      read_stats_.direct = true;
      shard_wait_s_ = r.wait_s;
    });
    load_.reset();
  }
  const int threads = read_stats_.threads;
  if (stored_ && !stream_)   // a streamed shard is checked as its first epoch is read (check_first_epoch)
    check_stored_statistics(moments ? *moments : FeatureMoments::of(train_, threads));
  else if (normalizer_.mode == Normalization::Feature && !resuming_ && !stored_)
    normalizer_.scaling = stream_  ? streamed_scaling(mine)
                          : moments ? scaling_across_ranks(*moments, train_info_.num_features, ctx_.world)
                                    : compute_scaling(train_, ctx_.world, threads);
  if (!scaled) normalizer_.apply(train_, threads);
  run_.io_s += io.seconds();
}

void Trainer::finish_validation() {
  if (!cfg_.validation.data.empty()) normalizer_.apply(val_, read_stats_.threads);   // no --val: nothing to scale
  positions_.assign(static_cast<size_t>(cfg_.schedule.batch_per_rank), -1);
}

void Trainer::setup_backend() {
  build_backend();
  if (early_) {
    finish_validation();
    if (open_early_window()) return;
    early_.reset();
    window_steps_ = 0;
  }
  if (load_) finish_shards({});   // the shard read beside build_backend: wait for it (a resident shard, not streamed)
  open_window();
}

// Only where the scaling is known before the data (otherwise the first step needs every rank's whole shard for
// the statistics), and where the window's two slots fit beside the whole shard and the model within --max-memory.
// The same W on every rank, so that windows change at the same steps everywhere.
void Trainer::plan_early(const DirectSource& src, const std::vector<int64_t>& mine) {
  if (!scaling_known()) return;   // the same on every rank: the same options, file and checkpoint
  const int64_t max_length = *std::max_element(lengths_.begin(), lengths_.end());
  const int64_t step_bytes =
      window_step_bytes(cfg_.schedule.batch_per_rank, max_length, train_info_.num_features, label_bytes());
  const auto model_bytes = static_cast<int64_t>(training_bytes(shape_, cfg_.schedule.batch_per_rank, max_length));
  // Test hook (tests/e2e/test_data_path_e2e.cpp): RAGTRAIN_TEST_WINDOW_STEPS=W caps the window, so that a small
  // set, whose first window would otherwise hold the whole shard, starts streamed too.
  const char* knob = std::getenv("RAGTRAIN_TEST_WINDOW_STEPS");
  const int64_t max_steps = knob ? std::max<int64_t>(1, std::atoll(knob)) : INT64_MAX;
  int64_t steps = early_window_steps(budget_.bytes - model_bytes - shard_bytes(train_info_, mine), step_bytes,
                                     max_steps, steps_per_epoch(), total_steps_ - step_);
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &steps, 1, MPI_INT64_T, MPI_MIN, ctx_.world));
  if (steps < 1) return;
  early_ = src;
  window_steps_ = steps;
  early_shard_bytes_ = shard_bytes(train_info_, mine);
}

// The first window is read now (its sequences only: a step's worth of data, not the shard), the next ones ahead
// by the window's reader, beside the whole shard's read. A backend with device memory of its own trains from
// device windows meanwhile (its shard buffers, once set, stay: captured graphs point into them); W is then bounded
// by the device's budget too, and where the device cannot hold the whole shard the run goes on in device windows,
// copied out of the resident shard once it has arrived (as open_window's device window).
bool Trainer::open_early_window() {
  const int64_t max_length = *std::max_element(lengths_.begin(), lengths_.end());
  const int64_t step_bytes =
      window_step_bytes(cfg_.schedule.batch_per_rank, max_length, train_info_.num_features, label_bytes());
  placement_ = WindowPlan{ShardPlacement::HostWindow, window_steps_, false};
  if (const std::optional<Backend::DeviceMemory> mem = backend_->device_memory()) {
    const std::string& opt = cfg_.backend.max_device_memory;
    device_budget_ = device_shard_budget(opt == "auto" ? -1 : parse_size(opt), mem->free, mem->total);
    int64_t agreed[2] = {early_shard_bytes_ <= device_budget_ ? 1 : 0, window_steps_in(device_budget_, step_bytes)};
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, agreed, 2, MPI_INT64_T, MPI_MIN, ctx_.world));
    if (agreed[1] < 1) return false;   // open_window says why, after the whole shard
    window_steps_ = std::min(window_steps_, agreed[1]);
    placement_ = WindowPlan{agreed[0] ? ShardPlacement::HostWindow : ShardPlacement::DeviceWindow, window_steps_, true};
    open_device_slots();
  }
  started_streamed_ = true;
  resident_from_step_ = -1;
  collective_phase(ctx_, [&] {
    window_ = std::make_unique<ShardWindow>(train_info_, *early_, *schedule_, ctx_.rank, window_steps_, step_,
                                            total_steps_, normalizer_, reader_threads_for_window(), &timeline_, 0,
                                            nullptr, placement_.on_device ? backend_.get() : nullptr);
  });
  if (!window_->on_device()) backend_->set_train_shard(window_->shard());
  index_ = std::make_unique<ShardIndex>(window_->shard());
  return true;
}

void Trainer::open_device_slots() {
  const int64_t K = cfg_.schedule.batch_per_rank;
  Backend::DeviceWindowSize size;
  size.sequences = window_steps_ * K;
  size.timesteps = window_steps_ * K * *std::max_element(lengths_.begin(), lengths_.end());
  size.min_length = *std::min_element(lengths_.begin(), lengths_.end());
  size.max_length = *std::max_element(lengths_.begin(), lengths_.end());
  size.copy_threads = reader_threads_for_window();
  collective_phase(ctx_, [&] { backend_->open_device_window(size); });
}

bool Trainer::load_done_everywhere() const {
  int done = load_ && load_->ready() ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &done, 1, MPI_INT, MPI_MIN, ctx_.world));
  return done != 0;
}

// At a window switch where every rank's load has finished (or at the end of a run that never reached one: the
// stored statistics are still checked against the whole shard). A window changes only where a sequence lies, so
// the model trains on as the resident run's.
void Trainer::become_resident(bool steps_follow) {
  take_train_shard({});
  window_->read_from(&train_);   // the read in flight finished and counted; the next ones (if any) from the shard
  read_stats_.add(window_->stats());
  early_.reset();
  resident_from_step_ = step_;
  // A device that cannot hold the whole shard keeps device windows, gathered from the host's shard from now on. The
  // early ones were sized for reads from the file (kEarlySlotBytes); from here the device's budget sets W, as in a
  // run resident from the start: far fewer switches, each a larger copy (on one H100 at K = 128 the early W, 6
  // steps, kept to the end of the epoch cost 1.1 s of io wait in a 1.7 s epoch at 8.2 GB).
  if (placement_.placement == ShardPlacement::DeviceWindow) {
    if (!steps_follow) return;   // the end of the run: nothing left to train on
    window_.reset();             // joins a read in flight
    backend_->close_device_window();
    open_window();
    return;
  }
  window_.reset();   // joins a read in flight
  if (placement_.on_device) backend_->close_device_window();
  placement_ = WindowPlan{};
  backend_->set_train_shard(train_);
  index_ = std::make_unique<ShardIndex>(train_);
}

// The backend and its parameters; runs while a resident shard is read in the background, so it must not touch
// train_ or normalizer_.
void Trainer::build_backend() {
  PhaseScope phase(&timeline_, Phase::SetupBackend, 0);
  BackendOptions opts;
  opts.device = cfg_.backend.device;
  opts.lstm = cfg_.backend.lstm;
  opts.batch = cfg_.schedule.batch_per_rank;
  opts.optimizer = cfg_.optimizer;
  opts.comm = ctx_.world;
  opts.local_rank = ctx_.local_rank;
  opts.watchdog = watchdog_;
  opts.dropout = cfg_.model.dropout;
  opts.seed = cfg_.schedule.seed;
  opts.copy_threads = reader_threads_for_window();
  collective_phase(ctx_, [&] { backend_ = make_backend(shape_, opts); });
  if (resuming_) {
    backend_->set_params(from_.params);
    backend_->set_optimizer_state(OptimizerState{from_.opt_m, from_.opt_v, from_.optimizer_steps});
  } else if (!cfg_.start.init_from.empty()) {
    // Weights from elsewhere (e.g. PyTorch via tools/torch_interop.py); --resume, which restores the whole run,
    // takes precedence over it.
    Checkpoint init;
    collective_phase(ctx_, [&] {
      init = read_checkpoint(cfg_.start.init_from);
      USER_CHECK(init.shape == shape_,
                 "--init-from '" << cfg_.start.init_from << "' holds a model with input " << init.shape.input_size
                                 << ", hidden " << init.shape.hidden << ", layers " << init.shape.layers << ", outputs "
                                 << init.shape.outputs << " (" << describe(init.shape) << "); this run needs input "
                                 << shape_.input_size << ", hidden " << shape_.hidden << ", layers " << shape_.layers
                                 << ", outputs " << shape_.outputs << " (" << describe(shape_) << ")",
                 "match --hidden/--layers/--bidirectional/--pool to the checkpoint (a ragtrain checkpoint holds its run's "
                 "options: `h5dump -a config " + cfg_.start.init_from + "`), or train from scratch");
    });
    backend_->set_params(init.params);
  } else {
    backend_->set_params(init_params(ParamLayout(shape_), cfg_.schedule.seed));
  }
}

// Where the shard lives for the run, once the backend says what memory its device has left: resident on the host
// and the device; resident on the host with a device window (the shard does not fit the device's budget); or
// host windows read from the file, each also copied to the device (it does not fit the host's). One W for every
// rank, from the smaller of the two budgets, so windows change at the same step everywhere.
void Trainer::open_window() {
  const int64_t max_length = *std::max_element(lengths_.begin(), lengths_.end());
  const int64_t K = cfg_.schedule.batch_per_rank;
  const int64_t step_bytes = window_step_bytes(K, max_length, train_info_.num_features, label_bytes());
  const std::optional<Backend::DeviceMemory> mem = backend_->device_memory();
  ShardFit fit;
  fit.host_fits = !stream_;
  fit.host_steps = window_steps_;
  if (mem) {
    const std::string& opt = cfg_.backend.max_device_memory;
    device_budget_ = device_shard_budget(opt == "auto" ? -1 : parse_size(opt), mem->free, mem->total);
    int64_t agreed[2] = {stream_ || device_shard_bytes(train_) > device_budget_ ? 0 : 1,
                         window_steps_in(device_budget_, step_bytes)};
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, agreed, 2, MPI_INT64_T, MPI_MIN, ctx_.world));
    fit.device_fits = agreed[0] != 0;
    fit.device_steps = agreed[1];
  }
  placement_ = plan_window(fit);
  if (placement_.placement == ShardPlacement::Resident) {
    backend_->set_train_shard(train_);
    index_ = std::make_unique<ShardIndex>(train_);
    return;
  }
  collective_phase(ctx_, [&] {
    USER_CHECK(placement_.steps >= 1,
               "--data " << train_info_.path << ": a window of this rank's shard on the device needs room for two "
                         "steps' sequences (" << byte_string(2.0 * static_cast<double>(step_bytes)) << "), but the "
                         "device may use " << byte_string(static_cast<double>(std::max<int64_t>(0, device_budget_)))
                         << " for it (--max-device-memory " << cfg_.backend.max_device_memory << ")",
               "raise --max-device-memory (auto: the GPU's free memory less a margin), lower --batch-per-rank or "
               "--hidden, or use more ranks");
  });
  window_steps_ = placement_.steps;
  if (placement_.on_device) open_device_slots();
  // The first window is read (from the file, normalised; or copied out of the resident shard) now, the second
  // from here on in the background.
  const Normalizer as_read = stream_ ? normalizer_ : Normalizer{};
  // With stored statistics, a streamed run from the start measures its first epoch to check them.
  const int64_t measure_until = stream_ && stored_ && step_ == 0 ? steps_per_epoch() : 0;
  collective_phase(ctx_, [&] {
    window_ = std::make_unique<ShardWindow>(train_info_, stream_ ? *stream_ : DirectSource{}, *schedule_, ctx_.rank,
                                            window_steps_, step_, total_steps_, as_read, reader_threads_for_window(),
                                            &timeline_, measure_until, stream_ ? nullptr : &train_,
                                            placement_.on_device ? backend_.get() : nullptr);
  });
  if (!window_->on_device()) backend_->set_train_shard(window_->shard());
  index_ = std::make_unique<ShardIndex>(window_->shard());
}

int64_t Trainer::label_bytes() const {
  return train_info_.task == Task::Classification ? 4 : 4 * train_info_.num_outputs;
}

int Trainer::reader_threads_for_window() const {
  return read_stats_.threads > 0 ? read_stats_.threads : reader_threads(ctx_.world);
}

// The shard does not fit --max-memory: the file must be readable without HDF5 (the reader thread may not call
// it), and two windows (the one trained on, the one being read) of the same number of steps on every rank must
// fit beside the model and a step's activations.
void Trainer::setup_window(const std::vector<int64_t>& mine) {
  const int64_t max_length = *std::max_element(lengths_.begin(), lengths_.end());
  const int64_t step_bytes =
      window_step_bytes(cfg_.schedule.batch_per_rank, max_length, train_info_.num_features, label_bytes());
  const auto model_bytes = static_cast<int64_t>(training_bytes(shape_, cfg_.schedule.batch_per_rank, max_length));
  const int64_t window_bytes = (budget_.bytes - model_bytes) / 2;
  int64_t steps = window_steps_in(budget_.bytes - model_bytes, step_bytes);
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &steps, 1, MPI_INT64_T, MPI_MIN, ctx_.world));
  collective_phase(ctx_, [&] {
    USER_CHECK(steps >= 1,
               "--data " << train_info_.path << ": this rank's shard ("
                         << byte_string(static_cast<double>(shard_bytes(train_info_, mine)))
                         << ") does not fit --max-memory, and streaming it needs room for two steps' sequences ("
                         << byte_string(2.0 * static_cast<double>(step_bytes)) << ") beside the model ("
                         << byte_string(static_cast<double>(model_bytes)) << "), but --max-memory is " << budget_.max_memory,
               "raise --max-memory, or lower --batch-per-rank");
    std::optional<DirectSource> src = probe_direct(train_info_, ctx_.world);
    USER_CHECK(src, "--data " << train_info_.path << ": this rank's shard does not fit --max-memory "
                              << budget_.max_memory << ", and the file cannot be streamed: /features or /labels is "
                              "chunked, compressed or not little-endian",
               "rewrite it contiguous (`h5repack -l CONTI " << train_info_.path << " OUT.h5`), or raise --max-memory");
    stream_ = *src;
  });
  window_steps_ = steps;
  window_bytes_ = window_bytes;
  read_stats_.threads = reader_threads(ctx_.world);
}

// --normalize feature for a streamed shard: one pass over it in file order, a window's worth at a time, its
// moments computed over the same blocks as a resident shard's (MomentStream), so the same statistics to the bit.
FeatureScaling Trainer::streamed_scaling(const std::vector<int64_t>& mine) {
  MomentStream moments(train_info_.num_features);
  collective_phase(ctx_, [&] {
    size_t at = 0;
    while (at < mine.size()) {
      std::vector<int64_t> piece;
      int64_t bytes = 8;
      while (at < mine.size() && (piece.empty() || bytes + shard_bytes(train_info_, {mine[at]}) <= window_bytes_)) {
        bytes += shard_bytes(train_info_, {mine[at]});
        piece.push_back(mine[at++]);
      }
      moments.add(read_shard_direct(train_info_, *stream_, piece, read_stats_.threads, &read_stats_),
                  read_stats_.threads);
    }
  });
  return scaling_across_ranks(moments.finish(), train_info_.num_features, ctx_.world);
}

// The statistics stored in the file against this rank's moments of the data as read, all ranks' merged:
// collective, the same verdict on every rank. A file edited after its statistics were written stops the run
// rather than training on wrong numbers.
void Trainer::check_stored_statistics(const FeatureMoments& mine) {
  const FeatureMoments data = moments_across_ranks(mine, train_info_.num_features, ctx_.world);
  collective_phase(ctx_, [&] {
    const std::optional<std::string> differ = statistics_differ(*stored_, data);
    USER_CHECK(!differ, "--data " << train_info_.path << ": the feature statistics stored in the file (/statistics) "
                                  "do not match its data: " << *differ << " (the file was changed after they were written)",
               "refresh them with `ragtrain inspect " << train_info_.path << " --write-statistics`, or delete them "
               "(h5py: del f['statistics']) to have train compute them");
  });
}

// A streamed run with stored statistics, after the last step of its first epoch: every sequence of the shard has
// been read once, and measured raw by the window's reader.
// Only windows read from the file measure their data: a device window copied out of a resident shard was checked
// with the whole shard at set-up.
void Trainer::check_first_epoch() {
  if (stream_ && stored_ && !resuming_ && step_ == steps_per_epoch()) check_stored_statistics(window_->measured());
}

void Trainer::open_run_folder() {
  // Only once the inputs (data, checkpoints, --init-from) and the backend are known to be good: a bad input
  // leaves nothing behind. A resumed run appends to the folder's metrics.jsonl, without the records of steps it
  // is about to redo.
  collective_phase(ctx_, [&] {
    if (!ctx_.is_root()) return;
    ensure_output_dir(cfg_.out);
    // A fresh run replaces the records of an earlier one (the guard allowed it: --force); its best.h5 too, which
    // eval would otherwise take for this run's best model.
    std::error_code gone;
    if (!resuming_ && !std::filesystem::remove(best_path(), gone))
      USER_CHECK(!gone, "cannot remove the earlier run's " << best_path() << ": " << gone.message(),
                 "remove it yourself, or start afresh in another --out folder");
    if (cfg_.records.write_order) {
      records_.order_csv.open(cfg_.out + "/order.csv", resuming_ ? std::ios::app : std::ios::trunc);
      USER_CHECK(records_.order_csv.good(), "cannot create '" << cfg_.out << "/order.csv'",
                 "choose a writable --out folder");
      if (!resuming_) records_.order_csv << "epoch,step,slot,sequence\n";
    }
    RunRecordsSpec spec;
    spec.dir = cfg_.out;
    spec.resuming = resuming_;
    spec.resume_step = resuming_ ? plan_.step : 0;
    spec.classification = classification();
    spec.has_val = !cfg_.validation.data.empty();
    spec.host = ctx_.host;
    const int64_t dropped = records_.log.open(spec);
    if (!resuming_) return;
    records_.log.write(Json{{"event", "resume"},
                             {"step", plan_.step},
                             {"epoch", plan_.epoch + 1},
                             {"checkpoint", resume_path_},
                             {"checkpoint_world_size", from_.position.world_size},
                             {"checkpoint_batch_per_rank", from_.position.batch_per_rank},
                             {"world_size", ctx_.size},
                             {"batch_per_rank", cfg_.schedule.batch_per_rank},
                             {"dropped_records", dropped}});
  });
  if (resuming_) carry_best_model();
}

void Trainer::carry_best_model() {
  if (best_.step < 0) return;
  namespace fs = std::filesystem;
  const std::string here = best_path(), there = (fs::path(resume_path_).parent_path() / kBestCheckpointName).string();
  int at_hand = 0;
  collective_phase(ctx_, [&] {
    if (!ctx_.is_root()) return;
    // A best.h5 holds the best model when it was written at the best step (a damaged one does not).
    auto holds_best = [&](const std::string& path) {
      if (!fs::exists(path)) return false;
      try {
        return read_checkpoint(path).step == best_.step;
      } catch (const std::exception&) {
        return false;
      }
    };
    if (holds_best(here)) {
      at_hand = 1;
    } else if (!same_file(here, there) && holds_best(there)) {
      // Resumed into another folder: that folder's best.h5 comes along, so this run's records name a file it has.
      AtomicOutput copy(here);
      fs::copy_file(there, copy.temp_path());
      copy.commit();
      at_hand = 1;
      records_.log.write(Json{{"event", "best"}, {"epoch", best_.epoch}, {"step", best_.step}, {"path", here},
                              {"copied_from", there}});
    } else if (talk_) {
      std::printf("# the best model so far (step %lld, by the checkpoint's record) is in neither %s nor %s: the next "
                  "better validation writes best.h5\n",
                  static_cast<long long>(best_.step), here.c_str(), there.c_str());
    }
  });
  MPI_Bcast(&at_hand, 1, MPI_INT, 0, ctx_.world);
  best_file_ = at_hand ? here : std::string();
}

void Trainer::announce() const {
  if (!talk_) return;
  if (resuming_) std::printf("%s\n", plan_.message.c_str());
  std::printf("# ragtrain train: %lld sequences (F=%lld, %s, %lld %s) on %s x %lld per step = %lld steps/epoch, "
              "backend %s, %lld parameters\n",
              static_cast<long long>(train_info_.num_sequences), static_cast<long long>(shape_.input_size),
              task_name(shape_.task), static_cast<long long>(shape_.outputs),
              classification() ? "classes" : "targets", count_of(ctx_.size, "rank").c_str(),
              static_cast<long long>(cfg_.schedule.batch_per_rank),
              static_cast<long long>(steps_per_epoch()), backend_->name().c_str(),
              static_cast<long long>(ParamLayout(shape_).total()));
  std::printf(
      "# model: %s%s\n", describe(shape_).c_str(),
      cfg_.model.dropout.any()
          ? RT_MSG(", dropout " << cfg_.model.dropout.between << ", head dropout " << cfg_.model.dropout.head).c_str()
          : "");
  std::fflush(stdout);
}

// Everything a checkpoint holds at the current step boundary. The parameters and optimizer state come from
// the backend only when the checkpoint is written (rank 0); resume compares its shape and position only.
Checkpoint Trainer::make_checkpoint(bool complete) const {
  Checkpoint c;
  c.shape = shape_;
  c.dropout = cfg_.model.dropout;
  c.class_names = train_info_.class_names;
  c.epoch = step_ / steps_per_epoch();
  c.step = step_;
  c.config = cfg_.provenance.effective;
  c.optimizer = optimizer_name(cfg_.optimizer.kind);
  c.normalization = normalization_name(normalizer_.mode);
  c.feature_mean = normalizer_.scaling.mean;
  c.feature_std = normalizer_.scaling.std;
  c.resumable = true;
  c.position.steps_per_epoch = steps_per_epoch();
  c.position.global_batch = schedule_->global_batch();
  c.position.world_size = ctx_.size;
  c.position.batch_per_rank = cfg_.schedule.batch_per_rank;
  c.position.epochs = cfg_.schedule.epochs;
  c.position.seed = cfg_.schedule.seed;
  c.position.schedule = schedule_kind_name(cfg_.schedule.kind);
  c.position.data_sequences = train_info_.num_sequences;
  c.position.data_lengths_crc32 = lengths_crc32(lengths_);
  c.position.complete = complete;
  c.accumulators = acc_;
  c.best = best_;
  if (backend_) {
    c.params = backend_->params();
    const OptimizerState opt = backend_->optimizer_state();
    c.optimizer_steps = opt.steps_taken;
    c.opt_m = opt.m;
    c.opt_v = opt.v;
  }
  return c;
}

}  // namespace ragtrain
