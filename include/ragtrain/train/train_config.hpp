// What the Trainer needs from the command line, typed: every string option already parsed into its enum at the
// CLI boundary (cli/options.cpp). `train` fills all of it; `bench` fills the set-up and step parts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/data/normalization.hpp"
#include "ragtrain/data/synthetic.hpp"
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

struct TrainConfig {
  // Data: a file, or (bench without --data) the synthetic set every rank builds alike.
  std::string data;                       // --data
  std::optional<SyntheticSpec> synthetic; // set when there is no --data (bench)
  std::string val;                        // --val; empty: no validation
  std::string max_memory = "auto";        // --max-memory
  Normalization normalize = Normalization::None;   // --normalize

  // Model and its initial weights.
  int64_t hidden = 50, layers = 1;
  bool bidirectional = false;             // --bidirectional
  Pool pool = Pool::Last;                 // --pool
  DropoutRates dropout;                   // --dropout, --head-dropout (training only)
  std::string init_from;                  // --init-from CKPT.h5
  std::string resume;                     // --resume CKPT.h5|DIR

  // Optimisation and the schedule.
  OptimizerConfig optimizer;
  LrSchedule lr;                          // total_steps is filled in by the Trainer (epochs x steps per epoch)
  int64_t epochs = 10, batch_per_rank = 1;
  uint64_t seed = 1;
  ScheduleKind schedule = ScheduleKind::Balanced;
  Device device = Device::Cpu;
  LstmPath lstm = LstmPath::Auto;         // --lstm: the CUDA backend's LSTM, cudnn | fused | auto
  NonfinitePolicy on_nonfinite = NonfinitePolicy::Stop;
  double comm_timeout = 20.0;             // --comm-timeout seconds (0: wait forever)

  // The run folder and its records.
  std::string out;                        // --out DIR
  int64_t log_every = 100;
  bool write_order = false;
  std::string trace;                      // --trace FILE.json: the Chrome trace of every rank's phases (train, bench)
  int64_t checkpoint_every = 0, keep = 3, signal_check_every = 10;
  double checkpoint_minutes = 0.0;

  // Model selection (doc/hpc.md, "Choosing the model you keep").
  int64_t val_every = 0;                  // --val-every N steps as well as after every epoch (0: epochs only)
  std::optional<SelectMetric> select;     // --select; unset: val_accuracy for classification, val_loss else
  int64_t early_stop = 0;                 // --early-stop N validations without improvement (0: off)

  bool quiet = false, verbose = false;
  std::string command_line;               // provenance
  std::string effective;                  // the effective configuration (config-file form)
};

}  // namespace ragtrain
