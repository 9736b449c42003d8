// Phase intervals on this rank's steady clock, and the same phases as NVTX ranges in CUDA builds.
#include "ragtrain/metrics/trace.hpp"

#include <mpi.h>

#ifdef RAGTRAIN_WITH_CUDA
#include <nvtx3/nvToolsExt.h>   // header-only (NVTX3): loads an injection library (nsys) if one is attached
#endif

#include "ragtrain/core/error.hpp"

namespace ragtrain {

namespace {
struct PhaseInfo {
  const char* name;
  const char* category;
  uint32_t argb;   // NVTX colour: set-up grey, reading blue, compute green, waiting red, records yellow
};
constexpr PhaseInfo kPhases[] = {
    {"setup_data", "setup", 0xFF9E9E9E},  {"read_shard", "setup", 0xFF1E88E5},   {"setup_backend", "setup", 0xFF757575},
    {"read", "step", 0xFF64B5F6},         {"compute", "step", 0xFF43A047},       {"allreduce_wait", "step", 0xFFE53935},
    {"update", "step", 0xFF2E7D32},       {"log", "step", 0xFFFDD835},           {"validation", "step", 0xFF8E24AA},
    {"checkpoint", "step", 0xFFFB8C00},   {"agree", "step", 0xFFEF9A9A},         {"window_read", "reader", 0xFF0D47A1},
    {"shard_load", "reader", 0xFF1565C0},
};
static_assert(sizeof(kPhases) / sizeof(kPhases[0]) == static_cast<size_t>(Phase::Count), "one entry per Phase");
}  // namespace

const char* phase_name(Phase p) { return kPhases[static_cast<int>(p)].name; }
const char* phase_category(Phase p) { return kPhases[static_cast<int>(p)].category; }

Timeline::Timeline(bool record, size_t max_events) : record_(record), max_events_(max_events), origin_(clock::now()) {
  open_.reserve(8);
  // The whole cap at once (8 MB of address space at the default; pages are touched only as intervals come):
  // no reallocation, which would copy every interval so far, in the middle of a step.
  if (record_) events_.reserve(max_events_);
#ifdef RAGTRAIN_WITH_CUDA
  nvtxDomainHandle_t d = nvtxDomainCreateA("ragtrain");
  nvtx_domain_ = d;
  for (int i = 0; i < static_cast<int>(Phase::Count); ++i)
    nvtx_names_.push_back(nvtxDomainRegisterStringA(d, kPhases[i].name));
#endif
}

Timeline::~Timeline() {
#ifdef RAGTRAIN_WITH_CUDA
  if (nvtx_domain_) nvtxDomainDestroy(static_cast<nvtxDomainHandle_t>(nvtx_domain_));
#endif
}

void Timeline::start(const Context& ctx) {
  if (!record_) return;
  MPI_CHECK(MPI_Barrier(ctx.world));
  origin_ = clock::now();
}

namespace {
#ifdef RAGTRAIN_WITH_CUDA
void nvtx_push(void* domain, void* name, Phase p, int64_t step) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = kPhases[static_cast<int>(p)].argb;
  a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
  a.payload.llValue = step;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = static_cast<nvtxStringHandle_t>(name);
  nvtxDomainRangePushEx(static_cast<nvtxDomainHandle_t>(domain), &a);
}
#endif
}  // namespace

void Timeline::begin(Phase p, int64_t step) {
#ifdef RAGTRAIN_WITH_CUDA
  nvtx_push(nvtx_domain_, nvtx_names_[static_cast<size_t>(p)], p, step);
#endif
  if (record_) open_.push_back(Open{p, step, clock::now()});
}

void Timeline::end() {
#ifdef RAGTRAIN_WITH_CUDA
  nvtxDomainRangePop(static_cast<nvtxDomainHandle_t>(nvtx_domain_));
#endif
  if (!record_) return;
  RT_CHECK(!open_.empty(), "Timeline::end without a begin");
  const clock::time_point t1 = clock::now();
  const Open o = open_.back();
  open_.pop_back();
  if (events_.size() >= max_events_) {
    if (dropped_++ == 0) first_dropped_step_ = o.step;
    return;
  }
  const auto us = [&](clock::time_point t) { return std::chrono::duration<double, std::micro>(t - origin_).count(); };
  events_.push_back(TraceEvent{o.phase, o.step, us(o.t0), us(t1) - us(o.t0)});
}

Timeline::clock::time_point Timeline::side_begin(Phase p, int64_t step) {
#ifdef RAGTRAIN_WITH_CUDA
  nvtx_push(nvtx_domain_, nvtx_names_[static_cast<size_t>(p)], p, step);   // NVTX ranges are per thread
#else
  (void)p;
  (void)step;
#endif
  return record_ ? clock::now() : clock::time_point{};
}

void Timeline::side_end(Phase p, int64_t step, clock::time_point t0) {
#ifdef RAGTRAIN_WITH_CUDA
  nvtxDomainRangePop(static_cast<nvtxDomainHandle_t>(nvtx_domain_));
#endif
  if (!record_) return;
  const clock::time_point t1 = clock::now();
  const auto us = [&](clock::time_point t) { return std::chrono::duration<double, std::micro>(t - origin_).count(); };
  const std::lock_guard<std::mutex> lock(side_mutex_);
  if (side_events_.size() >= max_events_) {
    ++side_dropped_;
    return;
  }
  side_events_.push_back(TraceEvent{p, step, us(t0), us(t1) - us(t0)});
}

std::vector<TraceEvent> Timeline::side_events() const {
  const std::lock_guard<std::mutex> lock(side_mutex_);
  return side_events_;
}

int64_t Timeline::dropped() const {
  const std::lock_guard<std::mutex> lock(side_mutex_);
  return dropped_ + side_dropped_;
}

}  // namespace ragtrain
