// The column schedules (random and length-balanced), their imbalance, and block partitions.
#include "ragtrain/schedule/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/rng.hpp"

namespace ragtrain {

namespace {
constexpr uint64_t kDealStream = 0xD3A1;
constexpr uint64_t kEpochStream = 0xE90C;
constexpr uint64_t kRowStream = 0x7A0B;
constexpr uint64_t kLastStream = 0x1A57;

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

// position[c]: where column c takes its sequence from in a spread row. Columns c >= first take positions
// first .. G-1 in the order of frac(c * phi): any K consecutive columns (for every K, at any offset) then sample
// the row's sorted lengths with low discrepancy, which is what makes the rule independent of the P x K split.
// The mixing columns (c < first) keep position c: their jitter carries a sequence across many rows, and it
// stays at the same place within every row only if its column has the same position in all of them.
std::vector<int64_t> golden_positions(int64_t g, int64_t first) {
  const double phi = 0.5 * (std::sqrt(5.0) - 1.0);
  std::vector<double> frac(static_cast<size_t>(g));
  for (int64_t c = 0; c < g; ++c) {
    const double x = static_cast<double>(c) * phi;
    frac[static_cast<size_t>(c)] = x - std::floor(x);
  }
  std::vector<int64_t> by_frac(static_cast<size_t>(g - first)), position(static_cast<size_t>(g));
  std::iota(position.begin(), position.begin() + first, 0);
  std::iota(by_frac.begin(), by_frac.end(), first);
  std::stable_sort(by_frac.begin(), by_frac.end(),
                   [&](int64_t a, int64_t b) { return frac[static_cast<size_t>(a)] < frac[static_cast<size_t>(b)]; });
  for (int64_t i = 0; i < g - first; ++i) position[static_cast<size_t>(by_frac[static_cast<size_t>(i)])] = first + i;
  return position;
}

// The full rows to deal in golden-ratio order. A spread row's K lengths on a rank span the row, so it adds
// about G * longest - sum of the row's lengths padded timesteps; what it removes is the row's imbalance, which at
// K > 1 is most of its spread 1 - mean/longest. The widest rows go first, each taken if its padding still fits
// in budget * all timesteps of the full rows (the padding bound is on timesteps, so a long row costs more).
std::vector<char> spread_rows(const std::vector<int64_t>& lengths, const std::vector<int64_t>& sorted, int64_t g,
                              double budget) {
  const int64_t rows = static_cast<int64_t>(sorted.size()) / g;
  std::vector<double> spread(static_cast<size_t>(rows)), waste(static_cast<size_t>(rows));
  double total = 0;
  for (int64_t m = 0; m < rows; ++m) {
    double sum = 0;
    for (int64_t c = 0; c < g; ++c) sum += static_cast<double>(lengths[static_cast<size_t>(sorted[static_cast<size_t>(m * g + c)])]);
    const double longest = static_cast<double>(lengths[static_cast<size_t>(sorted[static_cast<size_t>(m * g + g - 1)])]);
    spread[static_cast<size_t>(m)] = longest > 0 ? 1.0 - sum / static_cast<double>(g) / longest : 0.0;
    waste[static_cast<size_t>(m)] = static_cast<double>(g) * longest - sum;
    total += sum;
  }
  std::vector<int64_t> widest(static_cast<size_t>(rows));
  std::iota(widest.begin(), widest.end(), 0);
  std::stable_sort(widest.begin(), widest.end(),
                   [&](int64_t a, int64_t b) { return spread[static_cast<size_t>(a)] > spread[static_cast<size_t>(b)]; });
  std::vector<char> chosen(static_cast<size_t>(rows), 0);
  double used = 0;
  for (int64_t m : widest) {
    if (spread[static_cast<size_t>(m)] <= 0) break;
    if (used + waste[static_cast<size_t>(m)] > budget * total) continue;
    used += waste[static_cast<size_t>(m)];
    chosen[static_cast<size_t>(m)] = 1;
  }
  return chosen;
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
  deal(perm, g_ > 1 ? spread_rows(lengths, perm, g_, kWideBudget) : std::vector<char>{});
  // Row m of every column holds sorted positions [m*G, m*G+G) (the partial row: the longest N mod G). The
  // jitter window of row m: the rows whose shortest length is within kLengthTolerance of row m's (so
  // equal lengths always mix freely); mixing_columns() columns also get at least mixing_window() rows.
  const int64_t rows = steps_per_epoch();
  window_.resize(static_cast<size_t>(rows));
  auto row_len = [&](int64_t m) { return lengths[static_cast<size_t>(perm[static_cast<size_t>(m * g_)])]; };
  int64_t hi = 0;
  for (int64_t m = 0; m < rows; ++m) {
    hi = std::max(hi, m + 1);
    const double limit = (1.0 + kLengthTolerance) * static_cast<double>(row_len(m));
    while (hi < rows && static_cast<double>(row_len(hi)) <= limit) ++hi;
    window_[static_cast<size_t>(m)] = static_cast<double>(hi - m);
  }
}

int64_t Schedule::mixing_columns() const { return std::min<int64_t>(g_ - 1, kMixingColumns); }

double Schedule::mixing_window(int64_t columns) {
  if (columns < 1) return 1.0;
  // c(W): the chance that a column puts the same sequence at a row position in two epochs, for the jittered
  // sort of epoch() with window W over rows of distinct lengths. W <= 2 only swaps neighbours, each pair with
  // probability p = (1 - 1/W)^2 / 2, so c = (1-2p)^2 + 2p^2; a wider window spreads a sequence over about
  // W - 0.32 rows (fitted to meet the first form at W = 2). A global batch repeats when all mixing columns
  // agree with the others: about c^columns, which the smallest such W keeps at kRepeatTarget.
  auto agree = [](double w) {
    if (w <= 2.0) {
      const double p = (1.0 - 1.0 / w) * (1.0 - 1.0 / w) / 2.0;
      return (1.0 - 2.0 * p) * (1.0 - 2.0 * p) + 2.0 * p * p;
    }
    return 1.0 / (w - 0.32);
  };
  const double target = std::pow(kRepeatTarget, 1.0 / static_cast<double>(columns));
  double lo = 1.0, hi = 1e9;
  for (int i = 0; i < 200 && hi - lo > 1e-9 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (agree(mid) > target ? lo : hi) = mid;
  }
  return hi;
}

void Schedule::deal(const std::vector<int64_t>& perm, const std::vector<char>& spread) {
  // Round-robin: perm[c + G*m] goes to column c, row m (perm[position[c] + G*m] in a spread row); stored
  // column-major. The partial last row is never spread: its columns are the first N mod G.
  const std::vector<int64_t> position = spread.empty() ? std::vector<int64_t>{} : golden_positions(g_, mixing_columns());
  dealt_.resize(perm.size());
  for (int64_t c = 0; c < g_; ++c) {
    const int64_t b = col_begin(c);
    for (int64_t m = 0; m < col_size(c); ++m) {
      const bool spread_row = m < static_cast<int64_t>(spread.size()) && spread[static_cast<size_t>(m)];
      const int64_t at = spread_row ? position[static_cast<size_t>(c)] : c;
      dealt_[static_cast<size_t>(b + m)] = perm[static_cast<size_t>(at + g_ * m)];
    }
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
  // Balanced: every column jitters its own order within its rows' windows (a sort by m + window * U[0,1)), so
  // the sequences that meet at a row position change every epoch while staying of nearly equal length; one
  // shared shuffle of the full rows orders the steps.
  const int64_t full = n_ / g_;
  std::vector<int64_t> row_order(static_cast<size_t>(full));
  std::iota(row_order.begin(), row_order.end(), 0);
  Rng row_rng = epoch_rng(seed_, e, kRowStream);
  shuffle(row_order, row_rng);
  // The short last step: the sequences at one random row (0 .. N/G, after the jitter) of the columns c < N mod G,
  // so every one of their sequences lands in it with about the same chance, 1 / (N/G + 1), as with the random
  // schedule. One row shared by those columns keeps every other row a run of about G consecutive lengths (the
  // columns' later sequences all move down one row), where a row drawn per column would mix two blocks in
  // many rows and pad every step.
  Rng last_rng = epoch_rng(seed_, e, kLastStream);
  const int64_t last_row = static_cast<int64_t>(last_rng.below(static_cast<uint64_t>(full + 1)));
  std::vector<int64_t> col, rank;
  std::vector<double> key;
  const int64_t mixing = mixing_columns();
  const double mixing_rows = mixing_window(mixing);
  for (int64_t c = 0; c < g_; ++c) {
    Rng rng = epoch_rng(seed_, e, kEpochStream + static_cast<uint64_t>(c) * 0x10001);
    const int64_t size = col_size(c);   // full, or full + 1 for c < N mod G
    key.resize(static_cast<size_t>(size));
    for (int64_t m = 0; m < size; ++m) {
      const double w = c < mixing ? std::max(window_[static_cast<size_t>(m)], mixing_rows) : window_[static_cast<size_t>(m)];
      key[static_cast<size_t>(m)] = static_cast<double>(m) + w * rng.uniform();
    }
    rank.resize(static_cast<size_t>(size));
    std::iota(rank.begin(), rank.end(), 0);
    std::stable_sort(rank.begin(), rank.end(),
                     [&](int64_t a, int64_t b) { return key[static_cast<size_t>(a)] < key[static_cast<size_t>(b)]; });
    col.resize(static_cast<size_t>(size));
    for (int64_t m = 0; m < size; ++m)
      col[static_cast<size_t>(m)] = dealt_[static_cast<size_t>(col_begin(c) + rank[static_cast<size_t>(m)])];
    if (size > full) {
      ep.order_[static_cast<size_t>(col_begin(c) + full)] = col[static_cast<size_t>(last_row)];
      col.erase(col.begin() + last_row);
    }
    for (int64_t s = 0; s < full; ++s)
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
