// GoogleTest main for every test binary that is an MPI process: MPI starts as in ragtrain itself (MpiEnvironment:
// the thread level, the error handler, the MPI-IO settings), only rank 0 prints the result listener.
#include <gtest/gtest.h>
#include <mpi.h>

#include "ragtrain/comm/context.hpp"

int main(int argc, char** argv) {
  ragtrain::MpiEnvironment mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  // A failure on any rank fails the run on every rank.
  int any = rc;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any;
}
