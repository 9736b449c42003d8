// gather_to_root on any rank count: uneven and empty contributions, in rank order, sent in many small pieces.
#include <gtest/gtest.h>
#include <mpi.h>

#include "ragtrain/comm/context.hpp"
#include "ragtrain/comm/gather.hpp"

using namespace ragtrain;

TEST(GatherToRoot, RankOrderWithPiecesAndEmptyRanks) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Rank r contributes 7 * r values (rank 0 none): r * 1000 + i.
  std::vector<float> mine;
  for (int i = 0; i < 7 * rank; ++i) mine.push_back(static_cast<float>(rank * 1000 + i));
  for (int64_t piece : {int64_t{1}, int64_t{3}, int64_t{1} << 28}) {
    const std::vector<float> all = gather_to_root(mine, MPI_COMM_WORLD, piece);
    if (rank != 0) {
      EXPECT_TRUE(all.empty());
      continue;
    }
    std::vector<float> want;
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < 7 * r; ++i) want.push_back(static_cast<float>(r * 1000 + i));
    EXPECT_EQ(all, want) << "pieces of " << piece;
  }
}

// Ranks started with different options are caught before any work (main's first check): the verdict is the same
// on every rank, whichever rank differs.
TEST(SameOnEveryRank, EqualTextsAgreeAndOneDifferentRankIsSeenEverywhere) {
  const ragtrain::Context ctx = ragtrain::Context::create(MPI_COMM_WORLD);
  EXPECT_TRUE(ragtrain::same_on_every_rank(ctx, "train\nhidden = 8\n"));
  EXPECT_TRUE(ragtrain::same_on_every_rank(ctx, ""));
  const bool differs = ctx.size > 1;
  EXPECT_EQ(ragtrain::same_on_every_rank(ctx, ctx.rank == ctx.size - 1 ? "train\nhidden = 4\n" : "train\nhidden = 8\n"),
            !differs);
}
