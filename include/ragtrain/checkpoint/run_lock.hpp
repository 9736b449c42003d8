// One run per folder: the lock file DIR/ragtrain.lock that `train` (fresh or --resume) holds on its --out folder
// for the whole run, naming the holder; stale locks of dead processes are recognised (doc/reliability.md).
#pragma once

#include <cstdint>
#include <string>

#include "ragtrain/comm/context.hpp"
#include "ragtrain/core/output_file.hpp"

namespace ragtrain {

inline constexpr const char* kRunLockName = "ragtrain.lock";

// What a lock file says about the process that holds (or held) the folder.
struct LockHolder {
  std::string host;          // gethostname()
  std::string boot_id;       // /proc/sys/kernel/random/boot_id: a pid means nothing across a reboot
  int64_t pid = 0;
  uint64_t start_ticks = 0;  // /proc/PID/stat field 22 (start time): tells the holder from a reused pid
  std::string started;       // UTC, for people
  std::string command;       // the holder's command line
  std::string slurm_job;     // SLURM_JOB_ID (and restart count) when it ran under Slurm; empty otherwise

  // "pid 123 on host n01 since 2026-12-03T12:00:00Z (Slurm job 42), running: ragtrain train ..."
  std::string describe() const;
};

enum class LockState {
  Free,        // no lock file
  Live,        // held by a process of this host that is running
  Stale,       // left by a process of this host that is gone (or the host rebooted since): may be taken over
  OtherHost,   // held by a process of another host: ragtrain cannot tell whether it runs
  Unreadable,  // a lock file that does not parse
};

struct LockStatus {
  LockState state = LockState::Free;
  LockHolder holder;
  std::string path;     // DIR/ragtrain.lock
  std::string reason;   // why Stale ("the process is gone", "pid reused", "the host restarted")
};

// What DIR's lock says, without taking it (DIR need not exist).
LockStatus inspect_run_lock(const std::string& dir);

// Throws UserError (exit 2) naming the holder and what to do when `status` forbids writing into the folder
// (Live, OtherHost, Unreadable). `option` and `value` name the output option that points there.
void refuse_if_held(const LockStatus& status, const std::string& option, const std::string& value);

// The held lock; released (the file removed, if it is still this one) by the destructor, on every exit path
// that unwinds. A process killed outright leaves the file behind: the next run of this host sees the pid gone
// and takes it over with a notice, so a SIGKILLed run never blocks its own --resume.
class RunLock {
 public:
  RunLock() = default;
  ~RunLock();
  RunLock(RunLock&& o) noexcept;
  RunLock& operator=(RunLock&& o) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  // Takes DIR's lock, creating DIR when missing (and removing it again on release if it is still empty, so a run
  // refused for a bad input leaves nothing behind). Throws UserError when another run holds it.
  static RunLock acquire(const std::string& dir, const std::string& command);
  // Collective: rank 0 takes the lock, every rank learns the verdict (a refusal ends every rank with exit 2).
  static RunLock acquire(const Context& ctx, const std::string& dir, const std::string& command);

  bool held() const { return !path_.empty(); }
  void release();

 private:
  std::string dir_, path_;
  FileId id_;
  int created_levels_ = 0;   // folders acquire() created: dir_ and the missing parents above it
};

}  // namespace ragtrain
