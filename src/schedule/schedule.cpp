// The column schedule: fixed sequence-to-column deal, per-epoch shuffle within each column.
#include "ragtrain/schedule/schedule.hpp"

#include <numeric>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/rng.hpp"

namespace ragtrain {

namespace {
constexpr uint64_t kDealStream = 0xD3A1;
constexpr uint64_t kEpochStream = 0xE90C;
}  // namespace

Schedule::Schedule(int64_t num_sequences, int64_t world_size, int64_t batch_per_rank, uint64_t seed)
    : n_(num_sequences), p_(world_size), k_(batch_per_rank), g_(world_size * batch_per_rank), seed_(seed) {
  RT_CHECK(n_ > 0 && p_ > 0 && k_ > 0, "schedule needs N, P, K > 0");
  std::vector<int64_t> perm(static_cast<size_t>(n_));
  std::iota(perm.begin(), perm.end(), 0);
  Rng rng(seed_, kDealStream);
  shuffle(perm, rng);
  // Deal round-robin: perm[c + G*m] goes to column c, stored column-major.
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
  for (int64_t c = 0; c < g_; ++c) {
    Rng rng(seed_ ^ mix64(static_cast<uint64_t>(e)), kEpochStream + static_cast<uint64_t>(c) * 0x10001);
    auto first = ep.order_.begin() + col_begin(c);
    std::vector<int64_t> col(first, first + col_size(c));
    shuffle(col, rng);
    std::copy(col.begin(), col.end(), first);
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

}  // namespace ragtrain

namespace ragtrain {

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
