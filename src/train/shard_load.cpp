// ShardLoad: the resident training shard read, checked and measured on a background thread.
#include "ragtrain/train/shard_load.hpp"

#include <chrono>
#include <thread>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

ShardLoad::ShardLoad(const DatasetInfo& info, const DirectSource& source, std::vector<int64_t> indices, int threads,
                     ShardLoadPlan plan, Timeline* timeline) {
  // `info` and `source` are copied into the thread: the caller's may change (a window set up, a resume) while
  // it runs. The thread touches result_ and error_ only; take() reads them after join().
  thread_ = std::thread([this, info, source, indices = std::move(indices), threads, plan, timeline] {
    SideSpan span(timeline, Phase::ShardLoad, 0);
    if (plan.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(plan.delay_ms));
    try {
      result_.shard = read_shard_direct(info, source, indices, threads, &result_.stats);
      if (plan.moments) result_.moments = FeatureMoments::of(result_.shard, threads);
      if (plan.apply) plan.apply->apply(result_.shard, threads);
    } catch (...) {
      error_ = std::current_exception();
    }
    done_.store(true, std::memory_order_release);
  });
}

ShardLoad::~ShardLoad() {
  if (thread_.joinable()) thread_.join();
}

ShardLoad::Result ShardLoad::take() {
  RT_CHECK(thread_.joinable(), "ShardLoad::take called twice");
  const auto t0 = std::chrono::steady_clock::now();
  thread_.join();
  if (error_) std::rethrow_exception(error_);
  result_.wait_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::move(result_);
}

}  // namespace ragtrain
