// `ragtrain train`: the CLI glue around the Trainer (train/trainer.hpp): the watchdog, the Trainer's set-up
// phases, the effective configuration once all of them passed, then the loop.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "ragtrain/checkpoint/run_lock.hpp"
#include "ragtrain/cli/commands.hpp"
#include "ragtrain/comm/signals.hpp"
#include "ragtrain/comm/watchdog.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/metrics/units.hpp"
#include "ragtrain/train/trainer.hpp"

namespace ragtrain {

namespace {

// Test hook, for the test of a signal during a long set-up (tests/e2e/test_signals_e2e.cpp): with
// RAGTRAIN_TEST_SETUP_PAUSE=SECONDS (at most 60), set-up stands still that long before the data read, as a read of
// a large data set would. Does nothing otherwise.
void setup_test_pause() {
  const char* knob = std::getenv("RAGTRAIN_TEST_SETUP_PAUSE");
  if (knob == nullptr) return;
  const int tenths = 10 * std::min(60, std::max(0, std::atoi(knob)));
  std::fprintf(stderr, "ragtrain: test hook RAGTRAIN_TEST_SETUP_PAUSE=%s: pid %d paused in set-up\n", knob,
               static_cast<int>(::getpid()));
  std::fflush(stderr);
  for (int i = 0; i < tenths; ++i) ::usleep(100000);
}

// A stop signal that came during set-up (a long data read, the backend's measurements): nothing is trained, so
// there is nothing to save; every rank learns of it at the end of the phase and exits 75 at once, instead of
// training --signal-check-every steps first. Collective. Returns 0 when no rank was signalled.
int stopped_in_setup(const Context& ctx, const TrainConfig& cfg, const char* phase) {
  const int sig = agree_at_step_boundary(ctx, false).stop_signal;
  if (sig == 0) return 0;
  if (ctx.is_root()) {
    std::printf("# stopped by %s during set-up (%s), before any step: nothing new to save; run the same command "
                "again%s (exit code %d)\n",
                signal_name(sig), phase, cfg.start.resume.empty() ? "" : " to resume", kExitCheckpointed);
    std::fflush(stdout);
  }
  return kExitCheckpointed;
}

}  // namespace

int run_train(const Context& launched, const TrainConfig& cfg) {
  // One run per --out folder, held until this function returns (checkpoint/run_lock.hpp).
  const RunLock run_lock = RunLock::acquire(launched, cfg.out, cfg.provenance.command_line);
  // Dead or stuck ranks: once the loop starts (Trainer::run arms it), every collective that takes `ctx` waits at
  // most --comm-timeout, then names the rank that did not come and ends the job (comm/watchdog.hpp).
  CommWatchdog watchdog(launched, cfg.faults.comm_timeout);
  const Context ctx = launched.with_watchdog(&watchdog);
  Trainer trainer(ctx, cfg, &watchdog);
  trainer.setup_data();
  if (int code = stopped_in_setup(ctx, cfg, "data headers")) return code;
  if (!trainer.setup_resume()) return kExitOk;   // the checkpoint is already at the last step
  setup_test_pause();
  trainer.setup_shards();
  if (int code = stopped_in_setup(ctx, cfg, "data read")) return code;
  trainer.setup_backend();
  if (int code = stopped_in_setup(ctx, cfg, "backend")) return code;
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
