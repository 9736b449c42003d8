// Gathers the ranks' timelines to rank 0 and writes them as one Chrome trace-event JSON file.
#include "ragtrain/metrics/trace_file.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "ragtrain/comm/watchdog.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/output_file.hpp"

namespace ragtrain {

namespace {

constexpr int kFields = 4;          // phase, step, begin_us, dur_us: one event as doubles
constexpr int kHostChars = 64;      // a host name in the gather (longer ones are cut)

// Rank 0 gets every rank's host name; the others nothing.
std::vector<std::string> gather_hosts(const Context& ctx) {
  char mine[kHostChars] = {};
  std::strncpy(mine, ctx.host.c_str(), kHostChars - 1);
  std::vector<char> all(ctx.is_root() ? static_cast<size_t>(ctx.size) * kHostChars : 0);
  watched_gather(ctx, mine, kHostChars, MPI_CHAR, all.data(), 0, "the gathering of the trace's host names");
  std::vector<std::string> hosts;
  for (int r = 0; ctx.is_root() && r < ctx.size; ++r)
    hosts.emplace_back(all.data() + static_cast<size_t>(r) * kHostChars);
  return hosts;
}

// One rank's events, flattened into doubles; rank 0 gets all of them (with counts and offsets per rank).
struct Gathered {
  std::vector<double> values;
  std::vector<int> counts, displs;
  std::vector<double> dropped;   // per rank: [intervals not recorded, first step not recorded]
};

Gathered gather_events(const Context& ctx, const Timeline& t) {
  const std::vector<TraceEvent> side = t.side_events();   // the reader thread's, copied under its lock
  std::vector<double> mine;
  mine.reserve((t.events().size() + side.size()) * kFields);
  for (const std::vector<TraceEvent>* events : {&t.events(), &side})
    for (const TraceEvent& e : *events) {
      mine.push_back(static_cast<double>(static_cast<int>(e.phase)));
      mine.push_back(static_cast<double>(e.step));
      mine.push_back(e.begin_us);
      mine.push_back(e.dur_us);
    }
  Gathered g;
  const bool root = ctx.is_root();
  const int n = static_cast<int>(mine.size());
  g.counts.assign(root ? static_cast<size_t>(ctx.size) : 0, 0);
  watched_gather(ctx, &n, 1, MPI_INT, g.counts.data(), 0, "the gathering of the trace sizes");
  const double dropped[2] = {static_cast<double>(t.dropped()), static_cast<double>(t.first_dropped_step())};
  g.dropped.assign(root ? 2 * static_cast<size_t>(ctx.size) : 0, 0);
  watched_gather(ctx, dropped, 2, MPI_DOUBLE, g.dropped.data(), 0, "the gathering of the trace sizes");
  size_t total = 0;
  for (int c : g.counts) {
    g.displs.push_back(static_cast<int>(total));
    total += static_cast<size_t>(c);
  }
  RT_CHECK(total <= static_cast<size_t>(INT32_MAX), "trace too large to gather: " << total << " values");
  g.values.resize(total);
  watched_gatherv(ctx, mine.data(), n, MPI_DOUBLE, g.values.data(), g.counts.data(), g.displs.data(), 0,
                  "the gathering of the trace");
  return g;
}

std::string json_text(const std::string& s) { return Json(s).dump(); }

// The thread track of a phase: 0 the trainer's loop, 1 its background reader.
int track_of(Phase p) { return std::strcmp(phase_category(p), "reader") == 0 ? 1 : 0; }

bool has_reader_spans(const Gathered& g, int rank) {
  const size_t at = static_cast<size_t>(g.displs[static_cast<size_t>(rank)]);
  for (size_t i = at; i < at + static_cast<size_t>(g.counts[static_cast<size_t>(rank)]); i += kFields)
    if (track_of(static_cast<Phase>(static_cast<int>(g.values[i]))) == 1) return true;
  return false;
}

}  // namespace

void write_chrome_trace(const Context& ctx, const Timeline& timeline, const std::string& path, const Json& about) {
  const std::vector<std::string> hosts = gather_hosts(ctx);
  const Gathered g = gather_events(ctx, timeline);
  if (!ctx.is_root()) return;

  Json other = about;
  other["ranks"] = ctx.size;
  other["max_events_per_rank"] = kMaxTraceEvents;
  Json truncated = Json::array();
  for (int r = 0; r < ctx.size; ++r)
    if (g.dropped[2 * static_cast<size_t>(r)] > 0)
      truncated.push_back(Json{{"rank", r},
                               {"intervals_not_recorded", static_cast<int64_t>(g.dropped[2 * static_cast<size_t>(r)])},
                               {"from_step", static_cast<int64_t>(g.dropped[2 * static_cast<size_t>(r) + 1])}});
  other["truncated"] = truncated;

  // Written by hand, not through a Json tree: a long trace holds millions of events.
  AtomicOutput out(path);
  {
    std::ofstream f(out.temp_path(), std::ios::binary | std::ios::trunc);
    USER_CHECK(f.good(), "cannot create '" << out.temp_path() << "' for --trace " << path << ": " << std::strerror(errno),
               "choose a writable location for --trace");
    f << "{\"displayTimeUnit\":\"ms\",\"otherData\":" << other.dump() << ",\n\"traceEvents\":[\n";
    // Metadata first: each rank a named process track, sorted by rank; its reader thread a track of its own
    // (tid 1) where it has spans.
    for (int r = 0; r < ctx.size; ++r) {
      const std::string name = "rank " + std::to_string(r) + " (" + hosts[static_cast<size_t>(r)] + ")";
      f << (r ? ",\n" : "") << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << r << ",\"tid\":0,\"args\":{\"name\":"
        << json_text(name) << "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << r
        << ",\"tid\":0,\"args\":{\"sort_index\":" << r << "}},\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << r
        << ",\"tid\":0,\"args\":{\"name\":\"trainer\"}}";
      if (has_reader_spans(g, r))
        f << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << r
          << ",\"tid\":1,\"args\":{\"name\":\"reader\"}}";
    }
    char buf[256];
    for (int r = 0; r < ctx.size; ++r) {
      const size_t at = static_cast<size_t>(g.displs[static_cast<size_t>(r)]);
      for (size_t i = at; i < at + static_cast<size_t>(g.counts[static_cast<size_t>(r)]); i += kFields) {
        const Phase p = static_cast<Phase>(static_cast<int>(g.values[i]));
        std::snprintf(buf, sizeof buf,
                      ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                      "\"args\":{\"step\":%lld}}",
                      phase_name(p), phase_category(p), r, track_of(p), g.values[i + 2], g.values[i + 3],
                      static_cast<long long>(g.values[i + 1]));
        f << buf;
      }
    }
    f << "\n]}\n";
    f.flush();
    USER_CHECK(f.good(), "cannot write --trace " << path << " (disk full?)", "free space or choose another location");
  }
  out.commit();
}

}  // namespace ragtrain
