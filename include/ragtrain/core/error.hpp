// The one error module: user errors (bad input, with a hint), check macros for every library, exit codes.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ragtrain {

// Documented process exit codes (doc/cli.md). Every rank exits with the same code.
enum ExitCode : int {
  kExitOk = 0,
  kExitUserError = 2,    // bad input: file, dataset, attribute, option; message names it and gives a hint.
                         // Also what the user fixes the same way, on every rank: a checkpoint that cannot be
                         // written (full disk: "no space left on device"; the previous checkpoint stays intact)
                         // and a NaN/Inf loss or gradient under --on-nonfinite stop (step, rank and sequence
                         // named; nothing written from the bad state). Not requeued by jobs/train.sbatch.
  kExitInternal = 3,     // a library call failed or a bug: message has file:line and the library's error
  // train stopped by SIGTERM/SIGUSR1 after every rank agreed and the checkpoint was saved: "run me again with
  // --resume". 75 is EX_TEMPFAIL of sysexits.h (a temporary failure; retrying later will work), distinct from
  // every code MPI launchers and shells use (1, 2, 126-127, 128+signal); jobs/train.sbatch requeues on it.
  kExitCheckpointed = 75,
  // train ended because a rank died or got stuck: it did not reach a collective within --comm-timeout and did
  // not answer (comm/watchdog.hpp); the message names it and its host. The rank that found it calls MPI_Abort
  // with this code (mpirun exits with it). 76 is EX_PROTOCOL of sysexits.h ("the remote side failed us").
  // Distinct from 75 on purpose: a stuck rank may be a bug, so jobs/train.sbatch does not requeue on it.
  kExitPeerFailure = 76,
};

// A mistake the user can fix: names what and where, what was expected, and how to fix it.
class UserError : public std::runtime_error {
 public:
  UserError(std::string what, std::string hint = {})
      : std::runtime_error(std::move(what)), hint_(std::move(hint)) {}
  const std::string& hint() const { return hint_; }

 private:
  std::string hint_;
};

// A failure that is not the user's fault (library error, broken invariant).
class InternalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Formats "file:line: expr: detail" for InternalError.
std::string where(const char* file, int line, const std::string& what);

// Stream-style message building: RT_MSG("expected " << n << " rows").
#define RT_MSG(stream_expr) (static_cast<std::ostringstream&&>(std::ostringstream() << stream_expr).str())

// Throws UserError unless cond holds. `what` and `hint` are stream expressions.
#define USER_CHECK(cond, what, hint)                                  \
  do {                                                                \
    if (!(cond)) throw ::ragtrain::UserError(RT_MSG(what), RT_MSG(hint)); \
  } while (0)

// Throws InternalError unless cond holds: for invariants the code itself guarantees.
#define RT_CHECK(cond, what)                                                            \
  do {                                                                                  \
    if (!(cond))                                                                        \
      throw ::ragtrain::InternalError(::ragtrain::where(__FILE__, __LINE__, RT_MSG(#cond << ": " << what))); \
  } while (0)

// MPI calls: communicators use MPI_ERRORS_RETURN, so failures come back here with MPI's own string.
std::string mpi_error_string(int code);
#define MPI_CHECK(call)                                                                          \
  do {                                                                                           \
    int rt_mpi_rc_ = (call);                                                                     \
    if (rt_mpi_rc_ != 0 /* MPI_SUCCESS */)                                                       \
      throw ::ragtrain::InternalError(::ragtrain::where(__FILE__, __LINE__,                      \
                                                        RT_MSG(#call << ": " << ::ragtrain::mpi_error_string(rt_mpi_rc_)))); \
  } while (0)

// HDF5 calls returning hid_t or herr_t: negative means failure. Used where failure is a bug; readers that
// can fail because of the user's file turn the failure into a UserError naming the file and dataset instead.
#define H5_CHECK(call)                                                                     \
  ([&]() {                                                                                 \
    auto rt_h5_rc_ = (call);                                                               \
    if (rt_h5_rc_ < 0)                                                                     \
      throw ::ragtrain::InternalError(::ragtrain::where(__FILE__, __LINE__, #call " failed")); \
    return rt_h5_rc_;                                                                      \
  }())

}  // namespace ragtrain
