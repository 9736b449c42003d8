// The column schedules (random and length-balanced), their imbalance, and block partitions.
#include "ragtrain/schedule/schedule.hpp"

#include <algorithm>
#include <numeric>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/rng.hpp"

namespace ragtrain {

namespace {
constexpr uint64_t kDealStream = 0xD3A1;
constexpr uint64_t kEpochStream = 0xE90C;
constexpr uint64_t kRowStream = 0x7A0B;

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  Rng rng(seed, kDealStream);
  shuffle(perm, rng);
  return perm;
}

Rng epoch_rng(uint64_t seed, int64_t epoch, uint64_t stream) {
  return Rng(seed ^ mix64(static_cast<uint64_t>(epoch)), stream);
}
}  // namespace

ScheduleKind parse_schedule_kind(const std::string& name) {
  if (name == "balanced") return ScheduleKind::Balanced;
  if (name == "random") return ScheduleKind::Random;
  throw UserError("option --schedule: must be balanced or random, got '" + name + "'",
                  "balanced (default) equalises sequence lengths across ranks in every step");
}

const char* schedule_kind_name(ScheduleKind kind) { return kind == ScheduleKind::Balanced ? "balanced" : "random"; }

Schedule::Schedule(int64_t num_sequences, int64_t world_size, int64_t batch_per_rank, uint64_t seed)
    : n_(num_sequences), p_(world_size), k_(batch_per_rank), g_(world_size * batch_per_rank), seed_(seed) {
  RT_CHECK(n_ > 0 && p_ > 0 && k_ > 0, "schedule needs N, P, K > 0");
  deal(seeded_permutation(n_, seed_));
}

Schedule::Schedule(const std::vector<int64_t>& lengths, int64_t world_size, int64_t batch_per_rank, uint64_t seed,
                   ScheduleKind kind)
    : n_(static_cast<int64_t>(lengths.size())), p_(world_size), k_(batch_per_rank), g_(world_size * batch_per_rank),
      seed_(seed), kind_(kind) {
  RT_CHECK(n_ > 0 && p_ > 0 && k_ > 0, "schedule needs N, P, K > 0");
  std::vector<int64_t> perm = seeded_permutation(n_, seed_);
  if (kind_ == ScheduleKind::Random) {
    deal(perm);
    return;
  }
  // Sorted by length, equal lengths in seeded random order, so they spread over columns at random.
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
    return lengths[static_cast<size_t>(a)] < lengths[static_cast<size_t>(b)];
  });
  deal(perm);
  // Buckets of consecutive rows: row m holds sorted positions [m*G, m*G+G), so a bucket of rows [m0, m1) spans
  // the lengths perm[m0*G] .. perm[min(m1*G, N) - 1].
  const int64_t rows = steps_per_epoch();
  auto len_at = [&](int64_t sorted_pos) { return static_cast<double>(lengths[static_cast<size_t>(perm[static_cast<size_t>(sorted_pos)])]); };
  for (int64_t m0 = 0; m0 < rows;) {
    int64_t m1 = m0 + 1;
    const double shortest = len_at(m0 * g_);
    while (m1 < rows && len_at(std::min((m1 + 1) * g_, n_) - 1) <= (1.0 + kBucketTolerance) * shortest) ++m1;
    bucket_end_.push_back(m1);
    m0 = m1;
  }
}

void Schedule::deal(const std::vector<int64_t>& perm) {
  // Round-robin: perm[c + G*m] goes to column c, row m; stored column-major.
  dealt_.resize(perm.size());
  for (int64_t c = 0; c < g_; ++c) {
    const int64_t b = col_begin(c);
    for (int64_t m = 0; m < col_size(c); ++m) dealt_[static_cast<size_t>(b + m)] = perm[static_cast<size_t>(c + g_ * m)];
  }
}

int64_t Schedule::col_size(int64_t c) const { return n_ / g_ + (c < n_ % g_ ? 1 : 0); }

int64_t Schedule::col_begin(int64_t c) const { return c * (n_ / g_) + std::min(c, n_ % g_); }

std::vector<int64_t> Schedule::rank_sequences(int64_t rank) const {
  RT_CHECK(rank >= 0 && rank < p_, "rank out of range");
  const int64_t c0 = rank * k_, c1 = c0 + k_;
  return std::vector<int64_t>(dealt_.begin() + col_begin(c0), dealt_.begin() + col_begin(c1));
}

Schedule::Epoch Schedule::epoch(int64_t e) const {
  Epoch ep;
  ep.s_ = this;
  ep.order_ = dealt_;
  if (kind_ == ScheduleKind::Random) {
    for (int64_t c = 0; c < g_; ++c) {
      Rng rng = epoch_rng(seed_, e, kEpochStream + static_cast<uint64_t>(c) * 0x10001);
      auto first = ep.order_.begin() + col_begin(c);
      std::vector<int64_t> col(first, first + col_size(c));
      shuffle(col, rng);
      std::copy(col.begin(), col.end(), first);
    }
    return ep;
  }
  // Balanced: one row order shared by all columns (full rows shuffled, the partial row kept last so that only
  // the last step is short), and a per-column shuffle inside each length bucket.
  const int64_t full = n_ / g_, rows = steps_per_epoch();
  std::vector<int64_t> row_order(static_cast<size_t>(rows));
  std::iota(row_order.begin(), row_order.end(), 0);
  Rng row_rng = epoch_rng(seed_, e, kRowStream);
  std::vector<int64_t> full_rows(row_order.begin(), row_order.begin() + full);
  shuffle(full_rows, row_rng);
  std::copy(full_rows.begin(), full_rows.end(), row_order.begin());
  std::vector<int64_t> col;
  for (int64_t c = 0; c < g_; ++c) {
    Rng rng = epoch_rng(seed_, e, kEpochStream + static_cast<uint64_t>(c) * 0x10001);
    const auto first = dealt_.begin() + col_begin(c);
    col.assign(first, first + col_size(c));
    int64_t m0 = 0;
    for (int64_t m1 : bucket_end_) {
      const int64_t end = std::min(m1, col_size(c));
      if (end - m0 > 1) {
        std::vector<int64_t> part(col.begin() + m0, col.begin() + end);
        shuffle(part, rng);
        std::copy(part.begin(), part.end(), col.begin() + m0);
      }
      m0 = m1;
    }
    for (int64_t s = 0; s < col_size(c); ++s)
      ep.order_[static_cast<size_t>(col_begin(c) + s)] = col[static_cast<size_t>(row_order[static_cast<size_t>(s)])];
  }
  return ep;
}

int64_t Schedule::Epoch::at(int64_t step, int64_t column) const {
  if (step < 0 || step >= s_->col_size(column)) return -1;
  return order_[static_cast<size_t>(s_->col_begin(column) + step)];
}

std::vector<int64_t> Schedule::Epoch::rank_batch(int64_t step, int64_t rank) const {
  std::vector<int64_t> out(static_cast<size_t>(s_->k_));
  for (int64_t j = 0; j < s_->k_; ++j) out[static_cast<size_t>(j)] = at(step, rank * s_->k_ + j);
  return out;
}

std::vector<int64_t> Schedule::Epoch::global_batch(int64_t step) const {
  std::vector<int64_t> out(static_cast<size_t>(s_->g_));
  for (int64_t c = 0; c < s_->g_; ++c) out[static_cast<size_t>(c)] = at(step, c);
  return out;
}

double step_imbalance(const Schedule::Epoch& epoch, int64_t step, const Schedule& s, const std::vector<int64_t>& lengths) {
  double sum = 0, most = 0;
  for (int64_t r = 0; r < s.world_size(); ++r) {
    double t = 0;
    for (int64_t j = 0; j < s.batch_per_rank(); ++j) {
      const int64_t i = epoch.at(step, r * s.batch_per_rank() + j);
      if (i >= 0) t += static_cast<double>(lengths[static_cast<size_t>(i)]);
    }
    sum += t;
    most = std::max(most, t);
  }
  return most > 0 ? 1.0 - sum / static_cast<double>(s.world_size()) / most : 0.0;
}

double mean_imbalance(const Schedule& s, const std::vector<int64_t>& lengths, int64_t epochs) {
  double total = 0;
  int64_t steps = 0;
  for (int64_t e = 0; e < epochs; ++e) {
    const Schedule::Epoch ep = s.epoch(e);
    for (int64_t step = 0; step < s.steps_per_epoch(); ++step, ++steps) total += step_imbalance(ep, step, s, lengths);
  }
  return steps > 0 ? total / static_cast<double>(steps) : 0.0;
}

Range block_range(int64_t n, int64_t size, int64_t rank) {
  const int64_t base = n / size, extra = n % size;
  const int64_t begin = rank * base + std::min(rank, extra);
  return Range{begin, begin + base + (rank < extra ? 1 : 0)};
}

std::vector<int64_t> block_indices(int64_t n, int64_t size, int64_t rank) {
  const Range r = block_range(n, size, rank);
  std::vector<int64_t> idx(static_cast<size_t>(r.end - r.begin));
  std::iota(idx.begin(), idx.end(), r.begin);
  return idx;
}

}  // namespace ragtrain
