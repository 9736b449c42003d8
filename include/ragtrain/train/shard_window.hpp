// The training shard when it does not fit --max-memory: a window of the sequences of a fixed number of consecutive
// steps, the next window read ahead by a background thread (pread, no HDF5) while the loop trains on the current.
#pragma once

#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/data/normalization.hpp"
#include "ragtrain/data/shard.hpp"
#include "ragtrain/data/window_features.hpp"
#include "ragtrain/metrics/trace.hpp"
#include "ragtrain/schedule/schedule.hpp"

namespace ragtrain {

// The rank's sequences of global steps [begin, end) (0-based, across epochs), sorted and each once: a pure
// function of the schedule, so every window is known ahead. `cache` holds the last epoch's order it built.
std::vector<int64_t> window_sequences(const Schedule& schedule, int64_t rank, int64_t begin, int64_t end,
                                      Schedule::Epoch& cache, int64_t& cache_epoch);

// The rank's sequences `seqs` (sorted global indices) copied out of `from`, whose indices are sorted too (a shard
// read in file order): a window of a resident shard. Values are copied as they are (already checked and scaled).
Shard copy_sequences(const Shard& from, const std::vector<int64_t>& seqs, int threads);

class ShardWindow {
 public:
  // Windows of `steps` steps (the same on every rank, so that they change at the same step everywhere), the first
  // one beginning at `first_step` and read before this returns; the second starts reading at once. A window comes
  // from the file (`info` at `source`'s addresses, normalised with `normalizer` as it arrives) or, when `resident`
  // is not null, is copied out of that resident host shard (already normalised). With a `device` (a backend with
  // memory of its own) each window is staged to the device on the reader thread as soon as it is read, and used from
  // there when it becomes current; its features are then dropped on the host. Each read is a WindowRead span of
  // `timeline` (may be null; it must outlive the window), its step the window's first (1-based). The sequences of
  // the steps before `measure_until` (windows read from the file) have their feature moments taken as read, before
  // scaling (measured(): a run that scales with a file's stored statistics checks them against its first epoch).
  ShardWindow(const DatasetInfo& info, const DirectSource& source, const Schedule& schedule, int64_t rank,
              int64_t steps, int64_t first_step, int64_t total_steps, const Normalizer& normalizer, int threads,
              Timeline* timeline = nullptr, int64_t measure_until = 0, const Shard* resident = nullptr,
              Backend* device = nullptr);
  ~ShardWindow();   // waits for a read in flight
  ShardWindow(const ShardWindow&) = delete;
  ShardWindow& operator=(const ShardWindow&) = delete;

  bool covers(int64_t step) const { return step >= begin_ && step < end_; }
  bool on_device() const { return device_ != nullptr; }   // advance() hands each window to the device itself
  const Shard& shard() const { return current_; }
  const ShardReadStats& stats() const { return stats_; }
  // The moments of the raw features of the sequences of steps [first_step, measure_until) in the windows made
  // current so far (each sequence once per step it belongs to; in window order, so equal to a whole shard's up to
  // rounding only).
  const FeatureMoments& measured() const { return measured_; }
  // Makes the window holding `step` (the next window's first step) current: waits for its read, rethrows the
  // reader's error (a truncated or unreadable file: UserError naming it and the sequence), makes it the device's
  // current window (with a device), then starts the next read: that order lets the next read's copy reuse the
  // slot this window leaves, after the work queued on it.
  void advance(int64_t step);
  // From the next read on, windows are copied out of `resident` (the whole shard, arrived since, already scaled)
  // instead of read from the file; the read in flight is finished first and counted in stats().
  void read_from(const Shard* resident);

 private:
  void start_read(int64_t begin);   // the window at `begin` into next_, on the reader thread
  void join();

  const DatasetInfo& info_;
  DirectSource source_;
  const Schedule& schedule_;
  int64_t rank_, steps_, total_steps_;
  Normalizer normalizer_;
  int threads_;
  Timeline* timeline_;
  const Shard* resident_;
  Backend* device_;
  int64_t windows_read_ = 0;   // windows started: window k goes to device slot k % 2
  Schedule::Epoch cache_;
  int64_t cache_epoch_ = -1;
  Shard current_, next_;
  int64_t begin_ = 0, end_ = 0, next_begin_ = -1;
  std::exception_ptr next_error_;
  ShardReadStats stats_, next_stats_;
  int64_t measure_until_;
  FeatureMoments measured_, next_moments_;
  std::thread reader_;
};

}  // namespace ragtrain
