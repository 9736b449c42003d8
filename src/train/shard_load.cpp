// ShardLoad: the resident training shard read, checked and measured on a background thread.
#include "ragtrain/train/shard_load.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

namespace {

// The load runs on as many threads as the rank has cores, beside the main thread's set-up (CUDA context, cuDNN,
// the start-up measurements) and the first window's read: the path to the first step. At the same priority they
// compete for the cores: the first step came 0.5-0.6 s later at 8.2 GB than at 1.4 GB on one 16-core H100 machine,
// about as long as the load itself took. A lower priority (nice + 10) for this thread and the threads it starts,
// which inherit it, leaves the set-up its core and the load every cycle the set-up does not use.
constexpr int kLoadNice = 10;

void lower_this_thread_priority() {
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));   // Linux: a thread's nice value is its own
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (errno == 0) (void)setpriority(PRIO_PROCESS, tid, std::min(19, now + kLoadNice));   // advice: may be refused
}

}  // namespace

ShardLoad::ShardLoad(const DatasetInfo& info, const DirectSource& source, std::vector<int64_t> indices, int threads,
                     ShardLoadPlan plan, Timeline* timeline) {
  // `info` and `source` are copied into the thread: the caller's may change (a window set up, a resume) while
  // it runs. The thread touches result_ and error_ only; take() reads them after join().
  thread_ = std::thread([this, info, source, indices = std::move(indices), threads, plan, timeline] {
    lower_this_thread_priority();
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
