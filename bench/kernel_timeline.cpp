// A kernel timeline for the GPU machine, which has ncu but no nsys: a CUDA injection library (loaded by the driver
// through CUDA_INJECTION64_PATH) that records, with CUPTI's activity API, every kernel (start, end, and when its
// launch was queued and submitted), memcpy and memset on the GPU, and with KT_API=1 every CUDA runtime call on the
// host (they slow the host), all on one clock. At process exit it writes the last $KT_KEEP records (default 20,000)
// as CSV to $KT_OUT (default kernel_timeline.<pid>.csv; an existing file is left alone):
//   kind,name,start_ns,end_ns,queued_ns,submitted_ns,correlation,stream
// bench/timeline_summary.py turns that into per-step offsets and gaps. CUPTI's concurrent-kernel records keep
// kernels concurrent (programmatic dependent launch included); compare the step time with and without it.
#include <cupti.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

struct Rec {
  char kind;   // K kernel, C memcpy, S memset, R runtime call
  std::string name;
  unsigned long long start, end, queued, submitted;
  unsigned corr, stream;
};

struct Log {
  std::mutex lock;
  std::deque<Rec> recs;
  size_t keep = 20000;
  void add(Rec r) {
    std::lock_guard<std::mutex> g(lock);
    recs.push_back(std::move(r));
    while (recs.size() > keep) recs.pop_front();
  }
};
Log& log_of() {
  static Log* l = new Log;   // never destroyed: the exit handler may run after static destructors
  return *l;
}

void CUPTIAPI buffer_requested(uint8_t** buf, size_t* size, size_t* max_records) {
  // Small: CUPTI hands a buffer back when it is full (or at a forced flush, which at exit may come too late).
  constexpr size_t kBytes = 256u << 10;
  *buf = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
  *size = kBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buf, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        log_of().add({'K', k->name ? k->name : "?", k->start, k->end, k->queued, k->submitted, k->correlationId,
                      k->streamId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        log_of().add({'C', "memcpy" + std::to_string(m->bytes), m->start, m->end, 0, 0, m->correlationId,
                      m->streamId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        log_of().add({'S', "memset" + std::to_string(m->bytes), m->start, m->end, 0, 0, m->correlationId,
                      m->streamId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
        const char* name = nullptr;
        cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name);
        log_of().add({'R', name ? name : std::to_string(a->cbid), a->start, a->end, 0, 0, a->correlationId, 0});
        break;
      }
      default:
        break;
    }
  }
  std::free(buf);
}

void write_out() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  // A child process that starts CUDA inherits the injection; it must not overwrite the parent's file (seen).
  if (log_of().recs.empty()) return;
  const char* path = std::getenv("KT_OUT");
  const std::string p = path ? path : "kernel_timeline." + std::to_string(::getpid()) + ".csv";
  // Written whole under another name, then linked in place: a killed process leaves no half file at `p`, and an
  // existing `p` is never replaced (link fails on it).
  const std::string part = p + ".part." + std::to_string(::getpid());
  FILE* f = std::fopen(part.c_str(), "wx");
  if (f == nullptr) {
    std::fprintf(stderr, "kernel_timeline: cannot create %s; nothing written\n", part.c_str());
    return;
  }
  Log& l = log_of();
  std::lock_guard<std::mutex> g(l.lock);
  std::vector<Rec> v(l.recs.begin(), l.recs.end());
  std::stable_sort(v.begin(), v.end(), [](const Rec& a, const Rec& b) { return a.start < b.start; });
  std::fprintf(f, "kind,name,start_ns,end_ns,queued_ns,submitted_ns,correlation,stream\n");
  for (const Rec& r : v)
    std::fprintf(f, "%c,%s,%llu,%llu,%llu,%llu,%u,%u\n", r.kind, r.name.c_str(), r.start, r.end, r.queued,
                 r.submitted, r.corr, r.stream);
  const bool ok = std::fclose(f) == 0;
  if (ok && ::link(part.c_str(), p.c_str()) == 0)
    std::fprintf(stderr, "kernel_timeline: %zu records to %s\n", v.size(), p.c_str());
  else
    std::fprintf(stderr, "kernel_timeline: %s exists or could not be written; nothing written\n", p.c_str());
  ::unlink(part.c_str());
}

}  // namespace

extern "C" int InitializeInjection() {
  if (const char* keep = std::getenv("KT_KEEP")) log_of().keep = std::strtoull(keep, nullptr, 10);
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) return 0;
  cuptiActivityEnableLatencyTimestamps(1);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
  // The runtime calls' records cost the host ~10 us a step (seen on the H200): only when asked for.
  const char* api = std::getenv("KT_API");
  if (api != nullptr && api[0] == '1') cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
  // Delivered while the process runs: at exit the CUDA runtime may have torn the context down before this library's
  // exit handler runs, and the records still in CUPTI's buffers with it (seen: an empty file).
  cuptiActivityFlushPeriod(50);
  if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS)
    std::fprintf(stderr, "kernel_timeline: CUPTI refused kernel records\n");
  std::atexit(write_out);
  return 1;
}
