// What the Trainer needs from the command line, typed: every string option already parsed into its enum at the
// CLI boundary (cli/options.cpp), in groups that the option table binds to directly and that travel whole.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/core/option_groups.hpp"
#include "ragtrain/data/normalization.hpp"
#include "ragtrain/data/synthetic.hpp"
#include "ragtrain/model/model.hpp"
#include "ragtrain/optim/optimizer.hpp"
#include "ragtrain/schedule/schedule.hpp"

namespace ragtrain {

// --on-nonfinite: a NaN/Inf loss or gradient stops every rank (exit 2), or the step is dropped everywhere.
enum class NonfinitePolicy { Stop, Skip };
inline const char* nonfinite_policy_name(NonfinitePolicy p) { return p == NonfinitePolicy::Stop ? "stop" : "skip"; }

// --select: the validation figure that decides which model DIR/best.h5 keeps.
enum class SelectMetric { ValLoss, ValAccuracy };
inline const char* select_metric_name(SelectMetric m) {
  return m == SelectMetric::ValLoss ? "val_loss" : "val_accuracy";
}

// --hidden, --layers, --bidirectional, --pool, --dropout, --head-dropout: the part of the ModelShape the user
// chooses (the data give F and the outputs), and training-time dropout. The defaults are the command line's.
struct ModelOptions {
  int64_t hidden = 50, layers = 1;
  bool bidirectional = false;
  Pool pool = Pool::Mean;   // default mean: doc/accuracy.md, "Choosing the defaults"
  DropoutRates dropout;     // between LSTM layers, and before the head (training only)
};

// --epochs, --batch-per-rank, --seed, --schedule: with the lengths and the rank count, what the Schedule is a
// function of; the seed also draws the initial weights, the dropout masks and (gen, bench) the synthetic data.
struct ScheduleOptions {
  int64_t epochs = 30;
  int64_t batch_per_rank = 1;   // K sequences per rank per step; global batch G = ranks x K
  uint64_t seed = 1;
  ScheduleKind kind = ScheduleKind::Balanced;
};

// --device, --lstm: which backend runs the model, and the CUDA backend's LSTM.
struct BackendChoice {
  Device device = Device::Cpu;
  LstmPath lstm = LstmPath::Auto;   // cudnn | fused | auto
  std::string max_device_memory = "auto";   // CUDA: most device memory for the training shard; auto: free less a margin
};

// --init-from, --resume: where a run's weights come from (neither: a random initialisation from --seed).
struct StartOptions {
  std::string init_from;   // CKPT.h5: the weights only
  std::string resume;      // CKPT.h5 | DIR: the whole run, which takes precedence over --init-from
};

// --val and model selection (doc/hpc.md, "Choosing the model you keep").
struct ValidationOptions {
  std::string data;                   // --val FILE.h5; empty: no validation
  int64_t every = 0;                  // --val-every N steps as well as after every epoch (0: epochs only)
  std::optional<SelectMetric> select; // --select; unset: val_accuracy for classification, val_loss else
  int64_t early_stop = 0;             // --early-stop N validations without improvement (0: off)
};

// The run folder's records and checkpoints: --log-every, --write-order, --checkpoint-every, --checkpoint-minutes,
// --keep, --signal-check-every.
struct RecordOptions {
  int64_t log_every = 100;
  bool write_order = false;
  int64_t checkpoint_every = 0, keep = 3, signal_check_every = 10;
  double checkpoint_minutes = 0.0;
};

// --on-nonfinite, --comm-timeout: what a NaN/Inf step and a dead or stuck rank end in.
struct FaultOptions {
  NonfinitePolicy on_nonfinite = NonfinitePolicy::Stop;
  double comm_timeout = 20.0;   // seconds (0: wait forever)
};

// The Trainer's configuration: the groups above, embedded whole. `train` fills all of it; `bench` the groups of
// set-up and step (source, model, optimizer, schedule, backend), and the defaults below stand for the rest.
struct TrainConfig {
  // Data: a file, or (bench without --data) the synthetic set every rank builds alike.
  DataSource source;                      // --data, --max-memory
  std::optional<SyntheticSpec> synthetic; // set when there is no --data (bench)
  Normalization normalize = Normalization::None;   // --normalize (bench: none, it times the data as given)
  ValidationOptions validation;

  ModelOptions model;
  StartOptions start;
  OptimizerConfig optimizer;
  LrSchedule lr;                          // bench: constant; total_steps is filled in by the Trainer
  ScheduleOptions schedule;
  BackendChoice backend;
  FaultOptions faults;

  // The run folder and its records.
  std::string out;                        // --out DIR
  std::string trace;                      // --trace FILE.json: the Chrome trace of every rank's phases (train, bench)
  RecordOptions records;

  Verbosity talk;
  Provenance provenance;
};

}  // namespace ragtrain
