// The one option table (Boost.Program_options) for every subcommand and config file, the parsed RunConfig, and
// the typed configuration each subcommand takes from it (GenConfig ... PlotConfig, TrainConfig, BenchConfig).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/data/missing.hpp"
#include "ragtrain/data/normalization.hpp"
#include "ragtrain/data/synthetic.hpp"
#include "ragtrain/model/model.hpp"
#include "ragtrain/optim/optimizer.hpp"
#include "ragtrain/schedule/schedule.hpp"
#include "ragtrain/train/train_config.hpp"

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

// Every option of every subcommand; names match the command line (dashes become underscores here only). String
// choices arrive here already parsed into their enums (a bad value is a UserError naming the option); a
// subcommand accepts only the options it uses (the table in options.cpp says which).
struct RunConfig {
  std::string command;          // gen | convert | inspect | train | eval | predict | bench | simulate | plot | compare
  std::string config_file;      // --config
  std::string command_line;     // argv as typed, shell-quoted (provenance)

  // files
  std::string data, val, out, checkpoint, input, output;

  // gen
  int64_t sequences = 1000, features = 36, min_length = 60, max_length = 130, classes = 10, outputs = 1;
  Task task = Task::Classification;

  // model
  int64_t layers = 1, hidden = 50;
  bool bidirectional = false;   // --bidirectional
  Pool pool = Pool::Mean;       // --pool last | mean | max (default mean: doc/accuracy.md, "Choosing the defaults")
  double dropout = 0.0, head_dropout = 0.0;   // --dropout (between LSTM layers), --head-dropout (before the head)
  Normalization normalize = Normalization::Feature;   // --normalize none | feature | series (default: doc/accuracy.md)
  std::string init_from;   // train: initial weights from a checkpoint
  bool write_order = false;
  std::string trace;       // train, bench: --trace FILE.json (Chrome trace of every rank's phases)

  // training
  // The training defaults (normalize feature, pool mean, 30 epochs, lr 0.01, cosine decay, clip 1) give the best
  // median test accuracy over the real-data table of doc/accuracy.md ("Choosing the defaults"), measured 2026-12-03.
  int64_t epochs = 30, batch_per_rank = 1, warmup_steps = 0, log_every = 100;
  OptimizerKind optimizer = OptimizerKind::Adam;
  LrDecay lr_decay = LrDecay::Cosine;
  Device device = Device::Cpu;
  LstmPath lstm = LstmPath::Auto;   // --lstm: the CUDA backend's LSTM, cudnn | fused | auto
  double lr = 1e-2, momentum = 0.9, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0, clip = 1.0,
         lr_final_fraction = 0.0;
  uint64_t seed = 1;
  bool quiet = false;
  bool verbose = false;         // --verbose: more detail (files read by convert, per-rank counts in eval)
  bool print_config = false;    // --print-config: print `effective` and exit 0
  bool force = false;           // --force: outputs may replace existing files (never inputs, data sets, checkpoints)

  // convert: labels of CSV folders and .npz files
  std::string labels;             // --labels LABELS.csv (a folder of CSV files)
  std::string class_names_from;   // --class-names-from TRAIN.h5: number the classes as that file does
  bool regression = false;        // --regression: the labels are regression targets
  MissingMode missing = MissingMode::Error;   // --missing: error | trim | zero | ffill (missing feature values)

  // model selection (train): validate also every N steps, which figure picks DIR/best.h5, early stopping
  int64_t val_every = 0, early_stop = 0;
  std::optional<SelectMetric> select;   // unset: val_accuracy for classification, val_loss for regression

  // checkpoints and resume (train)
  std::string resume;           // --resume CKPT.h5 | DIR
  int64_t checkpoint_every = 0, keep = 3, signal_check_every = 10;
  double checkpoint_minutes = 0.0;

  // reliability (doc/reliability.md)
  std::string max_memory = "auto";   // --max-memory: bytes one rank may allocate for its data ("auto": RAM/ranks per node)
  double comm_timeout = 20.0;        // --comm-timeout: seconds a rank waits on the others before declaring one dead
  NonfinitePolicy on_nonfinite = NonfinitePolicy::Stop;   // --on-nonfinite: stop | skip (a NaN/Inf loss or gradient)

  // plot
  std::string run;              // the folder to plot

  // compare
  std::vector<std::string> runs;   // train --out folders (or their summary.json files)

  // bench
  int64_t steps = 200, warmup = 20;
  ScheduleKind schedule = ScheduleKind::Balanced;

  // simulate
  RankCounts ranks{{8, 64, 1024}, "8,64,1024"};
  LengthDistribution lengths;
  int64_t sequences_per_rank = 1000;

  // The effective configuration in config-file form (name = value), options of this command only.
  std::string effective;
};

// `bench`: the Trainer's set-up and step, timed.
struct BenchConfig {
  TrainConfig run;              // data (file or synthetic), model, optimizer, schedule, device
  int64_t steps = 200, warmup = 20;
  std::string out;              // RESULT.json; empty: none
};

// `eval` and `predict`: a checkpoint (or a run folder) applied to a data set.
struct EvalConfig {
  std::string checkpoint;       // CKPT.h5, or a train --out folder (its best.h5, else its checkpoint.h5)
  std::string data;
  std::string out;              // eval: METRICS.json (optional); predict: PRED.csv
  std::string max_memory = "auto";
  Device device = Device::Cpu;
  bool quiet = false, verbose = false;
};

// `gen`: a synthetic data set written to one file.
struct GenConfig {
  SyntheticSpec spec;
  std::string out;              // FILE.h5
  bool quiet = false;
};

// `convert`: a .ts file, a .npz file or a folder of CSV files to format v1.
struct ConvertConfig {
  std::string input, output;    // INPUT, OUTPUT.h5
  std::string labels;           // --labels LABELS.csv (a CSV folder only)
  std::string class_names_from; // --class-names-from TRAIN.h5; empty: classes numbered in the input's order
  bool regression = false;
  MissingMode missing = MissingMode::Error;   // --missing: what a missing feature value becomes
  bool quiet = false, verbose = false;
};

// `inspect`: one data file validated and summarised.
struct InspectConfig {
  std::string data;
  std::string max_memory = "auto";
  bool quiet = false;           // the verdict alone, without the summary
};

// `simulate`: the schedules' statistics for several rank counts, on drawn lengths or a file's.
struct SimulateConfig {
  std::vector<int64_t> ranks;
  LengthDistribution lengths;   // used when `data` is empty
  std::string data;             // a data set whose lengths are simulated
  std::string out;              // R.json; empty: none
  int64_t sequences_per_rank = 1000, epochs = 10, batch_per_rank = 1;
  uint64_t seed = 1;
};

// `plot`: the figures of a run folder or of a folder of bench records.
struct PlotConfig {
  std::string run;
  std::string out;              // --out, or RUN/plots when not given
  bool quiet = false;
};

// The typed configuration of each subcommand, from a RunConfig parsed for that command (a mismatch is a bug).
GenConfig gen_config(const RunConfig& c);
ConvertConfig convert_config(const RunConfig& c);
InspectConfig inspect_config(const RunConfig& c);
TrainConfig train_config(const RunConfig& c);
BenchConfig bench_config(const RunConfig& c);
EvalConfig eval_config(const RunConfig& c);
SimulateConfig simulate_config(const RunConfig& c);
PlotConfig plot_config(const RunConfig& c);

struct Invocation {
  RunConfig config;
  bool help = false;       // help text was requested; `help_text` holds it
  std::string help_text;
};

// Parses argv (argv[1] is the subcommand). Command-line values override --config file values, which override
// defaults. Throws UserError for an unknown subcommand/option, a bad value, or an invalid combination.
Invocation parse_command_line(int argc, const char* const* argv);

// Help for the whole program (list of subcommands).
std::string program_help();

// All subcommand names, in help order.
const std::vector<std::string>& subcommands();

}  // namespace ragtrain
