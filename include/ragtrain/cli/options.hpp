// The one option table (Boost.Program_options) for every subcommand and config file, the parsed RunConfig (its
// option groups), and the typed configuration each subcommand takes from it, whole groups (GenConfig ...
// CompareConfig, TrainConfig, BenchConfig).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/core/option_groups.hpp"
#include "ragtrain/data/missing.hpp"
#include "ragtrain/data/normalization.hpp"
#include "ragtrain/data/synthetic.hpp"
#include "ragtrain/model/model.hpp"
#include "ragtrain/optim/optimizer.hpp"
#include "ragtrain/schedule/schedule.hpp"
#include "ragtrain/train/train_config.hpp"
#include "ragtrain/tune/tune_config.hpp"

namespace ragtrain {

// simulate's --ranks: the rank counts to simulate, each > 0 ("8,64,1024").
struct RankCounts {
  std::vector<int64_t> values;
  std::string text;             // as typed (the effective configuration prints it back)
};

// simulate's --lengths: uniform:MIN:MAX (1 <= MIN <= MAX) or lognormal:MEDIAN:SIGMA (MEDIAN > 0, SIGMA >= 0).
struct LengthDistribution {
  enum class Kind { Uniform, Lognormal };
  Kind kind = Kind::Uniform;
  double a = 60, b = 130;       // MIN, MAX or MEDIAN, SIGMA
  std::string text = "uniform:60:130";
};

// convert's own options: what to convert, and how labels and missing values are read.
struct ConvertOptions {
  std::string input, output;      // INPUT (.ts, .npz or a CSV folder), OUTPUT.h5
  std::string labels;             // --labels LABELS.csv (a CSV folder only)
  std::string class_names_from;   // --class-names-from TRAIN.h5; empty: classes numbered in the input's order
  bool regression = false;        // --regression: the labels are regression targets
  MissingMode missing = MissingMode::Error;   // --missing: error | trim | zero | ffill (missing feature values)
};

// bench's own options: how many steps are timed, after how many untimed ones.
struct BenchTiming {
  int64_t steps = 200, warmup = 20;
};

// simulate's own options: the rank counts, and the drawn lengths (when there is no --data).
struct SimulateOptions {
  RankCounts ranks{{8, 64, 1024}, "8,64,1024"};
  LengthDistribution lengths;
  int64_t sequences_per_rank = 1000;
};

// The parse target: every option of every subcommand, each bound by the option table (options.cpp) to one field
// of one group, so that a command's configuration is made of whole groups and no field is copied twice. Names
// match the command line (dashes become underscores here only); string choices arrive already parsed into their
// enums (a bad value is a UserError naming the option). A subcommand accepts only the options it uses (the table
// says which); the groups it does not take keep the defaults below, which are the command line's.
struct RunConfig {
  std::string command;          // gen | convert | inspect | train | tune | eval | predict | bench | simulate | plot | compare
  std::string config_file;      // --config
  Provenance provenance;        // argv as typed; the effective configuration (filled in once validated)
  bool print_config = false;    // --print-config: print the effective configuration and exit 0
  bool force = false;           // --force: outputs may replace existing files (never inputs, data sets, checkpoints)
  bool write_statistics = false;   // inspect --write-statistics
  Verbosity talk;               // --quiet, --verbose (more detail: files read by convert, per-rank counts in eval)

  // Files: what each command reads and writes.
  DataSource source;            // --data (train: the training set), --max-memory
  std::string out;              // --out: each command's own output, a file or (train) a folder
  std::string checkpoint;       // eval, predict: --checkpoint CKPT.h5 | DIR
  std::string run;              // plot: the folder to plot
  std::vector<std::string> runs;   // compare: train --out folders (or their summary.json files)
  std::string trace;            // train, bench: --trace FILE.json (Chrome trace of every rank's phases)

  ConvertOptions convert;
  SyntheticSpec synthetic;      // gen, and bench without --data; its seed is --seed (schedule.seed)
  ModelOptions model;
  // The training defaults (normalize feature, pool mean, 30 epochs, lr 0.01, cosine decay, clip 1) give the best
  // median test accuracy over the real-data table of doc/accuracy.md ("Choosing the defaults"), measured 2026-12-03.
  OptimizerConfig optimizer = [] {
    OptimizerConfig o;
    o.clip = 1.0;
    return o;
  }();
  LrSchedule lr{1e-2, 0, LrDecay::Cosine};   // --lr, --warmup-steps, --lr-decay, --lr-final-fraction
  ScheduleOptions schedule;
  BackendChoice backend;
  Normalization normalize = Normalization::Feature;   // --normalize none | feature | series
  StartOptions start;
  ValidationOptions validation;
  RecordOptions records;
  FaultOptions faults;
  BenchTiming timing;
  SimulateOptions simulate;
  TuneOptions tune;
};

// `bench`: the Trainer's set-up and step, timed.
struct BenchConfig {
  TrainConfig run;              // data (file or synthetic), model, optimizer, schedule, device
  SyntheticSpec synthetic;      // the synthetic set's options (the table prints its lengths; used without --data)
  BenchTiming timing;
  std::string out;              // RESULT.json; empty: none
};

// `eval` and `predict`: a checkpoint (or a run folder) applied to a data set.
struct EvalConfig {
  std::string checkpoint;       // CKPT.h5, or a train --out folder (its best.h5, else its checkpoint.h5)
  DataSource source;
  std::string out;              // eval: METRICS.json (optional); predict: PRED.csv
  Device device = Device::Cpu;
  Verbosity talk;
};

// `gen`: a synthetic data set written to one file.
struct GenConfig {
  SyntheticSpec spec;
  std::string out;              // FILE.h5
  Verbosity talk;               // quiet only
};

// `convert`: a .ts file, a .npz file or a folder of CSV files to format v1.
struct ConvertConfig {
  ConvertOptions convert;
  Verbosity talk;
};

// `inspect`: one data file validated and summarised.
struct InspectConfig {
  DataSource source;
  bool write_statistics = false;   // --write-statistics: (re)write the file's /statistics from its data
  Verbosity talk;               // quiet: the verdict alone, without the summary
};

// `simulate`: the schedules' statistics for several rank counts, on drawn lengths or a file's.
struct SimulateConfig {
  SimulateOptions simulate;
  ScheduleOptions schedule;     // epochs, batch-per-rank, seed (both schedule kinds are simulated)
  std::string data;             // a data set whose lengths are simulated; empty: drawn lengths
  std::string out;              // R.json; empty: none
};

// `plot`: the figures of a run folder or of a folder of bench records.
struct PlotConfig {
  std::string run;
  std::string out;              // --out, or RUN/plots when not given
  Verbosity talk;               // quiet only
};

// `compare`: several train runs side by side.
struct CompareConfig {
  std::vector<std::string> runs;   // run folders or their summary.json files
  std::string out;              // TABLE.json | TABLE.csv; empty: the table on stdout only
  Verbosity talk;               // quiet only
};

// The typed configuration of each subcommand, from a RunConfig parsed for that command (a mismatch is a bug).
GenConfig gen_config(const RunConfig& c);
ConvertConfig convert_config(const RunConfig& c);
InspectConfig inspect_config(const RunConfig& c);
TrainConfig train_config(const RunConfig& c);
TuneConfig tune_config(const RunConfig& c);
BenchConfig bench_config(const RunConfig& c);
EvalConfig eval_config(const RunConfig& c);
SimulateConfig simulate_config(const RunConfig& c);
PlotConfig plot_config(const RunConfig& c);
CompareConfig compare_config(const RunConfig& c);

struct Invocation {
  RunConfig config;
  bool help = false;       // help text was requested; `help_text` holds it
  std::string help_text;
  int exit_code = 0;       // with `help`: 0, or kExitUserError for no command at all (then the text is for stderr)
};

// Parses argv (argv[1] is the subcommand). Command-line values override --config file values, which override
// defaults. Throws UserError for an unknown subcommand/option, a bad value, or an invalid combination.
Invocation parse_command_line(int argc, const char* const* argv);

// Help for the whole program (list of subcommands).
std::string program_help();

// The options of train that change neither the model nor how it is trained: what is printed and recorded and
// where, checkpoint cadence and resume, the watchdog, the memory budget. `compare` does not list them as
// differences between runs.
const std::set<std::string>& record_keeping_options();

// All subcommand names, in help order.
const std::vector<std::string>& subcommands();

}  // namespace ragtrain
