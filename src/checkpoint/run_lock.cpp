// The run lock: DIR/ragtrain.lock, created atomically with link() (atomic on local file systems and on NFS, where
// O_EXCL and advisory locks have been unreliable), holding a JSON record of the holder; liveness is judged from
// that record (same host and boot: /proc/PID with its start time), never from an advisory lock.
#include "ragtrain/checkpoint/run_lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ragtrain/core/error.hpp"
#include "ragtrain/metrics/provenance.hpp"

namespace ragtrain {

namespace fs = std::filesystem;

namespace {

std::string this_host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string this_boot_id() { return read_first_line("/proc/sys/kernel/random/boot_id"); }

// Field 22 of /proc/PID/stat (clock ticks after boot at which the process started); 0 when unreadable or when
// the process is a zombie (killed, not yet reaped: it holds nothing any more). The command name (field 2) may
// hold spaces and parentheses, so counting starts after its last ')'.
uint64_t start_ticks_of(int64_t pid) {
  const std::string stat = read_first_line("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(in >> field)) return 0;
    if (i == 3 && (field == "Z" || field == "X")) return 0;
  }
  return std::strtoull(field.c_str(), nullptr, 10);
}

LockHolder me(const std::string& command) {
  LockHolder h;
  h.host = this_host();
  h.boot_id = this_boot_id();
  h.pid = ::getpid();
  h.start_ticks = start_ticks_of(h.pid);
  h.started = utc_now();
  h.command = command;
  if (const char* job = std::getenv("SLURM_JOB_ID")) {
    h.slurm_job = job;
    if (const char* restarts = std::getenv("SLURM_RESTART_COUNT")) h.slurm_job += std::string(" restart ") + restarts;
  }
  return h;
}

std::string to_text(const LockHolder& h) {
  const nlohmann::ordered_json j{{"host", h.host},       {"pid", h.pid},         {"start_ticks", h.start_ticks},
                                 {"boot_id", h.boot_id}, {"started", h.started}, {"command", h.command},
                                 {"slurm_job", h.slurm_job}};
  return j.dump() + "\n";
}

// False when the file is missing or is not a lock record.
bool read_holder(const std::string& path, LockHolder& h) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("host") || !j["host"].is_string() || !j.contains("pid") ||
      !j["pid"].is_number_integer())
    return false;
  h.host = j["host"].get<std::string>();
  h.pid = j["pid"].get<int64_t>();
  h.start_ticks = j.value("start_ticks", uint64_t{0});
  h.boot_id = j.value("boot_id", std::string());
  h.started = j.value("started", std::string());
  h.command = j.value("command", std::string());
  h.slurm_job = j.value("slurm_job", std::string());
  return true;
}

// Judges a readable lock of this host: is its process still the one that wrote it?
LockStatus judge(LockHolder h, const std::string& path) {
  LockStatus s;
  s.path = path;
  s.holder = std::move(h);
  const LockHolder& holder = s.holder;
  if (holder.host != this_host()) {
    s.state = LockState::OtherHost;
    return s;
  }
  if (!holder.boot_id.empty() && !this_boot_id().empty() && holder.boot_id != this_boot_id()) {
    s.state = LockState::Stale;
    s.reason = "this host has restarted since";
    return s;
  }
  if (holder.pid == ::getpid()) {   // a lock of this very process cannot be stale, nor taken twice
    s.state = LockState::Live;
    return s;
  }
  const uint64_t now_ticks = start_ticks_of(holder.pid);
  if (now_ticks == 0) {
    // A zombie (its /proc entry is there, its start time is not): killed, not yet reaped, holds nothing. No
    // entry at all: gone, unless /proc is missing or hides other users' processes (hidepid), so ask the kernel.
    const bool entry = fs::exists("/proc/" + std::to_string(holder.pid));
    const bool exists = !entry && (::kill(static_cast<pid_t>(holder.pid), 0) == 0 || errno == EPERM);
    s.state = exists ? LockState::Live : LockState::Stale;
    s.reason = "that process is gone";
    return s;
  }
  if (holder.start_ticks != 0 && now_ticks != holder.start_ticks) {
    s.state = LockState::Stale;
    s.reason = "that process is gone (its pid now belongs to another process)";
    return s;
  }
  s.state = LockState::Live;
  return s;
}

bool same_holder(const LockHolder& a, const LockHolder& b) {
  return a.host == b.host && a.pid == b.pid && a.start_ticks == b.start_ticks && a.started == b.started;
}

// Writes this process's record to `tmp` (complete and synced before anyone can see it under the lock's name).
void write_record(const std::string& tmp, const LockHolder& h, const std::string& dir) {
  const std::string text = to_text(h);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  USER_CHECK(fd >= 0, "cannot create the run lock in '" << dir << "': " << std::strerror(errno),
             "choose a writable --out folder");
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) std::remove(tmp.c_str());
  USER_CHECK(ok, "cannot write the run lock in '" << dir << "': " << std::strerror(err),
             "free space in the --out folder's file system");
}

// Publishes `tmp` as `path` unless `path` exists: link() fails with EEXIST atomically, also on NFS. A file
// system without hard links falls back to O_EXCL creation with the record written into it.
bool publish(const std::string& tmp, const std::string& path, const LockHolder& h) {
  if (::link(tmp.c_str(), path.c_str()) == 0) return true;
  if (errno == EEXIST) return false;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    USER_CHECK(errno == EEXIST, "cannot create the run lock '" << path << "': " << std::strerror(errno),
               "choose a writable --out folder");
    return false;
  }
  const std::string text = to_text(h);
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok) std::remove(path.c_str());
  USER_CHECK(ok, "cannot write the run lock '" << path << "'", "free space in the --out folder's file system");
  return true;
}

// Moves a stale lock out of the way, but only if it is still the one judged stale: another process may have
// taken it over in between, and its fresh lock must stay. True when the stale lock is gone.
bool remove_stale(const LockStatus& stale) {
  const std::string aside = stale.path + ".stale." + std::to_string(::getpid());
  if (std::rename(stale.path.c_str(), aside.c_str()) != 0) return errno == ENOENT;
  LockHolder moved;
  const bool ours_to_drop = read_holder(aside, moved) && same_holder(moved, stale.holder);
  if (!ours_to_drop) (void)::link(aside.c_str(), stale.path.c_str());   // put the newer lock back
  std::remove(aside.c_str());
  return ours_to_drop;
}

}  // namespace

std::string LockHolder::describe() const {
  std::string s = "pid " + std::to_string(pid) + " on host " + host;
  if (!started.empty()) s += " since " + started;
  if (!slurm_job.empty()) s += " (Slurm job " + slurm_job + ")";
  if (!command.empty()) s += ", running: " + command;
  return s;
}

LockStatus inspect_run_lock(const std::string& dir) {
  LockStatus s;
  s.path = (fs::path(dir) / kRunLockName).string();
  std::error_code ec;
  if (!fs::exists(s.path, ec)) return s;
  LockHolder h;
  if (!read_holder(s.path, h)) {
    s.state = LockState::Unreadable;
    return s;
  }
  return judge(std::move(h), s.path);
}

void refuse_if_held(const LockStatus& s, const std::string& option, const std::string& value) {
  const std::string where = option + " " + value;
  switch (s.state) {
    case LockState::Free:
    case LockState::Stale:
      return;
    case LockState::Live:
      throw UserError(where + ": the folder is in use by a running training run, " + s.holder.describe(),
                      "wait until it ends, or write to another folder; two runs in one folder would mix their "
                      "metrics and checkpoints");
    case LockState::OtherHost:
      throw UserError(where + ": the folder is held by a training run on another host, " + s.holder.describe() +
                          "; ragtrain cannot see whether a process on another host still runs",
                      "if that run has ended (squeue, or `ssh " + s.holder.host + " ps -p " +
                          std::to_string(s.holder.pid) + "`), remove " + s.path +
                          " and start again; otherwise write to another folder");
    case LockState::Unreadable:
      throw UserError(where + ": the folder has a run lock " + s.path + " that is not a ragtrain lock record",
                      "if no run uses this folder, remove " + s.path + " and start again");
  }
}

RunLock::~RunLock() { release(); }

RunLock::RunLock(RunLock&& o) noexcept
    : dir_(std::move(o.dir_)), path_(std::move(o.path_)), id_(o.id_), created_levels_(o.created_levels_) {
  o.path_.clear();
  o.created_levels_ = 0;
}

RunLock& RunLock::operator=(RunLock&& o) noexcept {
  if (this != &o) {
    release();
    dir_ = std::move(o.dir_);
    path_ = std::move(o.path_);
    id_ = o.id_;
    created_levels_ = o.created_levels_;
    o.path_.clear();
    o.created_levels_ = 0;
  }
  return *this;
}

void RunLock::release() {
  if (!path_.empty()) {
    // Only our own file: were it replaced (someone removed ours by hand and started a run), theirs stays.
    const auto now = file_id(path_);
    if (now && *now == id_) std::remove(path_.c_str());
    path_.clear();
  }
  // Only empty folders go (a run that wrote anything keeps its folder), deepest first, none above those created.
  fs::path d(dir_);
  for (; created_levels_ > 0; --created_levels_, d = d.parent_path()) {
    std::error_code ec;
    if (!fs::remove(d, ec)) break;
  }
  created_levels_ = 0;
}

RunLock RunLock::acquire(const std::string& dir, const std::string& command) {
  RunLock lock;
  lock.dir_ = dir;
  std::error_code ec;
  const bool existed = fs::exists(dir, ec);
  USER_CHECK(!existed || fs::is_directory(dir, ec), "--out " << dir << " exists and is not a folder",
             "train writes a folder (metrics.jsonl, summary.json, checkpoints): choose a new --out path");
  if (!existed) {
    for (fs::path d = fs::absolute(dir, ec).lexically_normal(); !d.empty() && !fs::exists(d, ec); d = d.parent_path())
      ++lock.created_levels_;
    fs::create_directories(dir, ec);
    USER_CHECK(!ec && fs::is_directory(dir),
               "cannot create output folder '" << dir << "'" << (ec ? ": " + ec.message() : std::string()),
               "choose a writable --out location");
  }
  const std::string path = (fs::path(dir) / kRunLockName).string();
  const std::string tmp = temp_name_for(path);
  const LockHolder mine = me(command);
  write_record(tmp, mine, dir);
  struct RemoveTmp {
    const std::string& p;
    ~RemoveTmp() { std::remove(p.c_str()); }
  } remove_tmp{tmp};
  // A few rounds: a stale lock removed here may be replaced by another starter's before our link.
  for (int round = 0; round < 4; ++round) {
    if (publish(tmp, path, mine)) {
      const auto id = file_id(path);
      RT_CHECK(id.has_value(), "the run lock " << path << " vanished right after its creation");
      lock.path_ = path;
      lock.id_ = *id;
      return lock;
    }
    const LockStatus s = inspect_run_lock(dir);
    if (s.state == LockState::Free) continue;   // the holder released it just now
    refuse_if_held(s, "--out", dir);
    if (remove_stale(s))
      std::fprintf(stderr, "ragtrain: notice: took over the run lock %s left by %s: %s\n", s.path.c_str(),
                   s.holder.describe().c_str(), s.reason.c_str());
  }
  throw UserError("--out " + dir + ": could not take the run lock " + path + ": other runs keep starting in it",
                  "start one run per folder");
}

RunLock RunLock::acquire(const Context& ctx, const std::string& dir, const std::string& command) {
  RunLock lock;
  collective_phase(ctx, [&] {
    if (ctx.is_root()) lock = acquire(dir, command);
  });
  return lock;
}

}  // namespace ragtrain
