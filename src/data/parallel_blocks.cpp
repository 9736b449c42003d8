// parallel_blocks: an atomic counter hands out block numbers to std::threads.
#include "ragtrain/data/parallel_blocks.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ragtrain {

void parallel_blocks(int64_t blocks, int threads, const std::function<void(int64_t)>& body) {
  std::atomic<int64_t> next{0};
  std::mutex mu;
  int64_t failed_block = blocks;
  std::exception_ptr failure;
  auto work = [&] {
    for (int64_t b = next++; b < blocks; b = next++) {
      try {
        body(b);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (b < failed_block) {
          failed_block = b;
          failure = std::current_exception();
        }
      }
    }
  };
  const int n = static_cast<int>(std::clamp<int64_t>(blocks, 1, std::max(1, threads)));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace ragtrain
