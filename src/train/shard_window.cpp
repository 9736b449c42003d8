// ShardWindow: the schedule's next steps' sequences read on a background thread with pread.
#include "ragtrain/train/shard_window.hpp"

#include <algorithm>
#include <utility>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

std::vector<int64_t> window_sequences(const Schedule& schedule, int64_t rank, int64_t begin, int64_t end,
                                      Schedule::Epoch& cache, int64_t& cache_epoch) {
  const int64_t spe = schedule.steps_per_epoch();
  std::vector<int64_t> seqs;
  for (int64_t s = begin; s < end; ++s) {
    if (s / spe != cache_epoch) {
      cache = schedule.epoch(s / spe);
      cache_epoch = s / spe;
    }
    for (int64_t g : cache.rank_batch(s % spe, rank))
      if (g >= 0) seqs.push_back(g);
  }
  std::sort(seqs.begin(), seqs.end());   // file order: neighbours in the file are read as one request
  seqs.erase(std::unique(seqs.begin(), seqs.end()), seqs.end());
  return seqs;
}

Shard copy_sequences(const Shard& from, const std::vector<int64_t>& seqs, int threads) {
  std::vector<int64_t> at;
  Shard w = window_index(from, seqs, at);
  const WindowFeatures rows(w, from, std::move(at));
  w.features.resize(rows.size());
  rows.copy(w.features.data(), 0, rows.size(), threads);
  return w;
}

ShardWindow::ShardWindow(const DatasetInfo& info, const DirectSource& source, const Schedule& schedule, int64_t rank,
                         int64_t steps, int64_t first_step, int64_t total_steps, const Normalizer& normalizer,
                         int threads, Timeline* timeline, int64_t measure_until, const Shard* resident,
                         Backend* device)
    : info_(info),
      source_(source),
      schedule_(schedule),
      rank_(rank),
      steps_(steps),
      total_steps_(total_steps),
      normalizer_(normalizer),
      threads_(threads),
      timeline_(timeline),
      resident_(resident),
      device_(device),
      measure_until_(measure_until) {
  RT_CHECK(steps_ >= 1, "a window of " << steps_ << " steps");
  measured_.mean.assign(static_cast<size_t>(info_.num_features), 0.0);
  measured_.m2.assign(static_cast<size_t>(info_.num_features), 0.0);
  start_read(first_step);
  advance(first_step);
}

ShardWindow::~ShardWindow() { join(); }

void ShardWindow::join() {
  if (reader_.joinable()) reader_.join();
}

void ShardWindow::start_read(int64_t begin) {
  next_begin_ = begin;
  if (begin >= total_steps_) return;   // past the last step: nothing to read
  const int64_t end = std::min(total_steps_, begin + steps_);
  std::vector<int64_t> seqs = window_sequences(schedule_, rank_, begin, end, cache_, cache_epoch_);
  std::vector<int64_t> measure;   // sorted: a subset of seqs
  if (begin < measure_until_)
    measure = window_sequences(schedule_, rank_, begin, std::min(end, measure_until_), cache_, cache_epoch_);
  next_error_ = nullptr;
  next_stats_ = ShardReadStats{};
  next_moments_ = FeatureMoments{};
  // The thread touches only next_, next_error_ and next_stats_ (and reads info_, source_, normalizer_, which stay
  // fixed); the loop reads them only after join(). Its span goes to the timeline's locked side track.
  const int slot = static_cast<int>(windows_read_++ % 2);
  reader_ = std::thread([this, begin, slot, seqs = std::move(seqs), measure = std::move(measure)] {
    SideSpan span(timeline_, Phase::WindowRead, begin + 1);
    try {
      if (resident_ && device_) {   // the rows go straight from the resident shard into the device's staging
        std::vector<int64_t> at;
        next_ = window_index(*resident_, seqs, at);
        device_->stage_window(next_, WindowFeatures(next_, *resident_, std::move(at)), slot);
      } else if (resident_) {
        next_ = copy_sequences(*resident_, seqs, threads_);
      } else {
        next_ = read_shard_direct(info_, source_, seqs, threads_, &next_stats_);
        for (int64_t g : measure) {   // next_ holds seqs in order
          const auto p = std::lower_bound(next_.indices.begin(), next_.indices.end(), g) - next_.indices.begin();
          next_moments_.merge(FeatureMoments::of_rows(next_.x(p), next_.length(p), next_.num_features));
        }
        normalizer_.apply(next_, threads_);
      }
      if (device_ && !resident_) {
        device_->stage_window(next_, WindowFeatures(next_), slot);
        next_.features = BulkVector<float>();   // on the device now; the host keeps what the index needs
      }
    } catch (...) {
      next_error_ = std::current_exception();
    }
  });
}

void ShardWindow::advance(int64_t step) {
  RT_CHECK(step == next_begin_, "window for step " << step << " requested, step " << next_begin_ << " is being read");
  join();
  if (next_error_) std::rethrow_exception(next_error_);
  current_ = std::move(next_);
  next_ = Shard{};
  begin_ = step;
  end_ = std::min(total_steps_, step + steps_);
  stats_.add(next_stats_);
  stats_.direct = true;
  stats_.threads = threads_;
  measured_.merge(next_moments_);
  if (device_) device_->use_window(current_, static_cast<int>((windows_read_ - 1) % 2));
  start_read(end_);
}

void ShardWindow::read_from(const Shard* resident) {
  join();
  stats_.add(next_stats_);
  next_stats_ = ShardReadStats{};
  resident_ = resident;
}

}  // namespace ragtrain
