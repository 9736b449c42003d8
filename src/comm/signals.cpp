// Signal handlers (SIGTERM, SIGUSR1, SIGINT) that only set a flag, and the per-step agreement of all ranks on stopping and checkpointing.
#include "ragtrain/comm/signals.hpp"

#include <signal.h>

#include <csignal>

#include "ragtrain/comm/watchdog.hpp"
#include "ragtrain/core/error.hpp"

namespace ragtrain {

namespace {

// The one piece of global mutable state in ragtrain, and unavoidable: a signal handler can reach nothing else.
// Written only by the handler, read at step boundaries. 0 = no request.
volatile std::sig_atomic_t g_stop_signal = 0;

void restore_default(int sig) {
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, nullptr);   // async-signal-safe
}

extern "C" void on_stop_signal(int sig) {
  if (g_stop_signal == 0) g_stop_signal = sig;
  // From now on the three do what they do by default (terminate): the second one (a second Ctrl-C) ends the run.
  restore_default(SIGTERM);
  restore_default(SIGUSR1);
  struct sigaction now {};
  if (sigaction(SIGINT, nullptr, &now) == 0 && now.sa_handler == on_stop_signal) restore_default(SIGINT);
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGTERM);   // one handler at a time: the signals cannot interleave
  sigaddset(&sa.sa_mask, SIGUSR1);
  sigaddset(&sa.sa_mask, SIGINT);
  sa.sa_flags = SA_RESTART;          // system calls in progress (file writes, MPI progress) carry on
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  // Ctrl-C on a run started without a launcher. A SIGINT ignored from the start stays ignored: the shell's way
  // of keeping a job started in the background (`ragtrain train ... &` in a script) out of the terminal's Ctrl-C.
  struct sigaction inherited {};
  if (sigaction(SIGINT, nullptr, &inherited) == 0 && inherited.sa_handler != SIG_IGN) sigaction(SIGINT, &sa, nullptr);
}

int pending_stop_signal() { return g_stop_signal; }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGINT: return "SIGINT";
    default: return "signal";
  }
}

StepAgreement agree_at_step_boundary(const Context& ctx, bool root_clock_due) {
  int mine[2] = {static_cast<int>(g_stop_signal), ctx.is_root() && root_clock_due ? 1 : 0};
  int all[2] = {0, 0};
  watched_allreduce(ctx, mine, all, 2, MPI_INT, MPI_MAX, "the step-boundary agreement");
  StepAgreement a;
  a.stop_signal = all[0];
  a.timed_checkpoint = all[1] != 0;
  return a;
}

}  // namespace ragtrain
