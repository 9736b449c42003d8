// The option table, config-file merging and validation of option values and combinations.
#include "ragtrain/cli/options.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <map>
#include <boost/make_shared.hpp>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>

#include "ragtrain/cli/config_file.hpp"
#include "ragtrain/cli/suggest.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/memory.hpp"

namespace po = boost::program_options;

namespace ragtrain {

// Boost.Program_options calls these (found by argument-dependent lookup) to turn an option's text into its enum,
// so every string choice is parsed once, here. A bad value names the option and the choices.
namespace {

template <class E>
void parse_choice(boost::any& v, const std::vector<std::string>& values, std::initializer_list<E> all,
                  const char* (*name)(E)) {
  po::validators::check_first_occurrence(v);
  const std::string& s = po::validators::get_single_string(values);
  std::vector<std::string> names;
  for (E e : all) {
    if (s == name(e)) {
      v = e;
      return;
    }
    names.push_back(name(e));
  }
  std::string choices;   // "a, b or c"
  for (size_t i = 0; i < names.size(); ++i)
    choices += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  std::string guess;   // "adam or adamw" for "adamm"
  for (const std::string& n : closest_names(s, names)) guess += (guess.empty() ? "" : " or ") + n;
  po::error_with_option_name err("option %canonical_option%: must be " + choices + ", got '%value%'" +
                                 (guess.empty() ? "" : " (did you mean " + guess + "?)"));
  err.set_substitute("value", s);
  throw err;
}

}  // namespace

void validate(boost::any& v, const std::vector<std::string>& values, Task*, int) {
  parse_choice(v, values, {Task::Classification, Task::Regression}, task_name);
}
void validate(boost::any& v, const std::vector<std::string>& values, OptimizerKind*, int) {
  parse_choice(v, values, {OptimizerKind::Sgd, OptimizerKind::Adam, OptimizerKind::AdamW}, optimizer_name);
}
void validate(boost::any& v, const std::vector<std::string>& values, LrDecay*, int) {
  parse_choice(v, values, {LrDecay::None, LrDecay::Linear, LrDecay::Cosine}, lr_decay_name);
}
void validate(boost::any& v, const std::vector<std::string>& values, ScheduleKind*, int) {
  parse_choice(v, values, {ScheduleKind::Balanced, ScheduleKind::Random}, schedule_kind_name);
}
void validate(boost::any& v, const std::vector<std::string>& values, NonfinitePolicy*, int) {
  parse_choice(v, values, {NonfinitePolicy::Stop, NonfinitePolicy::Skip}, nonfinite_policy_name);
}
void validate(boost::any& v, const std::vector<std::string>& values, SelectMetric*, int) {
  parse_choice(v, values, {SelectMetric::ValLoss, SelectMetric::ValAccuracy}, select_metric_name);
}
void validate(boost::any& v, const std::vector<std::string>& values, Normalization*, int) {
  const std::string& s = po::validators::get_single_string(values);
  if (s == "true" || s == "false")   // --normalize was a switch before it had modes
    throw UserError("option --normalize: must be none, feature or series, got '" + s + "'",
                    "`normalize = " + s + "` of earlier versions is `normalize = " + (s == "true" ? "feature" : "none") +
                        "`");
  v = parse_normalization(s);
}
void validate(boost::any& v, const std::vector<std::string>& values, LstmPath*, int) {
  parse_choice(v, values, {LstmPath::Cudnn, LstmPath::Fused, LstmPath::Auto}, lstm_path_name);
}
void validate(boost::any& v, const std::vector<std::string>& values, MissingMode*, int) {
  parse_choice(v, values, {MissingMode::Error, MissingMode::Trim, MissingMode::Zero, MissingMode::Ffill},
               missing_mode_name);
}
void validate(boost::any& v, const std::vector<std::string>& values, Pool*, int) {
  parse_choice(v, values, {Pool::Last, Pool::Mean, Pool::Max}, pool_name);
}
void validate(boost::any& v, const std::vector<std::string>& values, RankCounts*, int) {
  const std::string& text = po::validators::get_single_string(values);
  RankCounts r{{}, text};
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long long n = std::strtoll(item.c_str(), &end, 10);
    USER_CHECK(!item.empty() && end && *end == '\0' && n > 0,
               "option --ranks: '" << item << "' is not a positive integer", "e.g. --ranks 8,64,1024");
    r.values.push_back(n);
  }
  USER_CHECK(!r.values.empty(), "option --ranks: empty", "e.g. --ranks 8,64,1024");
  v = r;
}
void validate(boost::any& v, const std::vector<std::string>& values, LengthDistribution*, int) {
  const std::string& spec = po::validators::get_single_string(values);
  const std::string hint = "use uniform:MIN:MAX or lognormal:MEDIAN:SIGMA, e.g. --lengths lognormal:100:0.6";
  const size_t a = spec.find(':'), b = spec.find(':', a == std::string::npos ? a : a + 1);
  USER_CHECK(a != std::string::npos && b != std::string::npos, "option --lengths: cannot parse '" << spec << "'", hint);
  LengthDistribution d;
  d.text = spec;
  try {
    d.a = std::stod(spec.substr(a + 1, b - a - 1));
    d.b = std::stod(spec.substr(b + 1));
  } catch (const std::exception&) {
    throw UserError("option --lengths: cannot parse the numbers in '" + spec + "'", hint);
  }
  const std::string kind = spec.substr(0, a);
  if (kind == "uniform") {
    d.kind = LengthDistribution::Kind::Uniform;
    USER_CHECK(d.a >= 1 && d.b >= d.a, "option --lengths: uniform needs 1 <= MIN <= MAX, got '" << spec << "'", hint);
  } else if (kind == "lognormal") {
    d.kind = LengthDistribution::Kind::Lognormal;
    USER_CHECK(d.a > 0 && d.b >= 0, "option --lengths: lognormal needs MEDIAN > 0 and SIGMA >= 0", hint);
  } else {
    throw UserError("option --lengths: unknown distribution '" + kind + "'", hint);
  }
  v = d;
}
void validate(boost::any& v, const std::vector<std::string>& values, Device*, int) {
#ifdef RAGTRAIN_WITH_CUDA
  parse_choice(v, values, {Device::Cpu, Device::Cuda, Device::Auto}, device_name);
#else
  const std::string& s = po::validators::get_single_string(values);
  if (s != "cpu")
    throw UserError("option --device: must be cpu (this build has no CUDA backend), got '" + s + "'",
                    "rebuild on a machine with CUDA, cuDNN and NCCL for --device cuda");
  parse_choice(v, values, {Device::Cpu}, device_name);
#endif
}

namespace {

struct CommandInfo {
  std::string name, usage, summary;
  std::vector<std::string> positional;   // names bound to positional arguments, in order
};

const std::vector<CommandInfo>& command_infos() {
  static const std::vector<CommandInfo> infos = {
      {"gen", "ragtrain gen --out FILE.h5 [options]", "write a synthetic, learnable ragged data set", {}},
      {"convert", "ragtrain convert INPUT.ts|INPUT.npz OUTPUT.h5  |  ragtrain convert CSV_DIR [--labels LABELS.csv] OUTPUT.h5",
       "convert a UEA/sktime .ts file, a NumPy .npz file or a folder of CSV files to format v1",
       {"input", "output"}},
      {"inspect", "ragtrain inspect FILE.h5", "validate a data file and summarise it (exit 0 valid, 2 not)",
       {"data"}},
      {"train", "ragtrain train --data TRAIN.h5 [--val VAL.h5] --out DIR [options]",
       "train one LSTM + Linear model data-parallel over all ranks", {}},
      {"tune", "ragtrain tune --data TRAIN.h5 [--val VAL.h5] --out DIR [--space SPACE.ini] [--trials N]",
       "search train's options (successive halving, trials in parallel on groups of ranks), then train the best",
       {}},
      {"eval", "ragtrain eval --checkpoint CKPT.h5 --data FILE.h5 [--out METRICS.json]",
       "loss, accuracy, per-class precision/recall/F1 and confusion matrix (or MSE/MAE per target) of a checkpoint",
       {}},
      {"predict", "ragtrain predict --checkpoint CKPT.h5 --data FILE.h5 --out PRED.csv",
       "write per-sequence predictions as CSV", {}},
      {"bench", "ragtrain bench [--data FILE.h5] [--device D] [--hidden H] [--steps N] [--out RESULT.json]",
       "time training steps (synthetic data in memory, or a file) and print a table", {}},
      {"simulate", "ragtrain simulate --ranks 8,64,1024 [--lengths uniform:60:130 | --data FILE.h5] [--out R.json]",
       "length imbalance, padding, batch repeats (and, for a labelled file, classes per batch) of the balanced and random schedules for any rank count, "
       "without training",
       {}},
      {"plot", "ragtrain plot RUN_DIR [--out PLOT_DIR]",
       "PNG plots (gnuplot) of a train run folder, or of a folder of bench JSON files (scaling)", {"run"}},
      {"compare", "ragtrain compare RUN_DIR RUN_DIR... [--out TABLE.json|TABLE.csv]",
       "train runs side by side: the options that differ, best and last validation figures, seq/s, wall time",
       {"runs"}},
  };
  return infos;
}

const CommandInfo* find_command(const std::string& name) {
  for (const auto& c : command_infos())
    if (c.name == name) return &c;
  return nullptr;
}

// The single table: (option, which subcommands accept it). Bound to the fields of `cfg`.
struct Table {
  std::vector<std::pair<boost::shared_ptr<po::option_description>, std::set<std::string>>> rows;
};

// "0.9" rather than Boost's "0.90000000000000002" in --help.
std::string short_number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// A switch (`--quiet`) that also takes a value, so that `--bidirectional false`, the form --print-config writes,
// is read back: `--x` and `--x=true|false` reach Boost as one token each (switch_tokens joins `--x false`), and
// the help shows `--x` alone, like a plain switch.
class SwitchValue : public po::typed_value<bool> {
 public:
  explicit SwitchValue(bool* field) : po::typed_value<bool>(field) {
    default_value(false, "false");
    implicit_value(true, "true");
  }
  std::string name() const override { return ""; }
};

// The values a switch takes as the next word: Boost's bool words, less 1/0, which could be a file.
bool is_switch_word(const std::string& w) {
  for (const char* v : {"true", "false", "yes", "no", "on", "off"})
    if (w == v) return true;
  return false;
}

// The table under construction for `command`: each row is (option, the subcommands that accept it). A help text
// that differs by subcommand (`--out`: gen writes a file, train a folder) is a `PerCommand`, and the table carries
// the text of the command being parsed, so each command's help speaks of itself.
using PerCommand = std::map<std::string, std::string>;
struct TableBuilder {
  Table t;
  std::string command;
  void add(const char* name, po::value_semantic* v, const std::string& help, std::set<std::string> cmds) {
    t.rows.emplace_back(boost::make_shared<po::option_description>(name, v, help.c_str()), std::move(cmds));
  }
  void add(const char* name, po::value_semantic* v, const PerCommand& help, std::set<std::string> cmds) {
    for (const std::string& c : cmds) RT_CHECK(help.count(c), "no help text of --" << name << " for " << c);
    add(name, v, help.count(command) ? help.at(command) : help.begin()->second, std::move(cmds));
  }
  po::value_semantic* sw(bool* field) { return new SwitchValue(field); }
  const std::set<std::string> all = {"gen",     "convert", "inspect",  "train", "tune", "eval",
                                     "predict", "bench",   "simulate", "plot",  "compare"};
  // Options of the model and the update that bench times as train runs them; the rest of the optimizer's knobs,
  // the schedule of the learning rate, validation and logging are train's alone (bench refuses them).
  const std::set<std::string> learn = {"train", "bench"};
  const std::set<std::string> train_only = {"train"};
  const std::set<std::string> synth = {"gen", "bench"};
  const std::set<std::string> use_model = {"eval", "predict"};
  // Commands that print progress or detail besides their result (--quiet; inspect's result is its verdict), and
  // more of it (--verbose); simulate prints only its table.
  const std::set<std::string> talk = {"gen",   "convert", "inspect", "train", "tune",
                                      "eval",  "predict", "bench",   "plot",  "compare"};
  const std::set<std::string> talk_more = {"convert", "train", "eval", "predict"};
};

// Options every command shares, and the files each reads and writes.
void add_file_rows(TableBuilder& b, RunConfig& c) {
  b.add("config", po::value(&c.config_file)->value_name("FILE.ini"),
      "read options from an INI file (same names as the command line, at the top or under a [SUBCOMMAND] "
      "section; the command line wins)", b.all);
  b.add("quiet", b.sw(&c.talk.quiet), "print only errors and the final result", b.talk);
  b.add("verbose", b.sw(&c.talk.verbose),
      "print more: every file or array convert reads, the model and per-rank sequence counts of eval and predict",
      b.talk_more);
  b.add("print-config", b.sw(&c.print_config),
      "print the effective configuration in config-file form (usable with --config) and exit", b.all);

  b.add("force", b.sw(&c.force),
      "replace existing output files; never an input of the command, a checkpoint, or a data set by anything but "
      "a data set (doc/reliability.md)",
      {"gen", "convert", "train", "tune", "eval", "predict", "bench", "simulate", "plot", "compare"});
  b.add("write-statistics", b.sw(&c.write_statistics),
      "after checking every value, (re)write the file's feature statistics (/statistics: what train's --normalize "
      "feature uses instead of a pass over the data) from its data, into a copy in the file's folder that then "
      "replaces it (its mode kept; a kill midway leaves the file as it was); for files written by other tools or "
      "edited after ragtrain wrote them",
      {"inspect"});
  b.add("data", po::value(&c.source.data)->value_name("FILE.h5"),
        PerCommand{{"inspect", "the data set (format v1) to validate and summarise"},
                   {"train", "the training set (format v1)"},
                   {"tune", "the training set (format v1): the trials train on it, and --val or a split of it ranks them"},
                   {"eval", "the labelled data set (format v1) to evaluate the checkpoint on"},
                   {"predict", "the data set (format v1, labels not needed) to predict"},
                   {"bench", "time steps on this data set (format v1) instead of synthetic data"},
                   {"simulate", "simulate the lengths of this data set (format v1) instead of --lengths"}},
        {"inspect", "train", "tune", "eval", "predict", "bench", "simulate"});
  b.add("val", po::value(&c.validation.data)->value_name("FILE.h5"),
        PerCommand{{"train", "validation set, evaluated after every epoch (and every --val-every steps)"},
                   {"tune", "the set that ranks the trials (default: a stratified split of --data, --folds)"}},
        {"train", "tune"});
  const PerCommand out_name = {{"gen", "FILE.h5"},     {"train", "DIR"},          {"tune", "DIR"},  {"eval", "FILE.json"},
                                {"predict", "FILE.csv"}, {"bench", "FILE.json"},    {"simulate", "FILE.json"},
                                {"plot", "DIR"},         {"compare", "FILE.json|FILE.csv"}};
  b.add("out", po::value(&c.out)->value_name(out_name.count(b.command) ? out_name.at(b.command) : "PATH"),
        PerCommand{{"gen", "the data set to write (format v1)"},
                   {"train", "the run folder: metrics.jsonl, metrics.csv, summary.json, checkpoint.h5 (and step "
                             "checkpoints), best.h5 with --val, TensorBoard events"},
                   {"tune", "the search's folder: trials.csv, best.ini, summary.json, final/ (the best recipe trained)"},
                   {"eval", "also write the metrics as JSON"},
                   {"predict", "the CSV file of per-sequence predictions"},
                   {"bench", "also write the result as JSON (provenance, validity flag)"},
                   {"simulate", "also write the result as JSON"},
                   {"plot", "the folder for the PNGs (default RUN_DIR/plots)"},
                   {"compare", "also write the table, as JSON or CSV by the file's extension"}},
        {"gen", "train", "tune", "eval", "predict", "bench", "simulate", "plot", "compare"});
  b.add("run", po::value(&c.run)->value_name("DIR"),
      "what to plot: a train --out folder, or a folder of bench --out JSON files (e.g. from jobs/scaling.sbatch)",
      {"plot"});
  b.add("runs", po::value(&c.runs)->multitoken()->value_name("DIR..."),
      "the train --out folders to compare (or their summary.json files)", {"compare"});
  b.add("checkpoint", po::value(&c.checkpoint)->value_name("CKPT.h5|DIR"),
      "checkpoint written by train, or a train --out folder: its best.h5 when it has one, else its checkpoint.h5 "
      "(the file used is printed)",
      b.use_model);
  b.add("input", po::value(&c.convert.input)->value_name("INPUT"),
      "what to convert: a UEA/sktime .ts file, a NumPy .npz file, or a folder of CSV files (one per sequence)",
      {"convert"});
  b.add("output", po::value(&c.convert.output)->value_name("OUTPUT.h5"), "format v1 file to write", {"convert"});
  b.add("labels", po::value(&c.convert.labels)->value_name("LABELS.csv"),
      "labels of a CSV folder: a header row, then FILE,LABEL per sequence (FILE,Y1,..,YK with --regression; FILE "
      "alone, or no --labels, for data without labels)",
      {"convert"});
  b.add("regression", b.sw(&c.convert.regression),
      "the labels are regression targets (CSV: numbers; .npz: integer labels too; float .npz labels always are)",
      {"convert"});
  b.add("class-names-from", po::value(&c.convert.class_names_from)->value_name("TRAIN.h5"),
      "number the classes as this converted file does (convert the test set like the training set)", {"convert"});
  b.add("missing",
        po::value(&c.convert.missing)->default_value(c.convert.missing, missing_mode_name(c.convert.missing)),
        "missing feature values (?, NaN, NA, empty CSV fields): error | trim (drop trailing all-missing steps, as in "
        "NaN-padded sets) | zero | ffill (carry the last value forward; leading ones take the first observed)",
        {"convert"});
}

// Synthetic data (gen, bench), validation and model selection, the model.
void add_data_and_model_rows(TableBuilder& b, RunConfig& c) {
  b.add("sequences", po::value(&c.synthetic.sequences)->default_value(c.synthetic.sequences), "number of sequences",
        b.synth);
  b.add("features", po::value(&c.synthetic.features)->default_value(c.synthetic.features), "features per timestep (F)",
        b.synth);
  b.add("min-length", po::value(&c.synthetic.min_length)->default_value(c.synthetic.min_length), "shortest sequence",
        b.synth);
  b.add("max-length", po::value(&c.synthetic.max_length)->default_value(c.synthetic.max_length), "longest sequence",
        b.synth);
  b.add("classes", po::value(&c.synthetic.classes)->default_value(c.synthetic.classes),
        "number of classes (classification)", b.synth);
  b.add("task", po::value(&c.synthetic.task)->default_value(c.synthetic.task, task_name(c.synthetic.task)),
        "classification | regression", b.synth);
  b.add("outputs", po::value(&c.synthetic.outputs)->default_value(c.synthetic.outputs),
        "targets per sequence (regression)", b.synth);
  b.add("seed", po::value(&c.schedule.seed)->default_value(c.schedule.seed),
        PerCommand{{"gen", "random seed of the data"},
                   {"train", "random seed of the initial weights, the shuffling and the dropout masks"},
                   {"tune", "random seed of the trials drawn, the split and each trial's own seed"},
                   {"bench", "random seed of the synthetic data, the initial weights and the shuffling"},
                   {"simulate", "random seed of the drawn lengths and the shuffling"}},
        {"gen", "train", "tune", "bench", "simulate"});
  b.add("steps", po::value(&c.timing.steps)->default_value(c.timing.steps), "timed training steps", {"bench"});
  b.add("warmup", po::value(&c.timing.warmup)->default_value(c.timing.warmup), "untimed steps before timing",
        {"bench"});

  // implicit_value with an empty text: `--normalize` alone means feature, and the help keeps its usual width.
  b.add("normalize",
      po::value(&c.normalize)
          ->default_value(c.normalize, normalization_name(c.normalize))
          ->implicit_value(Normalization::Feature, "")
          ->value_name("MODE"),
      "standardise the features: none | feature (each feature by the training set's mean and std, stored in the "
      "checkpoint; `--normalize` alone) | series (each sequence's features by its own mean and std); eval and "
      "predict apply what the checkpoint was trained with",
      b.train_only);
  b.add("val-every", po::value(&c.validation.every)->default_value(c.validation.every),
      "also validate every N steps (0: after every epoch only); with --val", b.train_only);
  b.add("select", po::value<SelectMetric>()->value_name("val_loss|val_accuracy")->notifier([&c](SelectMetric m) {
        c.validation.select = m;
      }),
      "the validation figure that picks the model kept as OUT/best.h5 (default: val_accuracy for classification, "
      "val_loss for regression); with --val",
      b.train_only);
  b.add("early-stop", po::value(&c.validation.early_stop)->default_value(c.validation.early_stop)->value_name("N"),
      "stop after N validations in a row without a better --select figure (exit 0; 0: off); with --val",
      b.train_only);
  b.add("init-from", po::value(&c.start.init_from)->value_name("CKPT.h5"),
      "start from these weights (a ragtrain checkpoint, e.g. exported from PyTorch by tools/torch_interop.py) "
      "instead of a random initialisation",
      {"train"});
  b.add("write-order", b.sw(&c.records.write_order),
      "write DIR/order.csv: the sequence trained in every slot of every step (to replay the run elsewhere)",
      {"train"});
  b.add("trace", po::value(&c.trace)->value_name("FILE.json"),
      "write the timeline of every rank's phases (read, compute, all-reduce wait, update, log, validation, "
      "checkpoint; a streamed shard's window reads on a reader track) as one Chrome trace-event file "
      "(ui.perfetto.dev, chrome://tracing); off by default",
      b.learn);
  b.add("layers", po::value(&c.model.layers)->default_value(c.model.layers), "LSTM layers", b.learn);
  b.add("hidden", po::value(&c.model.hidden)->default_value(c.model.hidden), "LSTM hidden size", b.learn);
  b.add("bidirectional", b.sw(&c.model.bidirectional),
      "run every LSTM layer both ways (nn.LSTM(bidirectional=True)); the head reads 2 x hidden", b.learn);
  b.add("pool", po::value(&c.model.pool)->default_value(c.model.pool, pool_name(c.model.pool)),
      "what the head reads of the top layer, over each sequence's own steps: last (the final states, PyTorch's "
      "h_n) | mean | max",
      b.learn);
  b.add("dropout",
        po::value(&c.model.dropout.between)
            ->default_value(c.model.dropout.between, short_number(c.model.dropout.between)),
        "dropout on the outputs of every LSTM layer but the last (nn.LSTM's dropout); training only", b.learn);
  b.add("head-dropout",
        po::value(&c.model.dropout.head)->default_value(c.model.dropout.head, short_number(c.model.dropout.head)),
        "dropout on the head's input (the pooled vector); training only", b.learn);
}

// The schedule, the optimizer and its learning rate, checkpoints, the device and reliability.
void add_training_rows(TableBuilder& b, RunConfig& c) {
  b.add("epochs", po::value(&c.schedule.epochs)->default_value(c.schedule.epochs), "passes over the training set",
      {"train", "simulate"});
  b.add("batch-per-rank", po::value(&c.schedule.batch_per_rank)->default_value(c.schedule.batch_per_rank),
      "sequences per rank per step (global batch = ranks x this)", {"train", "bench", "simulate"});
  b.add("schedule", po::value(&c.schedule.kind)->default_value(c.schedule.kind, schedule_kind_name(c.schedule.kind)),
      "balanced (equal lengths across ranks in every step) | random", {"train", "bench"});
  b.add("ranks", po::value(&c.simulate.ranks)->default_value(c.simulate.ranks, c.simulate.ranks.text),
        "comma-separated rank counts to simulate", {"simulate"});
  b.add("lengths", po::value(&c.simulate.lengths)->default_value(c.simulate.lengths, c.simulate.lengths.text),
      "length distribution: uniform:MIN:MAX | lognormal:MEDIAN:SIGMA (ignored with --data)", {"simulate"});
  b.add("sequences-per-rank", po::value(&c.simulate.sequences_per_rank)->default_value(c.simulate.sequences_per_rank),
      "simulated data set size per rank (N = ranks x this x batch-per-rank)", {"simulate"});
  b.add("optimizer", po::value(&c.optimizer.kind)->default_value(c.optimizer.kind, optimizer_name(c.optimizer.kind)),
      "sgd (with momentum) | adam | adamw", b.learn);
  b.add("lr", po::value(&c.lr.lr)->default_value(c.lr.lr, short_number(c.lr.lr)), "peak learning rate", b.learn);
  b.add("momentum",
        po::value(&c.optimizer.momentum)->default_value(c.optimizer.momentum, short_number(c.optimizer.momentum)),
        "SGD momentum", b.train_only);
  b.add("beta1", po::value(&c.optimizer.beta1)->default_value(c.optimizer.beta1, short_number(c.optimizer.beta1)),
        "Adam/AdamW beta1", b.train_only);
  b.add("beta2", po::value(&c.optimizer.beta2)->default_value(c.optimizer.beta2, short_number(c.optimizer.beta2)),
        "Adam/AdamW beta2", b.train_only);
  b.add("eps", po::value(&c.optimizer.eps)->default_value(c.optimizer.eps, short_number(c.optimizer.eps)),
        "Adam/AdamW epsilon", b.train_only);
  b.add("weight-decay",
        po::value(&c.optimizer.weight_decay)
            ->default_value(c.optimizer.weight_decay, short_number(c.optimizer.weight_decay)),
        "L2 penalty (sgd, adam) or decoupled decay (adamw)", b.learn);
  b.add("clip", po::value(&c.optimizer.clip)->default_value(c.optimizer.clip, short_number(c.optimizer.clip)),
        "clip the global gradient norm to this (0 = off)", b.learn);
  b.add("warmup-steps", po::value(&c.lr.warmup)->default_value(c.lr.warmup),
      "linear learning-rate warm-up over this many steps", b.train_only);
  b.add("lr-decay", po::value(&c.lr.decay)->default_value(c.lr.decay, lr_decay_name(c.lr.decay)),
      "after warm-up: none | linear | cosine, down to lr x lr-final-fraction at the last step", b.train_only);
  b.add("lr-final-fraction",
        po::value(&c.lr.final_fraction)->default_value(c.lr.final_fraction, short_number(c.lr.final_fraction)),
        "final learning rate as a fraction of --lr (with --lr-decay)", b.train_only);
  b.add("log-every", po::value(&c.records.log_every)->default_value(c.records.log_every),
      "steps between progress lines and metrics.jsonl records", b.train_only);
  b.add("resume", po::value(&c.start.resume)->value_name("CKPT.h5|DIR"),
      "continue the run saved in a checkpoint, or in the newest checkpoint of a run folder; needs the same "
      "options and global batch (ranks x batch-per-rank), any rank count",
      {"train"});
  b.add("checkpoint-every", po::value(&c.records.checkpoint_every)->default_value(c.records.checkpoint_every),
      "also save a checkpoint every N steps (0: only at the end and when stopped by SIGTERM/SIGUSR1)", {"train"});
  b.add("checkpoint-minutes",
        po::value(&c.records.checkpoint_minutes)
            ->default_value(c.records.checkpoint_minutes, short_number(c.records.checkpoint_minutes)),
        "also save a checkpoint when this many minutes passed since the last one (rank 0's clock; 0: off)", {"train"});
  b.add("signal-check-every", po::value(&c.records.signal_check_every)->default_value(c.records.signal_check_every),
      "steps between the all-ranks check for SIGTERM/SIGUSR1 and a due --checkpoint-minutes (one tiny "
      "all-reduce; doc/hpc.md has its cost)",
      {"train"});
  b.add("keep", po::value(&c.records.keep)->default_value(c.records.keep),
      "step checkpoints (OUT/checkpoint-stepNNNNNNNNN.h5) to keep; OUT/checkpoint.h5 is always the newest", {"train"});
  b.add("device", po::value(&c.backend.device)->default_value(c.backend.device, device_name(c.backend.device)),
      "cpu, or with a CUDA build cuda | auto (CUDA: at most 1024 sequences per rank per step)",
      {"train", "tune", "eval", "predict", "bench"});
  b.add("lstm", po::value(&c.backend.lstm)->default_value(c.backend.lstm, lstm_path_name(c.backend.lstm)),
      "CUDA backend's LSTM: cudnn | fused (ragtrain's kernels, no launch per timestep: 1 to 4 layers of one or both "
      "directions with H <= 512, stacked layers overlapped, both directions at once; any --pool, --dropout "
      "and --head-dropout; other models use cuDNN) | auto "
      "(the faster of the two, measured at start-up; fused only when at least 10% faster there)",
      {"train", "bench"});
  b.add("max-memory", po::value(&c.source.max_memory)->default_value(c.source.max_memory)->value_name("SIZE"),
      "most memory one rank may allocate for its data, e.g. 512M, 8G (auto: physical memory / ranks on the "
      "node); sizes declared in a file are checked against it before anything is read",
      {"inspect", "train", "tune", "eval", "predict"});
  b.add("max-device-memory",
        po::value(&c.backend.max_device_memory)->default_value(c.backend.max_device_memory)->value_name("SIZE"),
        "CUDA: most GPU memory one rank's training shard may take, e.g. 2G (auto: what the GPU has free once the "
        "model is set up, less 1/16 of the GPU); a shard over it is held as windows of a few steps' sequences, the "
        "next copied while the current trains: the same model",
        {"train"});
  b.add("comm-timeout",
        po::value(&c.faults.comm_timeout)->default_value(c.faults.comm_timeout, short_number(c.faults.comm_timeout)),
        "seconds a rank waits for the others in a collective before it names the rank that stopped and ends the "
        "job (0: wait forever); watches the training loop, not the start-up",
        {"train"});
  b.add("on-nonfinite",
        po::value(&c.faults.on_nonfinite)
            ->default_value(c.faults.on_nonfinite, nonfinite_policy_name(c.faults.on_nonfinite)),
        "a NaN/Inf loss or gradient: stop (keep the last good checkpoint, exit 2) | skip (drop that step on every "
        "rank)",
        {"train"});
}

// tune's own options (doc/tune.md).
void add_tune_rows(TableBuilder& b, RunConfig& c) {
  const std::set<std::string> tune = {"tune"};
  b.add("space", po::value(&c.tune.space)->value_name("SPACE.ini"),
      "the options of train to search, one per line: `name = a | b | c`, `name = LO .. HI` or `name = LO .. HI "
      "log` (default: normalize, pool, hidden, layers, bidirectional, dropout, lr, epochs; doc/tune.md)",
      tune);
  b.add("trials", po::value(&c.tune.trials)->default_value(c.tune.trials),
      "trials drawn from the space; successive halving trains a third of them 3x longer per rung (27: 27, 9, 3)",
      tune);
  b.add("budget-minutes",
        po::value(&c.tune.budget_minutes)->default_value(c.tune.budget_minutes, short_number(c.tune.budget_minutes)),
        "start no training run after this many minutes (the search's first run always starts); the best finished "
        "trial is kept (0: no limit)", tune);
  b.add("ranks-per-trial", po::value(&c.tune.ranks_per_trial)->default_value(c.tune.ranks_per_trial),
      "ranks that train one trial together (data-parallel); the ranks form size / this groups, each taking the "
      "next trial from a shared queue",
      tune);
  b.add("trials-per-gpu", po::value(&c.tune.trials_per_gpu)->default_value(c.tune.trials_per_gpu),
      "with --device cuda: trial groups sharing one GPU (start that many more ranks per GPU); ignored on the CPU",
      tune);
  b.add("folds", po::value(&c.tune.folds)->default_value(c.tune.folds),
      "without --val: rank the trials by stratified k-fold cross-validation on --data (each run trains k times); 1: "
      "one stratified 20% hold-out; 0: 5 folds below 200 sequences, 3 below 1,000, else 1",
      tune);
}

Table build_table(RunConfig& c, const std::string& command) {
  TableBuilder b;
  b.command = command;
  add_file_rows(b, c);
  add_data_and_model_rows(b, c);
  add_training_rows(b, c);
  add_tune_rows(b, c);
  return b.t;
}

// argv as one line a shell would split back into the same words ('...' around anything unusual).
std::string quote_command_line(int argc, const char* const* argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                         "0123456789-_./=:,+@%") == std::string::npos;
    std::string q = "'";
    for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    q += "'";
    line += (i ? " " : "") + (plain ? a : q);
  }
  return line;
}

std::string any_to_string(const boost::any& v) {
  if (auto p = boost::any_cast<std::string>(&v)) return *p;
  if (auto p = boost::any_cast<int64_t>(&v)) return std::to_string(*p);
  if (auto p = boost::any_cast<uint64_t>(&v)) return std::to_string(*p);
  if (auto p = boost::any_cast<bool>(&v)) return *p ? "true" : "false";
  if (auto p = boost::any_cast<Task>(&v)) return task_name(*p);
  if (auto p = boost::any_cast<OptimizerKind>(&v)) return optimizer_name(*p);
  if (auto p = boost::any_cast<LrDecay>(&v)) return lr_decay_name(*p);
  if (auto p = boost::any_cast<ScheduleKind>(&v)) return schedule_kind_name(*p);
  if (auto p = boost::any_cast<Device>(&v)) return device_name(*p);
  if (auto p = boost::any_cast<Pool>(&v)) return pool_name(*p);
  if (auto p = boost::any_cast<MissingMode>(&v)) return missing_mode_name(*p);
  if (auto p = boost::any_cast<LstmPath>(&v)) return lstm_path_name(*p);
  if (auto p = boost::any_cast<Normalization>(&v)) return normalization_name(*p);
  if (auto p = boost::any_cast<NonfinitePolicy>(&v)) return nonfinite_policy_name(*p);
  if (auto p = boost::any_cast<SelectMetric>(&v)) return select_metric_name(*p);
  if (auto p = boost::any_cast<RankCounts>(&v)) return p->text;
  if (auto p = boost::any_cast<LengthDistribution>(&v)) return p->text;
  if (auto p = boost::any_cast<double>(&v)) {
    std::ostringstream s;
    s.precision(10);
    s << *p;
    return s.str();
  }
  return "?";
}

void require(bool ok, const std::string& option, const std::string& what, const std::string& hint) {
  if (!ok) throw UserError("option --" + option + ": " + what, hint);
}

// One check per option group, run for the commands that take the group; a command's groups hold only values it
// accepted or valid defaults, so a group is checked the same way wherever it is used.
void positive(int64_t v, const char* name, const std::string& help) {
  require(v > 0, name, "must be a positive integer, got " + std::to_string(v), help);
}

void check_synthetic(const SyntheticSpec& s, const std::string& help) {
  positive(s.sequences, "sequences", help);
  positive(s.features, "features", help);
  positive(s.min_length, "min-length", help);
  require(s.max_length >= s.min_length, "max-length",
          "must be >= --min-length (" + std::to_string(s.min_length) + "), got " + std::to_string(s.max_length), help);
  if (s.task == Task::Classification)
    require(s.classes >= 2, "classes", "must be >= 2, got " + std::to_string(s.classes), help);
  positive(s.outputs, "outputs", help);
}

void check_model(const ModelOptions& m, const std::string& help) {
  positive(m.layers, "layers", help);
  positive(m.hidden, "hidden", help);
  require(m.dropout.between >= 0 && m.dropout.between < 1, "dropout",
          "must be in [0, 1), got " + short_number(m.dropout.between), help);
  require(m.dropout.head >= 0 && m.dropout.head < 1, "head-dropout",
          "must be in [0, 1), got " + short_number(m.dropout.head), help);
}

void check_update(const OptimizerConfig& o, const LrSchedule& lr, const std::string& help) {
  require(lr.warmup >= 0, "warmup-steps", "must be >= 0", help);
  require(lr.lr > 0, "lr", "must be > 0", help);
  require(o.momentum >= 0 && o.momentum < 1, "momentum", "must be in [0, 1)", help);
  require(o.beta1 >= 0 && o.beta1 < 1, "beta1", "must be in [0, 1)", help);
  require(o.beta2 >= 0 && o.beta2 < 1, "beta2", "must be in [0, 1)", help);
  require(o.eps > 0, "eps", "must be > 0", help);
  require(o.weight_decay >= 0, "weight-decay", "must be >= 0", help);
  require(o.clip >= 0, "clip", "must be >= 0 (0 turns clipping off)", help);
  require(lr.final_fraction >= 0 && lr.final_fraction <= 1, "lr-final-fraction", "must be in [0, 1]", help);
}

void check_schedule(const ScheduleOptions& s, const std::string& help) {
  positive(s.epochs, "epochs", help);
  positive(s.batch_per_rank, "batch-per-rank", help);
}

// The CUDA backend's limit, before any work (with auto, the backend itself refuses it if a GPU is chosen).
void check_backend(const BackendChoice& b, const ScheduleOptions& s) {
  require(b.max_device_memory == "auto" || parse_size(b.max_device_memory) > 0, "max-device-memory",
          "must be auto or a size such as 512M or 8G, got '" + b.max_device_memory + "'", "e.g. --max-device-memory 2G");
  if (b.device != Device::Cuda) return;
  require(s.batch_per_rank <= kMaxCudaBatchPerRank, "batch-per-rank",
          "is " + std::to_string(s.batch_per_rank) + "; the CUDA backend takes at most " +
              std::to_string(kMaxCudaBatchPerRank) + " sequences per rank per step",
          "use --batch-per-rank " + std::to_string(kMaxCudaBatchPerRank) +
              " or fewer, and more ranks (GPUs) for a larger global batch");
}

void check_source(const DataSource& d, const std::string& help) {
  require(d.max_memory == "auto" || parse_size(d.max_memory) > 0, "max-memory",
          "must be auto or a size such as 512M or 8G, got '" + d.max_memory + "'", help);
}

void check_trace(const std::string& trace) {
  const auto n = trace.size();
  require(trace.empty() || (n > 5 && trace.compare(n - 5, 5, ".json") == 0), "trace",
          "names the Chrome trace file to write and must end in .json, got '" + trace + "'",
          "e.g. --trace timeline.json");
}

void check_validation(const ValidationOptions& v, const std::string& data, const std::string& help) {
  require(v.data.empty() || v.data != data, "val", "is the same file as --data",
          "validate on held-out data, or leave --val out");
  require(v.every >= 0, "val-every", "must be >= 0 (0: validate after every epoch only)", help);
  require(v.early_stop >= 0, "early-stop", "must be >= 0 (0 turns early stopping off)", help);
  for (const auto& [used, name] : {std::pair<bool, const char*>{v.every > 0, "val-every"},
                                   {v.select.has_value(), "select"},
                                   {v.early_stop > 0, "early-stop"}})
    require(!used || !v.data.empty(), name, "needs a validation set", "add --val VAL.h5 (held-out data)");
}

void check_records(const RecordOptions& r, const std::string& help) {
  positive(r.log_every, "log-every", help);
  require(r.checkpoint_every >= 0, "checkpoint-every", "must be >= 0 (0 turns step checkpoints off)", help);
  require(r.checkpoint_minutes >= 0, "checkpoint-minutes", "must be >= 0 (0 turns timed checkpoints off)", help);
  require(r.keep >= 1, "keep", "must be >= 1, got " + std::to_string(r.keep), help);
  positive(r.signal_check_every, "signal-check-every", help);
}

void validate(const RunConfig& c) {
  const std::string cmd = c.command;
  const std::string help = "see `ragtrain " + cmd + " --help`";
  if (cmd == "gen") {
    require(!c.out.empty(), "out", "is required", "e.g. ragtrain gen --out data.h5");
    check_synthetic(c.synthetic, help);
  } else if (cmd == "convert") {
    require(!c.convert.input.empty() && !c.convert.output.empty(), "input", "convert needs INPUT and OUTPUT.h5",
            "usage: ragtrain convert INPUT.ts|INPUT.npz|CSV_DIR [--labels LABELS.csv] [--missing MODE] OUTPUT.h5");
    require(!(c.convert.regression && !c.convert.class_names_from.empty()), "class-names-from",
            "names classes, but --regression says the labels are targets", "leave one of the two out");
  } else if (cmd == "inspect") {
    require(!c.source.data.empty(), "data", "inspect needs a file", "usage: ragtrain inspect FILE.h5");
    check_source(c.source, help);
  } else if (cmd == "train") {
    require(!c.source.data.empty(), "data", "is required", "usage: ragtrain train --data TRAIN.h5 --out DIR");
    require(!c.out.empty(), "out", "is required (the run's output folder)",
            "usage: ragtrain train --data TRAIN.h5 --out DIR");
    check_model(c.model, help);
    check_schedule(c.schedule, help);
    check_update(c.optimizer, c.lr, help);
    check_validation(c.validation, c.source.data, help);
    check_records(c.records, help);
    require(c.faults.comm_timeout >= 0, "comm-timeout", "must be >= 0 seconds (0 waits forever)", help);
    check_source(c.source, help);
    check_backend(c.backend, c.schedule);
    check_trace(c.trace);
  } else if (cmd == "tune") {
    require(!c.source.data.empty(), "data", "is required", "usage: ragtrain tune --data TRAIN.h5 --out DIR");
    require(!c.out.empty(), "out", "is required (the search's output folder)",
            "usage: ragtrain tune --data TRAIN.h5 --out DIR");
    require(c.validation.data.empty() || c.validation.data != c.source.data, "val", "is the same file as --data",
            "rank the trials on held-out data, or leave --val out (tune then holds out part of --data)");
    positive(c.tune.trials, "trials", help);
    positive(c.tune.ranks_per_trial, "ranks-per-trial", help);
    positive(c.tune.trials_per_gpu, "trials-per-gpu", help);
    require(c.tune.budget_minutes >= 0, "budget-minutes", "must be >= 0 (0: no limit)", help);
    require(c.tune.folds >= 0, "folds", "must be >= 0 (0: by the size of --data)", help);
    check_source(c.source, help);
  } else if (cmd == "eval" || cmd == "predict") {
    require(!c.checkpoint.empty(), "checkpoint", "is required", help);
    require(!c.source.data.empty(), "data", "is required", help);
    if (cmd == "predict") require(!c.out.empty(), "out", "is required (the CSV file to write)", help);
    check_source(c.source, help);
  } else if (cmd == "plot") {
    require(!c.run.empty(), "run", "plot needs a folder", "usage: ragtrain plot RUN_DIR");
  } else if (cmd == "compare") {
    require(!c.runs.empty(), "runs", "compare needs at least one run folder",
            "usage: ragtrain compare RUN_DIR RUN_DIR... [--out TABLE.json|TABLE.csv]");
    const auto ends_with = [&](const char* ext) {
      const std::string e = ext;
      return c.out.size() > e.size() && c.out.compare(c.out.size() - e.size(), e.size(), e) == 0;
    };
    require(c.out.empty() || ends_with(".json") || ends_with(".csv"), "out",
            "must end in .json or .csv (the format it is written in), got '" + c.out + "'", help);
  } else if (cmd == "simulate") {
    positive(c.simulate.sequences_per_rank, "sequences-per-rank", help);
    check_schedule(c.schedule, help);
  } else if (cmd == "bench") {
    positive(c.timing.steps, "steps", help);
    require(c.timing.warmup >= 0, "warmup", "must be >= 0", help);
    check_model(c.model, help);
    check_schedule(c.schedule, help);
    check_synthetic(c.synthetic, help);
    check_update(c.optimizer, c.lr, help);
    check_backend(c.backend, c.schedule);
    check_trace(c.trace);
  }
  require(!(c.talk.quiet && c.talk.verbose), "verbose", "contradicts --quiet", "leave one of the two out");
}

}  // namespace

const std::set<std::string>& record_keeping_options() {
  static const std::set<std::string> names = {
      "quiet",    "verbose",          "force",     "out",   "resume",       "log-every",  "checkpoint-every",
      "checkpoint-minutes", "signal-check-every", "keep", "comm-timeout", "trace", "write-order", "max-memory",
      "max-device-memory"};
  return names;
}

const std::vector<std::string>& subcommands() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& c : command_infos()) n.push_back(c.name);
    return n;
  }();
  return names;
}

std::string program_help() {
  std::ostringstream s;
  s << "ragtrain — data-parallel LSTM training on ragged time series (one model, all ranks)\n\n"
    << "usage: ragtrain COMMAND [options]     (ragtrain COMMAND --help for its options)\n"
    << "       ragtrain --version             (release, git revision, backends and library versions)\n\ncommands:\n";
  for (const auto& c : command_infos()) s << "  " << c.name << std::string(10 - c.name.size(), ' ') << c.summary << "\n";
  s << "\nexit codes: 0 success, 2 bad input or options, an output that would lose data (doc/reliability.md),\n"
    << "            a full disk, a NaN/Inf loss with --on-nonfinite stop\n"
    << "            (every rank), 3 internal or library error,\n"
    << "            75 train stopped by SIGTERM/SIGUSR1/SIGINT (Ctrl-C) after saving a checkpoint (continue with\n"
    << "               --resume OUT; under mpirun the ranks exit 75, mpirun itself 1 after Ctrl-C or SIGTERM),\n"
    << "            76 train ended because a rank died or got stuck (--comm-timeout; the message names it)\n";
  return s.str();
}

namespace {

// The words after the subcommand, each switch as one token: `--x` becomes `--x=true` and `--x false` becomes
// `--x=false`, so a switch takes the next word only when it is true/false/yes/no/on/off (`inspect --quiet
// FILE.h5` keeps its file). Abbreviations (`--bidir`) count as the switch they name.
std::vector<std::string> switch_tokens(int argc, const char* const* argv, const po::options_description& mine) {
  std::vector<std::string> out;
  bool options_ended = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    options_ended = options_ended || a == "--";
    const po::option_description* d = nullptr;
    if (!options_ended && a.size() > 2 && a.compare(0, 2, "--") == 0 && a.find('=') == std::string::npos) {
      try {
        d = mine.find_nothrow(a.substr(2), /*approx=*/true);
      } catch (const po::error&) {   // ambiguous: the parser says so below
      }
    }
    if (d != nullptr && dynamic_cast<const SwitchValue*>(d->semantic().get()) != nullptr) {
      const bool word = i + 1 < argc && is_switch_word(argv[i + 1]);
      out.push_back(a + "=" + (word ? std::string(argv[++i]) : "true"));
    } else {
      out.push_back(a);
    }
  }
  return out;
}

// `ragtrain`, `ragtrain --help`, `ragtrain help [COMMAND]`: the program's help, or the argument list of
// `ragtrain COMMAND --help` in `help_argv`. No command at all is a usage error (exit 2, help on stderr).
bool program_help_request(int argc, const char* const* argv, Invocation& inv, std::vector<std::string>& help_argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  if (first == "help" && argc > 2) {
    help_argv = {argv[0], argv[2], "--help"};
    return false;
  }
  if (!first.empty() && first != "--help" && first != "-h" && first != "help") return false;
  inv.help = true;
  inv.help_text = program_help();
  if (first.empty()) {
    inv.exit_code = kExitUserError;
    inv.help_text += "\nragtrain: error: no command given\n  hint: ragtrain COMMAND [options]; `ragtrain help COMMAND` "
                     "lists a command's options\n";
  }
  return true;
}

}  // namespace

Invocation parse_command_line(int argc, const char* const* argv) {
  Invocation inv;
  RunConfig& cfg = inv.config;
  std::vector<std::string> help_argv;
  if (program_help_request(argc, argv, inv, help_argv)) return inv;
  if (!help_argv.empty()) {
    std::vector<const char*> words;
    for (const std::string& w : help_argv) words.push_back(w.c_str());
    return parse_command_line(static_cast<int>(words.size()), words.data());
  }
  const std::string first = argv[1];
  const CommandInfo* cmd = find_command(first);
  if (!cmd) {
    const std::vector<std::string> near = closest_names(first, subcommands());
    throw UserError("unknown command '" + first + "'",
                    (near.empty() ? std::string() : "did you mean " + near.front() + "? ") +
                        "commands: gen convert inspect train tune eval predict bench simulate plot compare; see "
                        "`ragtrain --help`");
  }
  cfg.command = cmd->name;
  cfg.provenance.command_line = quote_command_line(argc, argv);

  Table table = build_table(cfg, cmd->name);
  po::options_description mine("options of `ragtrain " + cmd->name + "`", 110, 55);
  OptionOwners owners;   // for config files and "did you mean": which subcommands take each name
  for (auto& [opt, cmds] : table.rows) {
    owners[opt->long_name()] = cmds;
    if (cmds.count(cmd->name)) mine.add(opt);
  }
  mine.add_options()("help,h", "show this help");
  po::positional_options_description pos;
  for (const auto& p : cmd->positional) pos.add(p.c_str(), p == "runs" ? -1 : 1);   // compare: any number

  po::variables_map vm;
  try {
    po::store(po::command_line_parser(switch_tokens(argc, argv, mine)).options(mine).positional(pos).run(), vm);
  } catch (const po::unknown_option& e) {
    const std::string dashed = e.get_option_name();   // "--hiddne"
    const std::string name = dashed.substr(std::min(dashed.size(), dashed.find_first_not_of('-')));
    throw UserError(std::string("command line: ") + e.what(), unknown_option_hint(name, cmd->name, owners, "--"));
  } catch (const po::error& e) {
    throw UserError(std::string("command line: ") + e.what(), "see `ragtrain " + cmd->name + " --help`");
  }
  if (vm.count("help")) {
    std::ostringstream s;
    s << "usage: " << cmd->usage << "\n" << cmd->summary << "\n\n" << mine;
    inv.help = true;
    inv.help_text = s.str();
    return inv;
  }
  // The file fills in what the command line left out ([COMMAND] section, then top level; cli/config_file.hpp).
  if (vm.count("config")) store_config_file(vm["config"].as<std::string>(), cmd->name, mine, owners, vm);
  try {
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(std::string("command line: ") + e.what(), "see `ragtrain " + cmd->name + " --help`");
  }
  validate(cfg);

  std::ostringstream eff;
  eff << "# ragtrain " << cmd->name << "\n";
  for (const auto& opt : mine.options()) {
    const std::string& name = opt->long_name();
    if (name == "help" || name == "config" || name == "print-config" || !vm.count(name)) continue;
    if (auto list = boost::any_cast<std::vector<std::string>>(&vm[name].value())) {   // one line per value
      for (const std::string& v : *list) eff << name << " = " << v << "\n";
      continue;
    }
    eff << name << " = " << any_to_string(vm[name].value()) << "\n";
  }
  cfg.provenance.effective = eff.str();
  return inv;
}

}  // namespace ragtrain

namespace ragtrain {

namespace {

// The synthetic data set of gen, and of bench without --data: the table's group, seeded by --seed.
SyntheticSpec synthetic_spec(const RunConfig& c) {
  SyntheticSpec spec = c.synthetic;
  spec.seed = c.schedule.seed;
  return spec;
}

// The groups train and bench share: data, model, optimizer, schedule, backend, the trace, what is printed.
TrainConfig learning_config(const RunConfig& c) {
  TrainConfig t;
  std::tie(t.source, t.model, t.optimizer, t.schedule, t.backend, t.trace, t.talk, t.provenance) =
      std::tie(c.source, c.model, c.optimizer, c.schedule, c.backend, c.trace, c.talk, c.provenance);
  return t;
}

}  // namespace

TrainConfig train_config(const RunConfig& c) {
  RT_CHECK(c.command == "train", "train_config for " << c.command);
  TrainConfig t = learning_config(c);
  std::tie(t.normalize, t.validation, t.start, t.lr, t.faults, t.out, t.records) =
      std::tie(c.normalize, c.validation, c.start, c.lr, c.faults, c.out, c.records);
  return t;
}

TuneConfig tune_config(const RunConfig& c) {
  RT_CHECK(c.command == "tune", "tune_config for " << c.command);
  return TuneConfig{c.source, c.validation.data, c.out, c.schedule.seed, c.backend.device, c.tune, c.talk,
                    c.provenance};
}

BenchConfig bench_config(const RunConfig& c) {
  RT_CHECK(c.command == "bench", "bench_config for " << c.command);
  BenchConfig b;
  b.run = learning_config(c);
  b.run.lr.lr = c.lr.lr;    // a constant rate: bench takes --lr, not its schedule
  b.run.faults.comm_timeout = 0;   // bench has no watchdog
  b.synthetic = synthetic_spec(c);
  if (c.source.data.empty()) b.run.synthetic = b.synthetic;
  b.timing = c.timing;
  b.out = c.out;
  return b;
}

EvalConfig eval_config(const RunConfig& c) {
  RT_CHECK(c.command == "eval" || c.command == "predict", "eval_config for " << c.command);
  return EvalConfig{c.checkpoint, c.source, c.out, c.backend.device, c.talk};
}

GenConfig gen_config(const RunConfig& c) {
  RT_CHECK(c.command == "gen", "gen_config for " << c.command);
  return GenConfig{synthetic_spec(c), c.out, c.talk};
}

ConvertConfig convert_config(const RunConfig& c) {
  RT_CHECK(c.command == "convert", "convert_config for " << c.command);
  return ConvertConfig{c.convert, c.talk};
}

InspectConfig inspect_config(const RunConfig& c) {
  RT_CHECK(c.command == "inspect", "inspect_config for " << c.command);
  return InspectConfig{c.source, c.write_statistics, c.talk};
}

SimulateConfig simulate_config(const RunConfig& c) {
  RT_CHECK(c.command == "simulate", "simulate_config for " << c.command);
  return SimulateConfig{c.simulate, c.schedule, c.source.data, c.out};
}

PlotConfig plot_config(const RunConfig& c) {
  RT_CHECK(c.command == "plot", "plot_config for " << c.command);
  return PlotConfig{c.run, c.out.empty() ? c.run + "/plots" : c.out, c.talk};
}

CompareConfig compare_config(const RunConfig& c) {
  RT_CHECK(c.command == "compare", "compare_config for " << c.command);
  return CompareConfig{c.runs, c.out, c.talk};
}

}  // namespace ragtrain
