// Work split into numbered blocks and run on a few threads: the reader's copies and checks, and the statistics
// and scaling of a shard. A block's result may not depend on which thread ran it, so the results do not depend
// on the thread count.
#pragma once

#include <cstdint>
#include <functional>

namespace ragtrain {

// Calls body(b) for b in [0, blocks) on `threads` threads (the caller's among them), each block once; blocks are
// handed out in order. An exception from a body is rethrown after every thread has joined (the earliest block's,
// as a loop over the blocks in order would have thrown).
void parallel_blocks(int64_t blocks, int threads, const std::function<void(int64_t)>& body);

}  // namespace ragtrain
