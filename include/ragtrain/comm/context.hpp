// MPI start-up and tear-down (RAII), the rank layout, and agreement of all ranks on errors.
#pragma once

#include <mpi.h>

#include <exception>
#include <string>

namespace ragtrain {

// MPI_Init on construction, MPI_Finalize on destruction (also on the error path). MPI_COMM_WORLD returns
// errors to the caller (MPI_ERRORS_RETURN) so MPI_CHECK can report them with MPI's own string.
class MpiEnvironment {
 public:
  MpiEnvironment(int* argc, char*** argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;
};

class CommWatchdog;   // comm/watchdog.hpp

// Who this process is. Passed explicitly; never global.
struct Context {
  MPI_Comm world = MPI_COMM_WORLD;
  int rank = 0, size = 1;              // in `world`
  int local_rank = 0, local_size = 1;  // on this node (MPI_Comm_split_type shared): picks the GPU
  std::string host;
  // Not owned. When set (train, for its run), the collectives that take this Context wait under its deadline
  // (--comm-timeout) once it is armed, and name a dead or stuck rank instead of waiting forever.
  CommWatchdog* watchdog = nullptr;
  bool is_root() const { return rank == 0; }

  static Context create(MPI_Comm world);
  Context with_watchdog(CommWatchdog* w) const {
    Context c = *this;
    c.watchdog = w;
    return c;
  }
};

// Thrown on every rank after the ranks agreed to stop; carries the exit code. The message was printed already.
struct RunAborted {
  int code;
};

// Collective: every rank passes the exception it caught in the last phase (or nullptr). If any rank has one,
// the lowest such rank prints it (what, where, hint) and every rank throws RunAborted with the most severe
// code (2 for UserError, 3 otherwise). Lets ranks exit together instead of one exiting while others wait.
// Watched (ctx.watchdog): a rank that never arrives ends the job with kExitPeerFailure instead.
void agree_on_errors(const Context& ctx, std::exception_ptr local);

// Runs `phase` on every rank, then agrees on errors. `phase` must not leave another rank inside a collective.
template <class F>
void collective_phase(const Context& ctx, F&& phase) {
  std::exception_ptr err;
  try {
    phase();
  } catch (...) {
    err = std::current_exception();
  }
  agree_on_errors(ctx, err);
}

// Collective: whether every rank holds the same `text` (compared by hash, two small all-reduces).
bool same_on_every_rank(const Context& ctx, const std::string& text);

// Prints an error the way every ragtrain error looks: "ragtrain: error: ..." and an indented hint line.
void print_error(const Context* ctx, const std::exception_ptr& e);

}  // namespace ragtrain
