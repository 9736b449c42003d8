// `ragtrain tune`: the search (trial groups, rungs of successive halving, the shared queue), its records in the
// tune folder (tune.ini, runs/, trials.csv, best.ini, summary.json) and the final model trained with the best
// recipe. The pure parts live in tune/: the space and the recipes, halving, the split, the rows.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ragtrain/cli/commands.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/output_file.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/shard.hpp"
#include "ragtrain/metrics/metrics.hpp"
#include "ragtrain/metrics/provenance.hpp"
#include "ragtrain/metrics/units.hpp"
#include "ragtrain/train/trainer.hpp"
#include "ragtrain/tune/halving.hpp"
#include "ragtrain/tune/search_space.hpp"
#include "ragtrain/tune/split.hpp"
#include "ragtrain/tune/trial_queue.hpp"
#include "ragtrain/tune/trial_record.hpp"

namespace ragtrain {

namespace {

namespace fs = std::filesystem;

// ---- text between ranks ----

std::string bcast_text(MPI_Comm comm, std::string text) {
  int64_t n = static_cast<int64_t>(text.size());
  MPI_CHECK(MPI_Bcast(&n, 1, MPI_INT64_T, 0, comm));
  text.resize(static_cast<size_t>(n));
  MPI_CHECK(MPI_Bcast(text.data(), static_cast<int>(n), MPI_CHAR, 0, comm));
  return text;
}

// Every rank's `mine`, concatenated in rank order on rank 0 (a rung's result rows: a few KB).
std::string gather_text(MPI_Comm comm, const std::string& mine) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  MPI_CHECK(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displs[static_cast<size_t>(r)] = total;
    total += counts[static_cast<size_t>(r)];
  }
  std::string all(rank == 0 ? static_cast<size_t>(total) : 0, '\0');
  MPI_CHECK(MPI_Gatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(), MPI_CHAR, 0, comm));
  return all;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// ---- trial groups ----

// The ranks that train one trial together: consecutive world ranks, --ranks-per-trial of them. Its Context is
// the Trainer's (every collective of a trial stays inside the group).
class TrialGroup {
 public:
  TrialGroup(const Context& world, const TuneOptions& opt) {
    index_ = world.rank / static_cast<int>(opt.ranks_per_trial);
    count_ = world.size / static_cast<int>(opt.ranks_per_trial);
    MPI_CHECK(MPI_Comm_split(world.world, index_, world.rank, &comm_));
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    ctx_ = Context::create(comm_);
    // The GPU: --trials-per-gpu groups share one, and a group's ranks are on different GPUs (NCCL refuses two
    // ranks of one communicator on one GPU). Local rank l of the node: GPU (l / (R x T)) x R + l mod R.
    const int R = static_cast<int>(opt.ranks_per_trial), T = static_cast<int>(opt.trials_per_gpu);
    ctx_.local_rank = (world.local_rank / (R * T)) * R + world.local_rank % R;
  }
  ~TrialGroup() { MPI_Comm_free(&comm_); }
  TrialGroup(const TrialGroup&) = delete;
  TrialGroup& operator=(const TrialGroup&) = delete;

  const Context& ctx() const { return ctx_; }
  bool leader() const { return ctx_.rank == 0; }
  int index() const { return index_; }
  int count() const { return count_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  Context ctx_;
  int index_ = 0, count_ = 1;
};

// ---- the search every rank knows ----

struct Search {
  TuneConfig cfg;
  SearchSpace space;
  // The trials' --data and --val, one pair per fold: --data and --val; split/train.h5 and split/val.h5; or
  // split/foldF/{train,val}.h5 with --folds F > 1.
  std::vector<std::string> train_paths, val_paths;
  bool classification = true;
  int rungs = 1;
  std::string selection;              // how the validation set was chosen, for messages and summary.json
  int64_t validated = 0;              // sequences the figure is measured on (all folds' together)
  // The default space's trial 0: train's defaults for every searched option, so the search cannot end below
  // them on validation (promoted through every rung). Empty with --space: a narrowed space may exclude them.
  Recipe anchor;
};

int64_t anchor_trial(const Search& s) { return s.anchor.options.empty() ? -1 : 0; }

// Trial t's recipe: the defaults for the anchor trial, else drawn from the space.
Recipe trial_recipe(const Search& s, int64_t trial) {
  return trial == anchor_trial(s) ? s.anchor : sample_recipe(s.space, s.cfg.seed, trial);
}

int64_t recipe_epochs(const Recipe& r) {
  const std::string e = r.get("epochs", std::to_string(ScheduleOptions{}.epochs));
  char* end = nullptr;
  const long long v = std::strtoll(e.c_str(), &end, 10);
  USER_CHECK(end == e.c_str() + e.size() && v > 0, "the space's `epochs` drew '" << e << "', not a whole number > 0",
             "write epochs as whole numbers, e.g. `epochs = 20 | 40` or `epochs = 10 .. 60`");
  return v;
}

// The config file a run trains with: the recipe, the rung's epochs and the trial's seed. best.ini is the one of
// the best run, so `train --config best.ini` trains exactly what was ranked.
std::string run_ini(const Recipe& recipe, int64_t epochs, uint64_t seed) {
  std::string s;
  for (const auto& [name, value] : recipe.options)
    if (name != "epochs") s += name + " = " + value + "\n";
  return s + "epochs = " + std::to_string(epochs) + "\nseed = " + std::to_string(seed) + "\n";
}

// argv of the `train` a run is: parsed by the one option table, so a trial accepts and refuses what train does.
TrainConfig parse_run(const std::string& ini, const std::string& data, const std::string& val, const std::string& out,
                      const TuneConfig& cfg, bool quiet) {
  std::vector<std::string> args = {"ragtrain", "train",  "--config", ini,
                                   "--data",   data,     "--out",    out,
                                   "--device", device_name(cfg.device), "--max-memory", cfg.source.max_memory};
  if (!val.empty()) args.insert(args.end(), {"--val", val});
  if (quiet) args.push_back("--quiet");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return train_config(parse_command_line(static_cast<int>(argv.size()), argv.data()).config);
}

// One training of a run's config file on one fold's data, into `folder`: status, epochs and last validation.
RungResult train_fold(const Search& s, const TrialGroup& g, const std::string& ini, size_t fold,
                      const std::string& folder) {
  RungResult r;
  TrainConfig tc;
  // An error ends this run on the group's ranks (RunAborted), never the search: the other groups go on taking
  // runs, and would wait for this one at the rung's end if it left.
  try {
    collective_phase(g.ctx(), [&] {
      if (g.leader()) fs::remove_all(folder);   // a run a killed tune left half-done starts again from nothing
      tc = parse_run(ini, s.train_paths[fold], s.val_paths[fold], folder, s.cfg, true);
    });
  } catch (const RunAborted&) {
    r.status = TrialStatus::Failed;
    return r;
  }
  Trainer trainer(g.ctx(), tc);
  try {
    trainer.setup_data();
    trainer.setup_resume();
    trainer.setup_shards();
    trainer.setup_backend();
    trainer.open_run_folder();
    // No summarize(): its end-of-run lines are noise between the search's; metrics.jsonl has the run's record.
    const int code = trainer.run();
    r.status = code == kExitOk ? TrialStatus::Done : TrialStatus::Failed;
  } catch (const RunAborted&) {
    r.status = trainer.stopped_nonfinite() ? TrialStatus::Diverged : TrialStatus::Failed;
  }
  r.epochs_reached = trainer.epochs_done();
  r.val_loss = trainer.last_validation().loss();
  r.val_accuracy = trainer.last_validation().accuracy();
  if (r.status == TrialStatus::Done && !std::isfinite(r.val_loss)) r.status = TrialStatus::Diverged;
  return r;
}

// One training run of `trial` at `rung` on the group's ranks: once per fold (the figure is the mean over the
// folds). A run that diverges or fails on any fold is a result too, without a figure.
RungResult run_trial(const Search& s, const TrialGroup& g, int64_t trial, int rung) {
  const Recipe recipe = trial_recipe(s, trial);
  RungResult r;
  r.trial = trial;
  r.rung = rung;
  const std::string base = s.cfg.out + "/" + run_name(trial, rung);
  Stopwatch clock;
  try {
    collective_phase(g.ctx(), [&] {
      r.epochs = rung_epochs(recipe_epochs(recipe), rung, s.rungs, kTuneEta);
      if (g.leader()) write_text_atomic(base + ".ini", run_ini(recipe, r.epochs, trial_seed(s.cfg.seed, trial)));
    });
  } catch (const RunAborted&) {   // e.g. a full disk: this run fails, the search goes on (see train_fold)
    r.status = TrialStatus::Failed;
  }
  const size_t folds = s.train_paths.size();
  r.epochs_reached = r.epochs;
  for (size_t f = 0; f < folds && r.status == TrialStatus::Done; ++f) {   // Done until a fold says otherwise
    const RungResult one = train_fold(s, g, base + ".ini", f, folds == 1 ? base : base + "-f" + std::to_string(f));
    r.status = one.status;
    r.epochs_reached = std::min(r.epochs_reached, one.epochs_reached);
    r.val_loss += one.val_loss / static_cast<double>(folds);
    r.val_accuracy += one.val_accuracy / static_cast<double>(folds);
  }
  if (r.status != TrialStatus::Done) r.val_loss = r.val_accuracy = std::nan("");   // no figure, not a zero
  r.seconds = clock.seconds();
  return r;
}

std::string figure_text(const RungResult& r, bool classification) {
  if (r.status != TrialStatus::Done) return trial_status_name(r.status);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s %.4f", figure_name(classification), classification ? r.val_accuracy : r.val_loss);
  return buf;
}

// ---- one rung ----

// The results of this rung's runs that finished before (a resumed tune): rank 0 reads runs/tNNNN-rR.csv.
std::map<int64_t, RungResult> finished_runs(const Search& s, const std::vector<int64_t>& trials, int rung) {
  std::map<int64_t, RungResult> done;
  for (int64_t t : trials) {
    std::stringstream in(read_text(s.cfg.out + "/" + run_name(t, rung) + ".csv"));
    std::string header, row;
    RungResult r;
    if (std::getline(in, header) && std::getline(in, row) && parse_trials_csv_row(row, r) && r.trial == t &&
        r.rung == rung)
      done[t] = r;
  }
  return done;
}

// The group leaders take the rung's jobs from the shared queue until it is empty (or the budget is spent); each
// run's result file is written as it ends. Returns this leader's rows (empty on other ranks).
std::string run_jobs(const Search& s, const TrialGroup& g, int rung, const std::vector<int64_t>& jobs,
                     const Stopwatch& since_start, const Context& world, RungResult best) {
  TrialQueue queue(world.world);
  std::string rows;
  Stopwatch rung_clock;
  const double budget_s = 60.0 * s.cfg.tune.budget_minutes;
  for (;;) {
    int64_t job = 0;
    if (g.leader()) {
      job = queue.take();
      // The search's first run starts whatever the budget, so that a budget spent before it (by the set-up, on a
      // busy machine) still ends in a recipe rather than in "no trial finished".
      const bool first_run = rung == 0 && job == 0;
      if (budget_s > 0 && since_start.seconds() >= budget_s && !first_run) job = static_cast<int64_t>(jobs.size());
    }
    MPI_CHECK(MPI_Bcast(&job, 1, MPI_INT64_T, 0, g.ctx().world));
    if (job >= static_cast<int64_t>(jobs.size())) break;
    const int64_t trial = jobs[static_cast<size_t>(job)];
    const RungResult r = run_trial(s, g, trial, rung);
    if (!g.leader()) continue;
    const std::string row = trials_csv_row(r, trial_seed(s.cfg.seed, trial), trial_recipe(s, trial));
    write_text_atomic(s.cfg.out + "/" + run_name(trial, rung) + ".csv", trials_csv_header(s.space) + row);
    rows += row;
    const int64_t finished = queue.finish() + 1;
    // The best this leader knows of: the rungs before (from rank 0) and its own runs of this rung.
    best = r.rung > best.rung || best.trial < 0 ? r : ranked({best, r}, s.classification).front();
    if (!s.cfg.talk.quiet) {
      const double eta = rung_clock.seconds() / static_cast<double>(finished) *
                         static_cast<double>(static_cast<int64_t>(jobs.size()) - finished);
      std::printf("tune: rung %d/%d  trial %lld (%s, group %d)  %s  %s  %lld/%zu of the rung  best so far: "
                  "trial %lld, %s  ETA %s\n",
                  rung + 1, s.rungs, static_cast<long long>(trial), count_of(r.epochs, "epoch").c_str(), g.index(),
                  figure_text(r, s.classification).c_str(), human_duration(r.seconds).c_str(),
                  static_cast<long long>(finished), jobs.size(), static_cast<long long>(best.trial),
                  figure_text(best, s.classification).c_str(), human_duration(eta).c_str());
      std::fflush(stdout);
    }
  }
  return rows;
}

// trials.csv: one row per trial, its last rung's run; rewritten whole (atomically) after every rung.
void write_trials_csv(const Search& s, const std::map<int64_t, RungResult>& latest) {
  std::string text = trials_csv_header(s.space);
  for (const auto& [t, r] : latest) text += trials_csv_row(r, trial_seed(s.cfg.seed, t), trial_recipe(s, t));
  write_text_atomic(s.cfg.out + "/trials.csv", text);
}

struct Outcome {
  std::map<int64_t, RungResult> latest;   // rank 0: each trial's last run
  std::vector<std::vector<RungResult>> rungs;   // rank 0: every rung's results
  int64_t runs_trained = 0;               // runs trained by this invocation (not read back)
  double train_seconds = 0;               // their summed wall time
  double search_seconds = 0;              // wall time of the rungs (set-up and the final model aside)
};

// Every rung: the runs not finished before, trained from the queue; rank 0 merges, records and promotes.
Outcome search(const Search& s, const TrialGroup& g, const Context& world) {
  Outcome out;
  std::vector<int64_t> alive(static_cast<size_t>(s.cfg.tune.trials));
  for (size_t i = 0; i < alive.size(); ++i) alive[i] = static_cast<int64_t>(i);
  Stopwatch since_start;
  for (int rung = 0; rung < s.rungs && !alive.empty(); ++rung) {
    std::map<int64_t, RungResult> done;
    std::string todo, best_row;
    collective_phase(world, [&] {
      if (!world.is_root()) return;
      done = finished_runs(s, alive, rung);
      for (int64_t t : alive)
        if (!done.count(t)) todo += std::to_string(t) + "\n";
      // The best so far, for the leaders' progress lines: this rung's finished runs, else the rung before's.
      std::vector<RungResult> known;
      for (const auto& [t, r] : done) known.push_back(r);
      if (known.empty() && !out.rungs.empty()) known = out.rungs.back();
      if (!known.empty()) best_row = trials_csv_row(ranked(known, s.classification).front(), 0, Recipe{});
    });
    RungResult best;
    best.status = TrialStatus::Failed;
    best.trial = -1;
    parse_trials_csv_row(bcast_text(world.world, best_row), best);
    std::vector<int64_t> jobs;
    std::stringstream list(bcast_text(world.world, todo));
    for (std::string line; std::getline(list, line);) jobs.push_back(std::stoll(line));
    if (world.is_root() && !s.cfg.talk.quiet) {
      std::printf("tune: rung %d/%d: %s x %s, %zu to train (%zu finished before), %s of %s\n", rung + 1,
                  s.rungs, count_of(static_cast<int64_t>(alive.size()), "trial").c_str(),
                  rung == s.rungs - 1 ? "their epochs" : "a fraction of their epochs",
                  jobs.size(), done.size(), count_of(g.count(), "group").c_str(),
                  count_of(s.cfg.tune.ranks_per_trial, "rank").c_str());
      std::fflush(stdout);
    }
    const std::string mine = run_jobs(s, g, rung, jobs, since_start, world, best);
    const std::string rows = gather_text(world.world, mine);
    std::string next;
    collective_phase(world, [&] {
      if (!world.is_root()) return;
      std::stringstream in(rows);
      for (std::string line; std::getline(in, line);) {
        RungResult r;
        if (parse_trials_csv_row(line, r)) {
          done[r.trial] = r;
          out.runs_trained += 1;
          out.train_seconds += r.seconds;
        }
      }
      std::vector<RungResult> results;
      for (const auto& [t, r] : done) {
        results.push_back(r);
        out.latest[t] = r;
      }
      write_trials_csv(s, out.latest);
      out.rungs.push_back(results);
      const bool budget_left = s.cfg.tune.budget_minutes <= 0 || since_start.seconds() < 60 * s.cfg.tune.budget_minutes;
      if (rung + 1 < s.rungs && budget_left && done.size() == alive.size())
        for (int64_t t : promote(results, static_cast<int64_t>(alive.size()), kTuneEta, s.classification,
                                     anchor_trial(s)))
          next += std::to_string(t) + "\n";
      if (!s.cfg.talk.quiet && !results.empty()) {
        const RungResult top = ranked(results, s.classification).front();
        std::printf("tune: rung %d/%d done: best trial %lld, %s\n", rung + 1, s.rungs,
                    static_cast<long long>(top.trial), figure_text(top, s.classification).c_str());
        std::fflush(stdout);
      }
    });
    alive.clear();
    std::stringstream promoted(bcast_text(world.world, next));
    for (std::string line; std::getline(promoted, line);) alive.push_back(std::stoll(line));
  }
  out.search_seconds = since_start.seconds();
  return out;
}

// ---- set-up: the space, the folder's record, the selection data ----

// Every value of every dimension parsed as train would take it, before any training: `pool = avg` is refused now,
// not in the middle of the search.
void check_space(const Search& s) {
  // A scratch file outside --out: the folder is not claimed before the space passed.
  const std::string probe =
      (fs::temp_directory_path() / ("ragtrain-space-check-" + std::to_string(::getpid()) + ".ini")).string();
  for (const Dimension& d : s.space.dims) {
    std::vector<std::string> values = d.choices;
    if (d.kind != Dimension::Kind::Choice) {
      char lo[32], hi[32];
      std::snprintf(lo, sizeof lo, d.integer ? "%.0f" : "%.6g", d.lo);
      std::snprintf(hi, sizeof hi, d.integer ? "%.0f" : "%.6g", d.hi);
      values = {lo, hi};
    }
    for (const std::string& v : values) {
      write_text_atomic(probe, d.name + " = " + v + "\n");
      try {
        parse_run(probe, s.cfg.source.data, "", s.cfg.out + "/runs/space-check", s.cfg, true);
      } catch (const UserError& e) {
        fs::remove(probe);
        throw UserError(RT_MSG("the search space (" << (s.cfg.tune.space.empty() ? "default" : s.cfg.tune.space)
                                                   << "): `" << d.name << " = " << v << "`: " << e.what()),
                        e.hint().empty() ? "every line of a space must be an option of `ragtrain train` with a value "
                                           "it takes (doc/tune.md)"
                                         : e.hint());
      }
    }
  }
  fs::remove(probe);
}

std::string absolute(const std::string& p) { return p.empty() ? p : fs::absolute(p).lexically_normal().string(); }

// DIR/tune.ini: written by the first tune on the folder, compared by every later one (a requeued job continues
// the search only when it is the same search).
void claim_folder(const Search& s) {
  std::ostringstream rec;
  rec << "# ragtrain tune: the search this folder holds; a tune with the same lines continues it\n"
      << "data = " << absolute(s.cfg.source.data) << "\nval = " << (s.cfg.val.empty() ? "split" : absolute(s.cfg.val))
      << "\nseed = " << s.cfg.seed << "\ntrials = " << s.cfg.tune.trials
      << "\nfolds = " << s.train_paths.size() << "\nranks-per-trial = " << s.cfg.tune.ranks_per_trial << "\ndevice = " << device_name(s.cfg.device)
      << "\neta = " << kTuneEta << "\ndefaults-trial = " << anchor_trial(s) << "\n[space]\n"
      << space_text(s.space);
  const std::string path = s.cfg.out + "/" + kTuneRecordName;
  fs::create_directories(s.cfg.out + "/runs");
  if (fs::exists(path)) {
    const std::string before = read_text(path);
    USER_CHECK(before == rec.str(),
               "--out " << s.cfg.out << " holds another search (its " << kTuneRecordName
                        << " differs from this one's):\n--- in the folder\n" << before << "--- this tune\n" << rec.str(),
               "continue that search with the same --data, --val, --seed, --trials, --ranks-per-trial, --device and "
               "--space, or start this one in another --out folder");
    return;
  }
  write_text_atomic(path, rec.str());
}

// Without --val: DIR/split/train.h5 and val.h5, a stratified hold-out of --data, or with folds the k pairs
// DIR/split/foldF/{train,val}.h5 (rank 0, once per folder).
void write_split(const Search& s, const MemoryBudget& budget) {
  bool written = true;
  for (size_t f = 0; f < s.train_paths.size(); ++f)
    written = written && fs::exists(s.train_paths[f]) && fs::exists(s.val_paths[f]);
  if (written) return;
  const DatasetInfo info = read_dataset_info(s.cfg.source.data, MPI_COMM_SELF, budget);
  std::vector<int64_t> all(static_cast<size_t>(info.num_sequences));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  const RaggedData data = to_ragged(read_shard(info, all, MPI_COMM_SELF, budget), info.class_names,
                                    "ragtrain tune split of " + s.cfg.source.data);
  const std::vector<int32_t> strata = info.task == Task::Classification ? data.labels : std::vector<int32_t>{};
  const int k = static_cast<int>(s.train_paths.size());
  const std::vector<SplitIndices> splits =
      k == 1 ? std::vector<SplitIndices>{stratified_split(strata, info.num_sequences, kTuneValFraction, s.cfg.seed)}
             : stratified_folds(strata, info.num_sequences, k, s.cfg.seed);
  for (size_t f = 0; f < splits.size(); ++f) {
    fs::create_directories(fs::path(s.val_paths[f]).parent_path());
    write_dataset(s.val_paths[f], subset(data, splits[f].val));
    write_dataset(s.train_paths[f], subset(data, splits[f].train));
  }
}

// How many folds choose: 1 with --val; else --folds, or (0) 5 for a set under kTuneFoldsBelow sequences and 3
// under kTuneFewFoldsBelow, where one hold-out of 20% is too few sequences to rank trials by, and 1 above.
int fold_count(const TuneConfig& cfg, int64_t sequences) {
  USER_CHECK(cfg.val.empty() || cfg.tune.folds <= 1,
             "--folds " << cfg.tune.folds << " splits --data, but --val " << cfg.val << " is the validation set",
             "leave --folds out with --val, or leave --val out to cross-validate on --data");
  if (!cfg.val.empty()) return 1;
  if (cfg.tune.folds > 0) return static_cast<int>(cfg.tune.folds);
  return sequences < kTuneFoldsBelow ? kTuneAutoFolds : sequences < kTuneFewFoldsBelow ? kTuneFewFolds : 1;
}

// The anchor trial of the default space: each searched option at the value `train` takes without it, read from
// train's own effective configuration (the option table's defaults, never a copy of them).
Recipe defaults_recipe(const Search& s) {
  const std::vector<std::string> args = {"ragtrain", "train", "--data", s.cfg.source.data, "--out",
                                         s.cfg.out + "/runs/defaults-probe"};
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  const std::string effective = parse_command_line(static_cast<int>(argv.size()), argv.data()).config.provenance.effective;
  std::map<std::string, std::string> value;
  std::stringstream in(effective);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find(" = ");
    if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
    value[line.substr(0, eq)] = line.substr(eq + 3);
  }
  Recipe r;
  for (const Dimension& d : s.space.dims) {
    RT_CHECK(value.count(d.name), "train's effective configuration has no `" << d.name << "`");
    r.options.emplace_back(d.name, value[d.name]);
  }
  return r;
}

Search set_up(const Context& world, const TuneConfig& cfg) {
  Search s;
  s.cfg = cfg;
  collective_phase(world, [&] {
    USER_CHECK(world.size % cfg.tune.ranks_per_trial == 0,
               "--ranks-per-trial " << cfg.tune.ranks_per_trial << " does not divide the " << world.size
                                    << " ranks of this job into whole groups",
               "start a multiple of " << cfg.tune.ranks_per_trial << " ranks, or choose --ranks-per-trial among the "
                                      << "divisors of " << world.size);
    s.space = cfg.tune.space.empty() ? default_space() : read_space(cfg.tune.space);
    s.rungs = rung_count(cfg.tune.trials, kTuneEta);
    if (cfg.tune.space.empty()) s.anchor = defaults_recipe(s);
  });
  // The data and the space are checked before the folder is claimed: bad input leaves nothing behind.
  const MemoryBudget budget = MemoryBudget::of(cfg.source.max_memory, world.local_size);
  int folds = 1;
  collective_phase(world, [&] {
    const DatasetInfo data = read_dataset_info(cfg.source.data, world.world, budget);
    require_labels(data, "--data", "tuning");
    if (!cfg.val.empty()) require_labels(read_dataset_info(cfg.val, world.world, budget), "--val", "ranking the trials");
    folds = fold_count(cfg, data.num_sequences);
  });
  for (int f = 0; f < folds; ++f) {
    const std::string dir = cfg.out + "/split" + (folds == 1 ? "" : "/fold" + std::to_string(f));
    s.train_paths.push_back(cfg.val.empty() ? dir + "/train.h5" : cfg.source.data);
    s.val_paths.push_back(cfg.val.empty() ? dir + "/val.h5" : cfg.val);
  }
  collective_phase(world, [&] {
    if (!world.is_root()) return;
    check_space(s);
    claim_folder(s);
  });
  s.selection = !cfg.val.empty() ? "--val " + cfg.val
                : folds == 1 ? "a stratified " + std::to_string(static_cast<int>(100 * kTuneValFraction)) +
                                   "% of --data (split/val.h5)"
                             : "stratified " + std::to_string(folds) + "-fold cross-validation on --data (the mean "
                                   "over split/fold*/val.h5)";
  collective_phase(world, [&] {
    if (world.is_root() && cfg.val.empty()) write_split(s, budget);
  });
  collective_phase(world, [&] {
    s.classification = read_dataset_info(s.train_paths[0], world.world, budget).task == Task::Classification;
    for (const std::string& v : s.val_paths) s.validated += read_dataset_info(v, world.world, budget).num_sequences;
  });
  return s;
}

// ---- the result: best.ini, the final model, summary.json ----

// What a run costs to train, from its config file as train parses it: epochs x layers x directions x hidden^2,
// the LSTM's recurrent multiply-adds per time step over the run (the input's share aside). Ranks recipes by size
// and length only; the choice among close figures needs no more.
double run_cost(const Search& s, const RungResult& r) {
  const std::string ini = s.cfg.out + "/" + run_name(r.trial, r.rung) + ".ini";
  const TrainConfig tc = parse_run(ini, s.train_paths[0], "", s.cfg.out + "/runs/cost-probe", s.cfg, true);
  const auto h = static_cast<double>(tc.model.hidden);
  return static_cast<double>(tc.schedule.epochs) * static_cast<double>(tc.model.layers) *
         (tc.model.bidirectional ? 2.0 : 1.0) * h * h;
}

// The run the search ends with: of the last rung with a finished run, the cheapest within the noise of its best
// figure (choose_best; classification: one standard error or one sequence, accuracy_noise).
RungResult best_result(const Search& s, const Outcome& o) {
  for (auto it = o.rungs.rbegin(); it != o.rungs.rend(); ++it) {
    const std::vector<RungResult> order = ranked(*it, s.classification);
    if (order.empty() || order.front().status != TrialStatus::Done) continue;
    std::vector<double> cost;
    for (const RungResult& r : *it) cost.push_back(r.status == TrialStatus::Done ? run_cost(s, r) : 0.0);
    const double noise = s.classification ? accuracy_noise(order.front().val_accuracy, s.validated) : 0.0;
    return choose_best(*it, cost, s.classification, noise);
  }
  throw UserError("no trial finished: every training run diverged or failed (trials.csv says how each ended)",
                  "narrow the space (e.g. a lower `lr` range) with --space, or check the data with `ragtrain inspect`");
}

void write_summary(const Search& s, const Outcome& o, const RungResult& best, const Context& world, double wall) {
  Json rungs = Json::array();
  for (const auto& rung : o.rungs) {
    Json r = {{"runs", rung.size()}};
    int64_t done = 0;
    for (const RungResult& x : rung) done += x.status == TrialStatus::Done;
    r["done"] = done;
    r["diverged_or_failed"] = static_cast<int64_t>(rung.size()) - done;
    rungs.push_back(r);
  }
  const Recipe recipe = trial_recipe(s, best.trial);
  Json chosen = Json::object();
  for (const auto& [n, v] : recipe.options) chosen[n] = v;
  chosen["epochs"] = recipe_epochs(recipe);   // best.ini's: the trial's own, also where the budget cut its rungs
  chosen["seed"] = trial_seed(s.cfg.seed, best.trial);
  const double minutes = o.search_seconds / 60.0;
  Json j = {{"command", s.cfg.provenance.command_line},
            {"finished_at", utc_now()},
            {"data", s.cfg.source.data},
            {"selection", s.selection},
            {"ranks", world.size},
            {"ranks_per_trial", s.cfg.tune.ranks_per_trial},
            {"groups", world.size / s.cfg.tune.ranks_per_trial},
            {"device", device_name(s.cfg.device)},
            {"trials", s.cfg.tune.trials},
            {"defaults_trial", anchor_trial(s)},
            {"validated_sequences", s.validated},
            {"eta", kTuneEta},
            {"rungs", rungs},
            {"runs_trained_now", o.runs_trained},
            {"run_seconds_sum", o.train_seconds},
            {"search_seconds", o.search_seconds},
            {"wall_seconds", wall},
            // The search's throughput: runs trained by this invocation over the rungs' wall time.
            {"runs_per_minute", minutes > 0 ? static_cast<double>(o.runs_trained) / minutes : 0.0},
            {"best", {{"trial", best.trial},
                      {"rung", best.rung},
                      {"figure", figure_name(s.classification)},
                      {"val_loss", best.val_loss},
                      {"val_accuracy", best.val_accuracy},
                      {"ranked_after_epochs", best.epochs},
                      {"options", chosen}}},
            {"best_ini", "best.ini"},
            {"final", "final/checkpoint.h5"},
            {"space", space_text(s.space)}};
  write_json_atomic(s.cfg.out + "/summary.json", j);
}

// Group 0: DIR/final, trained with best.ini on all of --data. Returns its exit code (an error was printed).
int train_final(const TuneConfig& cfg, const TrialGroup& group) {
  const std::string final_dir = cfg.out + "/final";
  if (fs::exists(final_dir + "/summary.json")) return kExitOk;   // a resumed tune whose final model was trained
  try {
    TrainConfig tc;
    collective_phase(group.ctx(), [&] {
      if (group.leader()) fs::remove_all(final_dir);
      tc = parse_run(cfg.out + "/best.ini", cfg.source.data, "", final_dir, cfg, cfg.talk.quiet);
    });
    Trainer trainer(group.ctx(), tc);
    trainer.setup_data();
    trainer.setup_resume();
    trainer.setup_shards();
    trainer.setup_backend();
    trainer.open_run_folder();
    trainer.announce();
    const int code = trainer.run();
    if (code == kExitOk) trainer.summarize();
    return code;
  } catch (const RunAborted& a) {
    return a.code;
  }
}

}  // namespace

int run_tune(const Context& world, const TuneConfig& cfg) {
  Stopwatch wall;
  const Search s = set_up(world, cfg);
  if (world.is_root() && !cfg.talk.quiet) {
    std::printf("tune: %s, %lld trials in %d rungs (eta %d), %s of %s; ranked by %s on %s\n",
                count_of(world.size, "rank").c_str(), static_cast<long long>(cfg.tune.trials), s.rungs, kTuneEta,
                count_of(world.size / cfg.tune.ranks_per_trial, "group").c_str(),
                count_of(cfg.tune.ranks_per_trial, "rank").c_str(), figure_name(s.classification),
                s.selection.c_str());
    std::fflush(stdout);
  }
  const TrialGroup group(world, cfg.tune);
  const Outcome o = search(s, group, world);

  // best.ini is the best run's own config file: the recipe it was ranked with, word for word (but for the epochs of
  // a search the budget cut short).
  std::string best_ini;
  RungResult best;
  collective_phase(world, [&] {
    if (!world.is_root()) return;
    best = best_result(s, o);
    std::ostringstream head;
    head << "# ragtrain tune: trial " << best.trial << ", " << figure_text(best, s.classification) << " on "
         << s.selection << " after " << best.epochs << " epochs (rung " << best.rung + 1 << " of " << s.rungs
         << "), trained on " << count_of(cfg.tune.ranks_per_trial, "rank")
         << "; the global batch is ranks x batch-per-rank, so train on as many for the same model\n";
    // A budget that ended the search before this trial's last rung ranked it after a fraction of its epochs: that
    // is a cheap estimate of the recipe, not the recipe, so best.ini trains the trial's own epochs (a recipe cut to
    // a ninth of its epochs trained 0.42 where its full run reached 0.69 on GesturePebbleZ1).
    const Recipe recipe = trial_recipe(s, best.trial);
    const int64_t own_epochs = recipe_epochs(recipe);
    if (best.epochs < own_epochs)
      head << "# the budget ended the search before this trial's last rung: ranked after " << best.epochs
           << " epochs, the recipe trains its own " << own_epochs << "\n";
    best_ini = head.str() + (best.epochs < own_epochs
                                 ? run_ini(recipe, own_epochs, trial_seed(s.cfg.seed, best.trial))
                                 : read_text(cfg.out + "/" + run_name(best.trial, best.rung) + ".ini"));
    write_text_atomic(cfg.out + "/best.ini", best_ini);
    if (!cfg.talk.quiet) std::printf("tune: best recipe (%s/best.ini):\n%s", cfg.out.c_str(), best_ini.c_str());
  });

  // The final model: the best recipe on all of --data, by the first group (the recipe's rank count); the other
  // groups wait, and learn its exit code.
  int code = kExitOk;
  if (group.index() == 0) code = train_final(cfg, group);
  int worst = code;
  MPI_CHECK(MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, world.world));
  if (worst != kExitOk) return worst;
  collective_phase(world, [&] {
    if (!world.is_root()) return;
    write_summary(s, o, best, world, wall.seconds());
    if (!cfg.talk.quiet)
      std::printf("tune: done in %s: %s/best.ini, %s/final/checkpoint.h5 (eval and predict take it), %s/trials.csv\n",
                  human_duration(wall.seconds()).c_str(), cfg.out.c_str(), cfg.out.c_str(), cfg.out.c_str());
  });
  return kExitOk;
}

}  // namespace ragtrain
