// Whether a checkpoint can continue the run being started, and from where: everything that decides the
// trajectory must match; the rank count may change as long as the global batch does not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ragtrain/checkpoint/checkpoint.hpp"

namespace ragtrain {

// The run being started, as far as resuming is concerned: the model it builds and where its schedule stands
// (RunPosition as a checkpoint of this run would hold it), and its effective configuration.
struct ResumeTarget {
  ModelShape shape;
  RunPosition position;
  DropoutRates dropout;
  std::string effective_config;   // RunConfig::effective of this run
};

struct ResumePlan {
  int64_t step = 0;             // global steps already done; the run continues with step `step`
  int64_t epoch = 0;            // index of the epoch that step belongs to
  int64_t step_in_epoch = 0;
  bool layout_changed = false;  // other ranks x batch-per-rank than the run that wrote it (same G)
  bool finished = false;        // the checkpoint is already at the last step of this run
  std::string message;          // one or more lines for the terminal, saying where the run continues and how
};

// Options that change the numbers a run produces, besides the model shape (--hidden, --layers), --seed,
// --schedule and the global batch (checked on their own); they must equal those stored in the checkpoint. (--epochs may grow; --val, --out, --log-every,
// --device and the checkpoint options may change.)
const std::vector<std::string>& trajectory_options();

// Checks `ckpt` (read from `path`) against `target`; UserError naming the file, what differs and how to fix it.
// A different global batch G = ranks x batch-per-rank is refused: G decides which sequences meet in a step, so
// the continuation would not be the same run (doc/hpc.md, "Resuming").
ResumePlan plan_resume(const std::string& path, const Checkpoint& ckpt, const ResumeTarget& target);

}  // namespace ragtrain
