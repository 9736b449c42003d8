// Stop requests by signal (SIGTERM, SIGUSR1 — what Slurm sends before a time limit or on preemption — and SIGINT,
// Ctrl-C on a run started without a launcher) and the
// agreement of all ranks on them, and on timed checkpoints, at step boundaries.
#pragma once

#include "ragtrain/comm/context.hpp"

namespace ragtrain {

// Installs handlers for SIGTERM, SIGUSR1 and SIGINT (unless SIGINT was ignored from the start, as a shell starts a
// background job) that only record the signal number. Call before MPI_Init, so
// that the MPI library starts with them in place. The first signal asks the run to checkpoint and stop at the
// next step boundary; the handler then restores the default action of all three, so a second one ends the
// process at once (checkpoints are renamed into place whole, so that cannot leave a damaged one behind).
void install_stop_handlers();

// The signal that asked this process to stop, or 0.
int pending_stop_signal();

// "SIGTERM", "SIGUSR1", ...
const char* signal_name(int sig);

// What every rank decided together at a step boundary.
struct StepAgreement {
  int stop_signal = 0;             // > 0: some rank was signalled (the largest signal number): checkpoint, stop
  bool timed_checkpoint = false;   // rank 0's clock says a --checkpoint-minutes checkpoint is due
};

// Collective, once per step: one MPI_Allreduce (MAX) of two ints. Every rank contributes its pending signal;
// only rank 0's `root_clock_due` counts, so the ranks' clocks never have to agree.
StepAgreement agree_at_step_boundary(const Context& ctx, bool root_clock_due);

}  // namespace ragtrain
