// Counters, gathering and JSON output.
#include "ragtrain/metrics/metrics.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ragtrain/comm/watchdog.hpp"
#include "ragtrain/core/error.hpp"

namespace ragtrain {

RankCounters& RankCounters::operator+=(const RankCounters& o) {
  compute_s += o.compute_s;
  comm_s += o.comm_s;
  io_s += o.io_s;
  sequences += o.sequences;
  timesteps += o.timesteps;
  return *this;
}

std::vector<RankCounters> gather_counters(const Context& ctx, const RankCounters& mine) {
  static_assert(sizeof(RankCounters) == 5 * sizeof(double), "RankCounters must be 5 packed doubles");
  std::vector<RankCounters> all(ctx.is_root() ? static_cast<size_t>(ctx.size) : 0);
  watched_gather(ctx, &mine, 5, MPI_DOUBLE, all.data(), 0, "the gathering of the step counters");
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

void JsonlWriter::open(const std::string& path, bool append) {
  path_ = path;
  out_.open(path, std::ios::out | (append ? std::ios::app : std::ios::trunc));
  USER_CHECK(out_.good(), "cannot " << (append ? "append to" : "create") << " '" << path << "': " << std::strerror(errno),
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
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::out | std::ios::trunc);
    USER_CHECK(out.good(), "cannot create '" << tmp << "': " << std::strerror(errno), "choose a writable --out folder");
    out << kept;
    out.flush();
    USER_CHECK(out.good(), "writing '" << tmp << "' failed (disk full?)", "free space in the output folder");
  }
  commit_file(tmp, path);
  return dropped;
}

void JsonlWriter::write(const Json& record) {
  out_ << record.dump() << '\n';
  out_.flush();
}

void commit_file(const std::string& tmp, const std::string& path) {
  const int fd = ::open(tmp.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw UserError("cannot write '" + path + "': " + why, "check that the output folder is writable");
  }
}

void write_json_atomic(const std::string& path, const Json& value) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::out | std::ios::trunc);
    USER_CHECK(out.good(), "cannot create '" << tmp << "': " << std::strerror(errno),
               "check that the output folder is writable");
    out << value.dump(2) << '\n';
    out.flush();
    if (!out.good()) {
      std::remove(tmp.c_str());
      throw UserError("writing '" + tmp + "' failed (disk full?)", "free space in the output folder");
    }
  }
  commit_file(tmp, path);
}

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
