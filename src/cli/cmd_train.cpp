// `ragtrain train`: the CLI glue around the Trainer (train/trainer.hpp): the watchdog, the Trainer's set-up
// phases, the effective configuration once all of them passed, then the loop.
#include <cstdio>

#include "ragtrain/checkpoint/run_lock.hpp"
#include "ragtrain/cli/commands.hpp"
#include "ragtrain/comm/watchdog.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/metrics/units.hpp"
#include "ragtrain/train/trainer.hpp"

namespace ragtrain {

int run_train(const Context& launched, const TrainConfig& cfg) {
  // One run per --out folder, held until this function returns (checkpoint/run_lock.hpp).
  const RunLock run_lock = RunLock::acquire(launched, cfg.out, cfg.provenance.command_line);
  // Dead or stuck ranks: once the loop starts (Trainer::run arms it), every collective that takes `ctx` waits at
  // most --comm-timeout, then names the rank that did not come and ends the job (comm/watchdog.hpp).
  CommWatchdog watchdog(launched, cfg.faults.comm_timeout);
  const Context ctx = launched.with_watchdog(&watchdog);
  Trainer trainer(ctx, cfg, &watchdog);
  trainer.setup_data();
  if (!trainer.setup_resume()) return kExitOk;   // the checkpoint is already at the last step
  trainer.setup_shards();
  trainer.setup_backend();
  trainer.open_run_folder();
  // Only now that the data, the checkpoints and the backend were all checked: a configuration printed is one that
  // runs, and an error is never buried under it.
  if (ctx.is_root() && !cfg.talk.quiet) {
    std::printf("# effective configuration (%s)\n%s", count_of(ctx.size, "rank").c_str(),
                cfg.provenance.effective.c_str());
    std::fflush(stdout);
  }
  trainer.announce();
  const int code = trainer.run();
  trainer.write_trace();   // also after a stop by signal (exit 75): the timeline up to the checkpoint
  if (code == kExitOk) trainer.summarize();
  return code;
}

}  // namespace ragtrain
