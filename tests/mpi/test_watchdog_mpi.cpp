// The watchdog's naming protocol on 2-4 ranks, in one process per rank: one rank does not join a watched
// all-reduce; its right neighbour must name it (and its host), the other ranks must say that their neighbour is
// alive, and nobody may give up before the time-out. The abort function throws instead of MPI_Abort, so the
// ranks' verdicts can be compared. (The real thing, SIGKILL/SIGSTOP under mpirun: tests/e2e/test_faults_e2e.cpp.)
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

#include "ragtrain/comm/context.hpp"
#include "ragtrain/comm/watchdog.hpp"
#include "ragtrain/core/error.hpp"

using namespace ragtrain;

namespace {

struct Fired {
  int code;
  std::string message;
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(Watchdog, TheRankThatDoesNotComeIsNamedByItsRightNeighbour) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_SKIP() << "needs 2 or more ranks";
  // A duplicate: the abandoned all-reduce must not disturb the other tests' collectives on MPI_COMM_WORLD.
  MPI_Comm comm, done;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  // The other ranks tell the stuck one here that they have given up: it must not join the all-reduce before
  // (which a fixed sleep could not promise on a loaded machine: the all-reduce would complete, no one named).
  MPI_Comm_dup(MPI_COMM_WORLD, &done);
  const Context ctx = Context::create(comm);
  const double timeout = 1.0, grace = 0.5;
  const int missing = 1;
  std::string verdict = "none";
  int code = 0;
  double waited = 0;
  {
    CommWatchdog wd(ctx, timeout, grace, [](int c, const std::string& m) { throw Fired{c, m}; });
    wd.arm();
    wd.set_step(7);
    const Context watched = ctx.with_watchdog(&wd);
    // Static: a rank that gave up leaves its all-reduce posted, and it completes later, into these buffers.
    static int in = 1, out = 0;
    if (ctx.rank != missing) {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        watched_allreduce(watched, &in, &out, 1, MPI_INT, MPI_SUM, "the test all-reduce");
        verdict = "completed";
      } catch (const Fired& f) {
        verdict = f.message;
        code = f.code;
      }
      waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      int given_up = 1;
      MPI_Send(&given_up, 1, MPI_INT, missing, 0, done);
    } else {
      // Stuck: answers nobody (no watched wait) until every other rank has given up, then joins the all-reduce
      // (unwatched) so that the abandoned operation completes everywhere.
      for (int r = 0; r < size - 1; ++r) {
        int given_up = 0;
        MPI_Recv(&given_up, 1, MPI_INT, MPI_ANY_SOURCE, 0, done, MPI_STATUS_IGNORE);
      }
      MPI_Request req;
      MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_SUM, comm, &req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      verdict = "stuck";
    }
    MPI_Barrier(comm);   // drives the abandoned all-reduce on the ranks that gave up
  }
  if (ctx.rank == missing) {
    EXPECT_EQ(verdict, "stuck");
  } else {
    EXPECT_EQ(code, kExitPeerFailure);
    EXPECT_GE(waited, timeout) << "gave up before the time-out";
    if (ctx.rank == (missing + 1) % size) {
      EXPECT_TRUE(contains(verdict, "rank 1 (on " + ctx.host + ") did not reach the test all-reduce in step 7 within 1 s"))
          << verdict;
      EXPECT_TRUE(contains(verdict, "does not answer: it died or is stuck")) << verdict;
    } else {
      EXPECT_TRUE(contains(verdict, "the test all-reduce in step 7 did not complete within 1 s")) << verdict;
      EXPECT_TRUE(contains(verdict, "is alive (in step 7)")) << verdict;
      EXPECT_GE(waited, timeout + 2 * grace + timeout) << "the rank whose neighbour is alive leaves the naming to another";
    }
  }
  MPI_Comm_free(&done);
  MPI_Comm_free(&comm);
}

TEST(Watchdog, UnarmedOrZeroTimeoutCollectivesArePlainMpi) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const Context ctx = Context::create(comm);
  {
    CommWatchdog off(ctx, 0.0, -1, [](int c, const std::string& m) { throw Fired{c, m}; });
    off.arm();   // a time-out of 0 keeps it unarmed: --comm-timeout 0 is the old blocking path
    EXPECT_FALSE(off.armed());
    EXPECT_TRUE(off.deadline().is_never());
    CommWatchdog on(ctx, 20.0);
    EXPECT_FALSE(on.armed());   // not until train's loop arms it
    on.arm();
    EXPECT_TRUE(on.armed());
    EXPECT_FALSE(on.deadline().is_never());
    EXPECT_DOUBLE_EQ(on.grace_s(), 2.5);
    EXPECT_DOUBLE_EQ(CommWatchdog::grace_for(60.0), 3.0);
    EXPECT_DOUBLE_EQ(CommWatchdog::grace_for(5.0), 1.0);
    // Both paths give every rank the same sum.
    for (CommWatchdog* w : {&off, &on}) {
      const Context c = ctx.with_watchdog(w);
      int mine[2] = {ctx.rank + 1, -ctx.rank}, sum[2] = {0, 0};
      watched_allreduce(c, mine, sum, 2, MPI_INT, MPI_SUM, "the test all-reduce");
      EXPECT_EQ(sum[0], ctx.size * (ctx.size + 1) / 2);
      EXPECT_EQ(sum[1], -ctx.size * (ctx.size - 1) / 2);
      std::vector<int> all(static_cast<size_t>(ctx.size), -1);
      int r = ctx.rank;
      watched_gather(c, &r, 1, MPI_INT, all.data(), 0, "the test gather");
      if (ctx.is_root()) {
        for (int k = 0; k < ctx.size; ++k) EXPECT_EQ(all[static_cast<size_t>(k)], k);
      }
    }
  }
  MPI_Comm_free(&comm);
}
