// Counters, gathering and JSON output.
#include "ragtrain/metrics/metrics.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ragtrain/comm/watchdog.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/output_file.hpp"

namespace ragtrain {

RankCounters& RankCounters::operator+=(const RankCounters& o) {
  compute_s += o.compute_s;
  comm_s += o.comm_s;
  io_s += o.io_s;
  sequences += o.sequences;
  timesteps += o.timesteps;
  io_wait_s += o.io_wait_s;
  return *this;
}

int64_t peak_rss_bytes() {
  struct rusage u {};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<int64_t>(u.ru_maxrss) * 1024;   // Linux reports kilobytes
}

std::vector<RankCounters> gather_counters(const Context& ctx, const RankCounters& mine) {
  static_assert(sizeof(RankCounters) == 6 * sizeof(double), "RankCounters must be 6 packed doubles");
  std::vector<RankCounters> all(ctx.is_root() ? static_cast<size_t>(ctx.size) : 0);
  watched_gather(ctx, &mine, 6, MPI_DOUBLE, all.data(), 0, "the gathering of the step counters");
  return all;
}

namespace {
Json min_median_max(std::vector<double> v) {
  if (v.empty()) return Json();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return Json{{"min", v.front()}, {"median", median}, {"max", v.back()}};
}
}  // namespace

Json spread(const std::vector<RankCounters>& all, double RankCounters::*field) {
  std::vector<double> v;
  for (const auto& r : all) v.push_back(r.*field);
  return min_median_max(std::move(v));
}

double wait_fraction(const RankCounters& r) {
  const double busy = r.compute_s + r.comm_s;
  return busy > 0 ? r.comm_s / busy : 0.0;
}

Json spread_fraction(const std::vector<RankCounters>& all) {
  std::vector<double> v;
  for (const auto& r : all) v.push_back(wait_fraction(r));
  return min_median_max(std::move(v));
}

LineFile::~LineFile() { close(); }

void LineFile::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void LineFile::open(const std::string& path, bool append) {
  close();
  path_ = path;
  // O_APPEND: every write() lands at the end of the file as one piece, even with another writer on it.
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (append ? 0 : O_TRUNC), 0644);
  USER_CHECK(fd_ >= 0, "cannot " << (append ? "append to" : "create") << " '" << path << "': " << std::strerror(errno),
             "choose a writable --out folder");
}

int64_t keep_records_through_step(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return 0;
  std::string kept, line;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const Json rec = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (rec.is_object() && rec.contains("step") && rec["step"].is_number_integer() && rec["step"].get<int64_t>() <= step)
      kept += line + '\n';
    else
      ++dropped;
  }
  in.close();
  write_text_atomic(path, kept);
  return dropped;
}

void LineFile::write_line(const std::string& line) {
  // One write() per line, the newline included: a reader (or a second writer) never sees half a line, and a
  // kill leaves whole lines only. A short write (a full disk) is finished by the loop or reported.
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (!warned_)
        std::fprintf(stderr, "ragtrain: warning: cannot append to '%s': %s; records are being lost\n", path_.c_str(),
                     std::strerror(n < 0 ? errno : ENOSPC));
      warned_ = true;
      return;
    }
    done += static_cast<size_t>(n);
  }
}

void commit_file(const std::string& tmp, const std::string& path) { commit_temp_file(tmp, path); }

void write_json_atomic(const std::string& path, const Json& value) { write_text_atomic(path, value.dump(2) + '\n'); }

void ensure_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  USER_CHECK(!ec && std::filesystem::is_directory(dir),
             "cannot create output folder '" << dir << "'" << (ec ? ": " + ec.message() : std::string()),
             "choose a writable --out location");
  USER_CHECK(::access(dir.c_str(), W_OK) == 0, "output folder '" << dir << "' is not writable",
             "choose a writable --out location or fix its permissions");
}

}  // namespace ragtrain
