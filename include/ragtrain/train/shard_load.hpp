// ShardLoad: a rank's resident training shard read on a background thread while the main thread sets up the
// backend (CUDA context, cuDNN's algorithm measurements, --lstm auto's probe), its values checked and its feature
// moments computed on the same thread.
#pragma once

#include <atomic>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include "ragtrain/data/normalization.hpp"
#include "ragtrain/data/shard.hpp"
#include "ragtrain/metrics/trace.hpp"

namespace ragtrain {

// What the background read asks for beside the values.
struct ShardLoadPlan {
  bool moments = false;              // FeatureMoments of the shard as read (before any scaling)
  const Normalizer* apply = nullptr; // when set (its statistics known before the read): applied on the thread
  int delay_ms = 0;                  // test hook: the thread waits this long first (a read that finishes late)
};

class ShardLoad {
 public:
  // Starts reading `indices` of `info` at the addresses `source` holds (probe_direct's). The thread makes no MPI
  // and no HDF5 call (MPI is initialised MPI_THREAD_FUNNELED and this build's HDF5 is not thread-safe), so the
  // main thread may make both meanwhile. `plan.apply` and `timeline` (may be null) must outlive the load.
  ShardLoad(const DatasetInfo& info, const DirectSource& source, std::vector<int64_t> indices, int threads,
            ShardLoadPlan plan, Timeline* timeline);
  ~ShardLoad();   // joins: an error path leaves no thread writing into freed memory
  ShardLoad(const ShardLoad&) = delete;
  ShardLoad& operator=(const ShardLoad&) = delete;

  struct Result {
    Shard shard;
    std::optional<FeatureMoments> moments;   // plan.moments only
    ShardReadStats stats;
    double wait_s = 0;                       // how long take() waited for the thread (the read not overlapped)
  };
  // Waits for the thread; rethrows what it threw (UserError for a short read or a bad value). Once only.
  Result take();
  // Whether the thread has finished (take() would not wait): the run that starts on windows asks at each switch.
  bool ready() const { return done_.load(std::memory_order_acquire); }

 private:
  Result result_;
  std::exception_ptr error_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace ragtrain
