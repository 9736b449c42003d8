// The CUDA backend's phase timings: events around the phases of sampled steps, read once they have completed (the
// host never waits for a step's end to time it), and the seconds per phase since the last call.
#include "cuda_backend.hpp"

#include "ragtrain/core/error_cuda.hpp"

namespace ragtrain {

namespace {

double elapsed_s(const Event& a, const Event& b) {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a.get(), b.get()));
  return 1e-3 * static_cast<double>(ms);
}

}  // namespace

void CudaBackend::begin_events(StepEvents& ev, int64_t step) {
  ev.step = step;
  ev.timed = timed(step);
  ev.end_marked = ev.timed || timed(step + 1);
  ev.harvested = !ev.timed;
  ev.allreduced = false;
}

bool CudaBackend::harvest(int64_t step) {
  if (step < timing_from_ || step < 0) return true;
  StepEvents& ev = ring_[static_cast<size_t>(step % 3)];
  if (ev.step != step || ev.harvested) return true;
  // The host no longer waits for the end of each step, so a step's last event may still be pending: try later.
  const cudaError_t q = cudaEventQuery(ev.opt_end.get());
  if (q == cudaErrorNotReady) return false;
  CUDA_CHECK(q);
  t_fb_ += elapsed_s(ev.fb_start, ev.fb_end);
  t_ar_ += elapsed_s(ev.fb_end, ev.ar_end);
  t_opt_ += elapsed_s(ev.ar_end, ev.opt_end);
  ++n_timed_;
  if (step - 1 >= timing_from_) {
    const StepEvents& prev = ring_[static_cast<size_t>((step - 1) % 3)];
    if (prev.step == step - 1 && prev.end_marked) {
      t_gap_ += elapsed_s(prev.opt_end, ev.fb_start);
      ++n_gaps_;
    }
  }
  ev.harvested = true;
  return true;
}

std::vector<std::pair<std::string, double>> CudaBackend::take_phase_seconds() {
  synchronize();
  harvest(step_ - 2);
  harvest(step_ - 1);
  // The sampled steps stand for all steps since the last call (one rank: 1 in kTimeEvery is measured).
  const double steps = static_cast<double>(step_ - timing_from_);
  const double per = n_timed_ > 0 ? steps / static_cast<double>(n_timed_) : 0.0;
  const double per_gap = n_gaps_ > 0 ? steps / static_cast<double>(n_gaps_) : 0.0;
  std::vector<std::pair<std::string, double>> out = {{"forward_backward", t_fb_ * per},
                                                     {"allreduce", t_ar_ * per},
                                                     {"optimizer", t_opt_ * per},
                                                     {"host_gap", t_gap_ * per_gap}};
  t_fb_ = t_ar_ = t_opt_ = t_gap_ = 0;
  n_timed_ = n_gaps_ = 0;
  timing_from_ = step_;
  // A step launched ahead before this call: its start event is older than the wait here, so it is not counted.
  if (ahead_) ring_[static_cast<size_t>(step_ % 3)].harvested = true;
  return out;
}

}  // namespace ragtrain
