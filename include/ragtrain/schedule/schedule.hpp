// Which sequence each rank trains on at each step: a pure function of (N, world size, batch per rank, seed, epoch).
#pragma once

#include <cstdint>
#include <vector>

namespace ragtrain {

// The global batch has G = P*K slots ("columns"). Sequence i is dealt once, from a seeded permutation, to a
// fixed column; rank r owns columns r*K .. r*K+K-1, so it reads its sequences from disk once for the whole run.
// Each epoch shuffles every column independently (seed, epoch, column), and step s trains the s-th sequence
// of every column. Hence:
//  - every sequence is visited exactly once per epoch, in an order reshuffled every epoch;
//  - the sequences of a global step depend only on (seed, epoch, G), never on how G splits into P x K;
//  - when N is not a multiple of G, columns c >= N mod G are one shorter, so only the last step is partial
//    and the ranks owning the short columns contribute nothing to it.
class Schedule {
 public:
  Schedule(int64_t num_sequences, int64_t world_size, int64_t batch_per_rank, uint64_t seed);

  int64_t num_sequences() const { return n_; }
  int64_t global_batch() const { return g_; }
  int64_t batch_per_rank() const { return k_; }
  int64_t steps_per_epoch() const { return (n_ + g_ - 1) / g_; }

  // Global indices owned by `rank` for the whole run: column r*K first, then r*K+1, ...; within a column in
  // the order dealt. This is the order of the rank's shard.
  std::vector<int64_t> rank_sequences(int64_t rank) const;

  // The per-epoch order of every column. Build once per epoch (O(N)), then query steps in O(1).
  class Epoch {
   public:
    // Global index in `column` at `step`, or -1 when the column has no sequence at that step.
    int64_t at(int64_t step, int64_t column) const;
    // The K slots of `rank` at `step` (-1 = nothing to train on in that slot).
    std::vector<int64_t> rank_batch(int64_t step, int64_t rank) const;
    // All G slots of `step`.
    std::vector<int64_t> global_batch(int64_t step) const;

   private:
    friend class Schedule;
    const Schedule* s_ = nullptr;
    std::vector<int64_t> order_;   // (N) column-major: column c occupies [col_begin(c), col_begin(c+1))
  };
  Epoch epoch(int64_t e) const;

 private:
  int64_t col_begin(int64_t c) const;   // start of column c in the column-major layout
  int64_t col_size(int64_t c) const;

  int64_t n_, p_, k_, g_;
  uint64_t seed_;
  std::vector<int64_t> dealt_;          // (N) column-major fixed assignment
};

}  // namespace ragtrain

namespace ragtrain {

// Contiguous block [begin, end) of n items for `rank` of `size`; the first n % size ranks get one more.
// Used where order does not matter (evaluation, prediction).
struct Range {
  int64_t begin = 0, end = 0;
};
Range block_range(int64_t n, int64_t size, int64_t rank);
std::vector<int64_t> block_indices(int64_t n, int64_t size, int64_t rank);

}  // namespace ragtrain
