// The timeline of a run: the Trainer's phases (set-up, and per step read, compute, all-reduce wait, update, log,
// validation, checkpoint, agreement) as begin/end intervals on this rank's clock, and the spans of its background
// threads (the streamed shard's window reads) on a track of their own, kept in memory for
// `train --trace` / `bench --trace` (trace_file.hpp writes them), and in CUDA builds also as NVTX ranges of the
// "ragtrain" domain, so Nsight Systems shows the same phases above the kernels.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "ragtrain/comm/context.hpp"

namespace ragtrain {

enum class Phase : int32_t {
  SetupData,       // data headers and the schedule
  ReadShard,       // this rank's sequences read from the file (parallel HDF5), normalised
  SetupBackend,    // the backend built, its parameters set
  Read,            // a step: the schedule's slots turned into this rank's shard positions
  Compute,         // forward + backward of this rank's sequences
  AllreduceWait,   // the gradient all-reduce, including the wait for the slowest rank
  Update,          // the optimizer step
  Log,             // a --log-every record: counters gathered to rank 0, written
  Validation,      // --val scored (every rank a block), sums all-reduced
  Checkpoint,      // checkpoint.h5 / best.h5 written by rank 0, the outcome agreed
  Agree,           // the step-boundary agreement on signals and timed checkpoints
  WindowRead,      // the reader thread: a streamed shard's next window read (pread) and normalised
  ShardLoad,       // the reader thread: a resident shard read (pread), checked, its moments computed, while the
                   // main thread sets up the backend
  Count
};
const char* phase_name(Phase p);       // "compute", "allreduce_wait", ...
const char* phase_category(Phase p);   // "setup", "step" or "reader" (another thread's track)

// One interval, microseconds from the trace's origin on this rank. `step`: the 1-based global step it belongs
// to (0: set-up). Plain numbers, so every rank's list gathers as doubles.
struct TraceEvent {
  Phase phase;
  int64_t step;
  double begin_us, dur_us;
};

// At most this many intervals per rank (about 250,000 / 4 = 62,500 steps; ~8 MB of memory); the rest of a
// longer run is not recorded and the trace says where it stopped.
inline constexpr size_t kMaxTraceEvents = 250000;

class Timeline {
 public:
  // `record`: keep the intervals (--trace). NVTX ranges are emitted in CUDA builds either way: without a tool
  // attached (nsys) an NVTX call is one indirect call to an empty function.
  explicit Timeline(bool record, size_t max_events = kMaxTraceEvents);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Collective when recording: a barrier, then time zero, so the ranks' tracks line up (to the barrier's exit
  // skew: microseconds on one node, a network latency across nodes).
  void start(const Context& ctx);
  void begin(Phase p, int64_t step);
  void end();   // closes the innermost open phase

  // A span of a background thread (not nested, never on the main thread's stack): safe from any thread, under a
  // lock that the main thread's begin/end never take. side_begin returns the span's start (an NVTX range is pushed
  // on the calling thread in CUDA builds); side_end closes it. Without --trace no clock is read and nothing kept.
  using clock = std::chrono::steady_clock;
  clock::time_point side_begin(Phase p, int64_t step);
  void side_end(Phase p, int64_t step, clock::time_point t0);

  bool recording() const { return record_; }
  const std::vector<TraceEvent>& events() const { return events_; }   // the main thread's
  std::vector<TraceEvent> side_events() const;                        // a copy, taken under the lock
  bool truncated() const { return dropped() > 0; }
  int64_t dropped() const;   // intervals not recorded, both kinds
  int64_t first_dropped_step() const { return first_dropped_step_; }

 private:
  struct Open {
    Phase phase;
    int64_t step;
    clock::time_point t0;
  };
  bool record_;
  size_t max_events_;
  clock::time_point origin_;
  std::vector<Open> open_;   // nested phases (a best.h5 write inside validation's wake)
  std::vector<TraceEvent> events_;
  int64_t dropped_ = 0, first_dropped_step_ = -1;
  mutable std::mutex side_mutex_;   // guards side_events_ and side_dropped_
  std::vector<TraceEvent> side_events_;
  int64_t side_dropped_ = 0;
  void* nvtx_domain_ = nullptr;                     // nvtxDomainHandle_t (CUDA builds)
  std::vector<void*> nvtx_names_;                   // nvtxStringHandle_t per Phase
};

// One phase as a scope: begin at construction, end at destruction (also when the phase throws). `timeline` may
// be null (nothing recorded, no NVTX).
class PhaseScope {
 public:
  PhaseScope(Timeline* timeline, Phase p, int64_t step) : t_(timeline) {
    if (t_) t_->begin(p, step);
  }
  ~PhaseScope() {
    if (t_) t_->end();
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Timeline* t_;
};

// A background thread's span as a scope (also when it throws). `timeline` may be null.
class SideSpan {
 public:
  SideSpan(Timeline* timeline, Phase p, int64_t step) : t_(timeline), p_(p), step_(step) {
    if (t_) t0_ = t_->side_begin(p, step);
  }
  ~SideSpan() {
    if (t_) t_->side_end(p_, step_, t0_);
  }
  SideSpan(const SideSpan&) = delete;
  SideSpan& operator=(const SideSpan&) = delete;

 private:
  Timeline* t_;
  Phase p_;
  int64_t step_;
  Timeline::clock::time_point t0_{};
};

}  // namespace ragtrain
