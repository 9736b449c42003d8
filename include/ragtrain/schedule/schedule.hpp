// Which sequence each rank trains on at each step: a pure function of (lengths, world size, batch per rank,
// seed, epoch, kind).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ragtrain {

// random:   sequences are dealt to columns from a seeded permutation; every column is shuffled on its own each
//           epoch. Every step waits for its longest sequence: E[max of P lengths], ~21% idle for U[64,128], P=8.
// balanced: sequences are sorted by length (ties in seeded random order) and dealt round-robin, so row m of
//           every column holds the m-th block of G consecutive lengths and every rank has the same length
//           profile. Each epoch every column reorders its own sequences with a jittered sort (row m gets the key
//           m + W_m * U[0,1)), so a sequence moves among the rows of nearly its length: W_m spans the rows whose
//           lengths lie within kLengthTolerance of row m's. Where lengths are sparse that alone would leave a row
//           unchanged, so the lowest mixing_columns() columns get at least mixing_window() rows: enough for about
//           kRepeatTarget of the global batches to repeat between two epochs even if every length is distinct,
//           and cheap, because column c of row m+1 is only c+1 sorted positions longer than row m's longest. The
//           full rows are then visited in a shared random order: a step's lengths stay nearly equal while the
//           sequences that meet in it change every epoch. The columns that hold one sequence more (c < N mod G)
//           give the short last step their sequences at one random row, drawn anew every epoch.
//           Within a row, rank r's K columns hold K neighbouring lengths: one padded call wastes almost nothing,
//           but in a row whose lengths spread widely (a heavy tail's last rows) the rank with the row's longest K
//           works much longer than the others. Those "wide" rows (the widest, as long as their summed spread
//           1 - mean/max stays under kWideBudget of the rows) are dealt to columns in golden-ratio order instead:
//           any run of K consecutive columns then draws its lengths evenly from the whole row, so every rank gets
//           about the row's mean. The choice depends on the lengths and G alone (never on how G splits into
//           P x K); it trades imbalance for padding only where padding is cheap, and at K = 1 changes nothing.
enum class ScheduleKind { Random, Balanced };
ScheduleKind parse_schedule_kind(const std::string& name);   // "random" | "balanced"; UserError otherwise
const char* schedule_kind_name(ScheduleKind kind);

// The global batch has G = P*K slots ("columns"). Each sequence is dealt once to a fixed column; rank r owns
// columns r*K .. r*K+K-1, so it reads its sequences from disk once for the whole run. Step s trains one
// sequence of every column. Hence, for both kinds:
//  - every sequence is visited exactly once per epoch, in an order reshuffled every epoch;
//  - the sequences of a global step depend only on (lengths, seed, epoch, G), never on how G splits into P x K;
//  - when N is not a multiple of G, columns c >= N mod G are one shorter, so only the last step is partial
//    and the ranks owning the short columns contribute nothing to it; its sequences, one of every longer
//    column, are drawn anew every epoch.
class Schedule {
 public:
  static constexpr double kLengthTolerance = 0.01;   // balanced: rows within 1% of a row's length mix freely
  static constexpr double kRepeatTarget = 1.0 / 64;   // balanced: aimed-for share of batches met again next epoch
  static constexpr int64_t kMixingColumns = 7;        // balanced: columns that mix across distinct lengths
  static constexpr double kWideBudget = 0.02;         // balanced: summed spread of the rows dealt golden-ratio

  // Random schedule without lengths (every sequence counts the same).
  Schedule(int64_t num_sequences, int64_t world_size, int64_t batch_per_rank, uint64_t seed);
  Schedule(const std::vector<int64_t>& lengths, int64_t world_size, int64_t batch_per_rank, uint64_t seed,
           ScheduleKind kind);

  int64_t num_sequences() const { return n_; }
  int64_t global_batch() const { return g_; }
  int64_t batch_per_rank() const { return k_; }
  int64_t world_size() const { return p_; }
  ScheduleKind kind() const { return kind_; }
  int64_t steps_per_epoch() const { return (n_ + g_ - 1) / g_; }

  // Balanced: how many columns (the lowest) mix across rows of distinct lengths, min(G-1, kMixingColumns), and
  // the jitter window in rows that keeps a global batch repeating with about kRepeatTarget probability when
  // that many columns mix.
  int64_t mixing_columns() const;
  static double mixing_window(int64_t columns);

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
  // Round-robin deal of `perm` (row m = perm[m*G .. m*G+G)); a row with spread[m] set goes to the columns in
  // golden-ratio order.
  void deal(const std::vector<int64_t>& perm, const std::vector<char>& spread = {});
  int64_t col_begin(int64_t c) const;   // start of column c in the column-major layout
  int64_t col_size(int64_t c) const;

  int64_t n_, p_, k_, g_;
  uint64_t seed_;
  ScheduleKind kind_ = ScheduleKind::Random;
  std::vector<int64_t> dealt_;          // (N) column-major fixed assignment
  std::vector<double> window_;          // balanced: (rows) how many rows from each lie within kLengthTolerance
};

// Length imbalance of one step: 1 - mean/max of the per-rank timesteps (all P ranks, idle ones count 0).
// 0 when every rank has the same work; what fraction of the step the average rank waits for the slowest.
double step_imbalance(const Schedule::Epoch& epoch, int64_t step, const Schedule& schedule,
                      const std::vector<int64_t>& lengths);

// Mean step imbalance over `epochs` epochs: what `ragtrain simulate` reports, without running anything.
double mean_imbalance(const Schedule& schedule, const std::vector<int64_t>& lengths, int64_t epochs);

// Contiguous block [begin, end) of n items for `rank` of `size`; the first n % size ranks get one more.
// Used where order does not matter (evaluation, prediction).
struct Range {
  int64_t begin = 0, end = 0;
};
Range block_range(int64_t n, int64_t size, int64_t rank);
std::vector<int64_t> block_indices(int64_t n, int64_t size, int64_t rank);

}  // namespace ragtrain
