// Deadlines on the loop's collectives and the ring protocol that names a dead or stuck rank.
#include "ragtrain/comm/watchdog.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

namespace {

// Tags on the watchdog's own communicator (a duplicate of the world: nothing else is ever sent on it).
constexpr int kTagPing = 1;   // "are you alive?", to the left neighbour
constexpr int kTagPong = 2;   // "yes", back to the right neighbour

// The first millisecond of a wait spins (the normal case: the others arrive within microseconds); after that
// every check yields the core, as Open MPI's own blocking calls do when oversubscribed. Never a sleep: a rank
// in the middle of a multi-round non-blocking collective must keep driving it.
constexpr auto kSpinFor = std::chrono::milliseconds(1);

// How long a rank whose neighbour is alive waits, beyond the grace periods, for the MPI_Abort of the rank that
// found the missing one to end it (Open MPI: about a second on one node) before it reports on its own; never
// more than the time-out itself.
constexpr double kAbortSeconds = 5;

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

}  // namespace

Deadline Deadline::after(double seconds) {
  Deadline d;
  if (!(seconds > 0)) return d;
  d.never_ = false;
  d.at_ = std::chrono::steady_clock::now() +
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  return d;
}

double CommWatchdog::grace_for(double timeout_s) { return std::clamp(timeout_s / 8, 1.0, 3.0); }

CommWatchdog::CommWatchdog(const Context& ctx, double timeout_s, double grace_s, AbortFn abort)
    : ctx_(ctx), timeout_s_(timeout_s), grace_s_(grace_s >= 0 ? grace_s : grace_for(timeout_s)),
      abort_(std::move(abort)) {
  ctx_.watchdog = nullptr;
  left_ = (ctx.rank + ctx.size - 1) % ctx.size;
  right_ = (ctx.rank + 1) % ctx.size;
  MPI_CHECK(MPI_Comm_dup(ctx.world, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  // Every rank's host, once: the message names where the missing rank ran.
  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  ctx.host.copy(mine, std::min(ctx.host.size(), sizeof mine - 1));
  std::vector<char> all(static_cast<size_t>(ctx.size) * MPI_MAX_PROCESSOR_NAME);
  MPI_CHECK(MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm_));
  for (int r = 0; r < ctx.size; ++r) hosts_.emplace_back(all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME);
  if (ctx.size > 1) post_ping_receive();
}

CommWatchdog::~CommWatchdog() {
  // Only local calls: this also runs while an exception unwinds. A question still unanswered is cancelled;
  // sends are one int each (eager: complete as soon as they are posted).
  if (ping_in_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&ping_in_);
    MPI_Wait(&ping_in_, MPI_STATUS_IGNORE);
  }
  if (pong_out_ != MPI_REQUEST_NULL) MPI_Wait(&pong_out_, MPI_STATUS_IGNORE);
  complete_question();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void CommWatchdog::complete_question() {
  if (answer_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&answer_);
    MPI_Wait(&answer_, MPI_STATUS_IGNORE);
  }
  if (ask_ != MPI_REQUEST_NULL) MPI_Wait(&ask_, MPI_STATUS_IGNORE);
}

void CommWatchdog::post_ping_receive() {
  MPI_Irecv(&ping_in_step_, 1, MPI_INT64_T, right_, kTagPing, comm_, &ping_in_);
}

Deadline CommWatchdog::deadline() const { return armed_ ? Deadline::after(timeout_s_) : Deadline::never(); }

void CommWatchdog::keep_alive() {
  if (ping_in_ == MPI_REQUEST_NULL) return;
  int asked = 0;
  if (MPI_Test(&ping_in_, &asked, MPI_STATUS_IGNORE) != MPI_SUCCESS || !asked) return;
  // The previous answer is a one-int eager send: complete long ago.
  if (pong_out_ != MPI_REQUEST_NULL) MPI_Wait(&pong_out_, MPI_STATUS_IGNORE);
  pong_out_step_ = step_;
  MPI_Isend(&pong_out_step_, 1, MPI_INT64_T, right_, kTagPong, comm_, &pong_out_);
  post_ping_receive();
}

void CommWatchdog::wait(MPI_Request& req, const char* what) {
  const Deadline deadline = this->deadline();
  const auto start = std::chrono::steady_clock::now();
  for (uint32_t spins = 1;; ++spins) {
    int done = 0;
    const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) fail(what, "MPI reported: " + mpi_error_string(rc));
    if (done) return;
    // Every 16th round: the clock, the neighbour's question, the deadline (each costs about one MPI_Test).
    if (spins % 16 == 0) {
      keep_alive();
      if (deadline.passed()) fail(what);
      if (std::chrono::steady_clock::now() - start > kSpinFor) sched_yield();
    }
  }
}

void CommWatchdog::complete(int posted, MPI_Request& req, const char* what) {
  if (posted != MPI_SUCCESS) fail(what, "MPI reported: " + mpi_error_string(posted));
  wait(req, what);
}

std::string CommWatchdog::where(const std::string& what) const {
  return step_ > 0 ? what + " in step " + std::to_string(step_) : what;
}

void CommWatchdog::fail(const std::string& what, const std::string& detail) {
  // What this rank saw: "did not complete within 5 s" or "failed (NCCL reported: ...)".
  const std::string saw = detail.empty() ? "did not complete within " + seconds_text(timeout_s_) : "failed (" + detail + ")";
  const std::string resume = "the newest checkpoint in --out is intact: continue with --resume OUT";
  if (ctx_.size == 1)
    finish(where(what) + " " + saw, "no other rank runs in this job: the device or a library is stuck; " + resume);

  // "Are you alive?" to the left neighbour, then its answer, answering our own right neighbour meanwhile. The
  // requests and buffers are members: a test's abort function returns by throwing, and the destructor then
  // completes them.
  if (ask_ != MPI_REQUEST_NULL || answer_ != MPI_REQUEST_NULL) complete_question();
  ask_step_ = step_;
  answer_step_ = -1;
  MPI_Isend(&ask_step_, 1, MPI_INT64_T, left_, kTagPing, comm_, &ask_);
  MPI_Irecv(&answer_step_, 1, MPI_INT64_T, left_, kTagPong, comm_, &answer_);
  const Deadline grace = Deadline::after(grace_s_);
  bool alive = false;
  while (!alive && !grace.passed()) {
    int got = 0;
    if (MPI_Test(&answer_, &got, MPI_STATUS_IGNORE) == MPI_SUCCESS && got) alive = true;
    keep_alive();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));   // the failure path: no hurry
  }
  const std::string& host = hosts_[static_cast<size_t>(left_)];
  const std::string left = "rank " + std::to_string(left_);
  if (!alive)
    finish(left + " (on " + host + ") " +
               (detail.empty() ? "did not reach " + where(what) + " within " + seconds_text(timeout_s_)
                               : "does not answer after " + where(what) + " failed (" + detail + ")") +
               (detail.empty() ? " and does not answer" : "") + ": it died or is stuck",
           left + "'s own output and " + host + "'s logs say why (killed, out of memory, a hung file system, a " +
               "stopped process); " + resume + ". If that rank is only slow (a long checkpoint write, a slow disk), " +
               "raise --comm-timeout (now " + seconds_text(timeout_s_) + "; 0 waits forever)");

  // Alive: the rank that found the missing one ends the job (its MPI_Abort ends this process too; mpirun takes
  // a second or two for that, hence the extra seconds). Should no one do so, every rank that was asked is alive
  // but not in this collective: say so and end the job anyway.
  const Deadline later = Deadline::after(2 * grace_s_ + std::min(kAbortSeconds, timeout_s_));
  while (!later.passed()) {
    keep_alive();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  finish(where(what) + " " + saw + "; this rank's neighbour " + left + " is alive (in step " +
             std::to_string(answer_step_) + ") and no rank found one that is not",
         detail.empty() ? "the ranks wait in different collectives, or one is very slow: raise --comm-timeout (now " +
                              seconds_text(timeout_s_) + "); if that does not help, please report it with the command line"
                        : "the library failed with every rank alive: NCCL_DEBUG=WARN (or INFO) shows its reason; " +
                              resume);
}

void CommWatchdog::finish(const std::string& message, const std::string& hint) {
  print_error(&ctx_, std::make_exception_ptr(UserError(message, hint)));
  std::fflush(stdout);
  if (abort_) abort_(kExitPeerFailure, message);   // a test's: throws
  MPI_Abort(ctx_.world, kExitPeerFailure);
  std::_Exit(kExitPeerFailure);   // MPI_Abort does not return; [[noreturn]] must hold even if it did
}

// ---- the watched collectives ----

namespace {
CommWatchdog* armed(const Context& ctx) { return ctx.watchdog && ctx.watchdog->armed() ? ctx.watchdog : nullptr; }
}  // namespace

void watched_allreduce(const Context& ctx, const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                       const char* what) {
  CommWatchdog* w = armed(ctx);
  if (!w) {
    MPI_CHECK(MPI_Allreduce(send, recv, count, type, op, ctx.world));
    return;
  }
  MPI_Request req;
  w->complete(MPI_Iallreduce(send, recv, count, type, op, ctx.world, &req), req, what);
}

void watched_gather(const Context& ctx, const void* send, int count, MPI_Datatype type, void* recv, int root,
                    const char* what) {
  CommWatchdog* w = armed(ctx);
  if (!w) {
    MPI_CHECK(MPI_Gather(send, count, type, recv, count, type, root, ctx.world));
    return;
  }
  MPI_Request req;
  w->complete(MPI_Igather(send, count, type, recv, count, type, root, ctx.world, &req), req, what);
}

void watched_gatherv(const Context& ctx, const void* send, int count, MPI_Datatype type, void* recv,
                     const int* counts, const int* displs, int root, const char* what) {
  CommWatchdog* w = armed(ctx);
  if (!w) {
    MPI_CHECK(MPI_Gatherv(send, count, type, recv, counts, displs, type, root, ctx.world));
    return;
  }
  MPI_Request req;
  w->complete(MPI_Igatherv(send, count, type, recv, counts, displs, type, root, ctx.world, &req), req, what);
}

}  // namespace ragtrain
