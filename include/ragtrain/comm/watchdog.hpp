// Dead or stuck ranks: a deadline (--comm-timeout) on every collective of the training loop, and, when one passes,
// naming the rank that did not come and ending the job with MPI_Abort instead of waiting forever.
//
// Why this exists: a rank killed outright is noticed by the launcher (mpirun, srun --kill-on-bad-exit), which ends
// the job. A rank that is *stopped* or hangs (SIGSTOP, a hung file system, a deadlock, a GPU that never returns)
// is noticed by nobody: the other ranks wait in their next collective forever, MPI and NCCL have no time-out
// for that. So the collectives of the loop are non-blocking (MPI_Iallreduce, ..., NCCL on a non-blocking
// communicator) and each host wait polls under a deadline.
//
// Naming the missing rank, cheaply: the ranks form a ring. A rank whose wait timed out asks its left neighbour
// (rank - 1 mod P) "are you alive?" on the watchdog's own communicator and waits a short grace period for the
// answer. Every rank answers its right neighbour while it waits in any watched collective (or is failing
// itself), so an answer means "alive and waiting with us"; silence means that the left neighbour died or is
// stuck outside the collectives: that rank prints "rank L (on H) did not reach <what> in step S within N s"
// and calls MPI_Abort(kExitPeerFailure). A rank whose left neighbour answered waits for that message (another
// rank's MPI_Abort ends it) and, if none comes, ends the job itself with a line saying that the rank it asked
// is alive (ranks in different collectives: a bug, or a very slow rank). One message per rank, no all-to-all, nothing on
// the normal path but one extra MPI_Test now and then while a rank waits anyway.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ragtrain/comm/context.hpp"

namespace ragtrain {

// A moment after which a wait gives up; never() waits forever (--comm-timeout 0, or the watchdog not armed).
class Deadline {
 public:
  static Deadline never() { return Deadline(); }
  static Deadline after(double seconds);   // seconds <= 0: never
  bool passed() const { return !never_ && std::chrono::steady_clock::now() >= at_; }
  bool is_never() const { return never_; }

 private:
  std::chrono::steady_clock::time_point at_{};
  bool never_ = true;
};

class CommWatchdog {
 public:
  // What ends the job once the message is printed: MPI_Abort(world, code) unless a test passes its own (which
  // must not return: it throws). `message` is the text that was printed.
  using AbortFn = std::function<void(int code, const std::string& message)>;

  // Collective over ctx.world: duplicates it (the watchdog's messages never mix with the program's) and learns
  // every rank's host for the message. timeout_s <= 0 turns the watchdog off: the plain blocking collectives,
  // as before it existed (an NCCL communicator that reports an error still goes through fail()).
  // grace_s < 0: the default, grace_for(timeout_s).
  CommWatchdog(const Context& ctx, double timeout_s, double grace_s = -1, AbortFn abort = nullptr);
  ~CommWatchdog();
  CommWatchdog(const CommWatchdog&) = delete;
  CommWatchdog& operator=(const CommWatchdog&) = delete;

  // How long a timed-out rank waits for its neighbour's answer: an eighth of the time-out, 1 to 3 s. The answer
  // comes in milliseconds from a rank that waits in any watched collective; the rest is slack for loaded nodes.
  // With the default --comm-timeout of 20 s a stopped rank ends the job about 23 s after it stopped.
  static double grace_for(double timeout_s);

  // Set-up (reading data, NCCL set-up) runs unwatched: how long it takes legitimately differs between ranks.
  // train arms the watchdog when the loop starts; from then on every watched collective has the deadline
  // (with a time-out of 0 it stays unarmed: plain blocking collectives).
  void arm() { armed_ = timeout_s_ > 0; }
  bool armed() const { return armed_; }
  double timeout_s() const { return timeout_s_; }
  double grace_s() const { return grace_s_; }

  // The training step in progress (1-based; 0: none yet), for messages.
  void set_step(int64_t step) { step_ = step; }

  // now + --comm-timeout; never() when not armed.
  Deadline deadline() const;

  // MPI_Wait for a non-blocking collective, under deadline(): polls MPI_Test, answers the neighbour's question
  // meanwhile, and on time-out (or an MPI error) calls fail(what). `what` names the collective for the message
  // ("the gradient all-reduce").
  void wait(MPI_Request& req, const char* what);

  // A non-blocking collective was just posted and returned `posted`: fail() if posting failed, else wait().
  void complete(int posted, MPI_Request& req, const char* what);

  // For host waits that are not an MPI request (the GPU's event polling): answers the right neighbour's
  // "are you alive?" if it asked. Cheap (one MPI_Test); call it every few hundred microseconds while waiting.
  void keep_alive();

  // The collective `what` timed out (detail empty) or failed (detail says how): asks the left neighbour, prints
  // the message naming the missing rank (or saying that all it asked are alive) and ends the job with
  // kExitPeerFailure. Never returns.
  [[noreturn]] void fail(const std::string& what, const std::string& detail = "");

 private:
  std::string where(const std::string& what) const;   // "the gradient all-reduce in step 38"
  [[noreturn]] void finish(const std::string& message, const std::string& hint);
  void post_ping_receive();
  void complete_question();   // the question fail() asked: cancel/complete its requests

  Context ctx_;
  MPI_Comm comm_ = MPI_COMM_NULL;   // duplicate of ctx.world: pings and answers only
  std::vector<std::string> hosts_;  // by rank
  double timeout_s_ = 0, grace_s_ = 1;
  AbortFn abort_;
  bool armed_ = false;
  int64_t step_ = 0;
  int left_ = 0, right_ = 0;
  // The question from the right neighbour is always pre-posted; answers go back to it.
  MPI_Request ping_in_ = MPI_REQUEST_NULL, pong_out_ = MPI_REQUEST_NULL;
  int64_t ping_in_step_ = 0, pong_out_step_ = 0;
  // fail()'s own question to the left neighbour and its answer.
  MPI_Request ask_ = MPI_REQUEST_NULL, answer_ = MPI_REQUEST_NULL;
  int64_t ask_step_ = 0, answer_step_ = -1;
};

// The collectives of the training loop: under ctx.watchdog's deadline when it is armed (non-blocking call +
// CommWatchdog::wait), the plain blocking MPI call otherwise, so set-up and the other commands are unchanged.
// `what` names the collective in the message of a time-out. Errors: InternalError (unwatched), fail (watched).
void watched_allreduce(const Context& ctx, const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                       const char* what);
void watched_gather(const Context& ctx, const void* send, int count, MPI_Datatype type, void* recv, int root,
                    const char* what);
void watched_gatherv(const Context& ctx, const void* send, int count, MPI_Datatype type, void* recv,
                     const int* counts, const int* displs, int root, const char* what);

}  // namespace ragtrain
