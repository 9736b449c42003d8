// Checkpoint files of a run folder: naming, atomic save with a stable "latest" name, pruning, and lookup.
#include "ragtrain/checkpoint/rotation.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/h5.hpp"
#include "ragtrain/metrics/metrics.hpp"

namespace fs = std::filesystem;

namespace ragtrain {

namespace {

constexpr const char* kPrefix = "checkpoint-step";
constexpr const char* kSuffix = ".h5";

// Step number of a step checkpoint's file name, or -1.
int64_t parse_step(const std::string& name) {
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return -1;
  return std::stoll(digits);
}

// Makes the renames in `dir` durable: a crash right after save_checkpoint returns must not lose them.
void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Leftovers of writes killed before their rename ("<name>.tmp.<pid>"); only one process writes a run folder.
void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("checkpoint", 0) == 0 && name.find(".h5.tmp.") != std::string::npos) fs::remove(e.path(), ec);
  }
}

// The attribute "step" of a checkpoint, or -1 when the file cannot be read (read_checkpoint reports why).
int64_t peek_step(const std::string& path) {
  H5QuietErrors quiet;
  try {
    H5Handle file = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    if (!file || attr_shape(file.get(), "step").kind != AttrKind::Integer) return -1;
    return read_int_attr(file.get(), "step");
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

std::string step_checkpoint_name(int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%09lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  return buf;
}

std::vector<StepCheckpoint> list_step_checkpoints(const std::string& dir) {
  std::vector<StepCheckpoint> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const int64_t step = parse_step(e.path().filename().string());
    if (step >= 0 && e.is_regular_file(ec)) out.push_back({step, e.path().string()});
  }
  std::sort(out.begin(), out.end(), [](const StepCheckpoint& a, const StepCheckpoint& b) { return a.step < b.step; });
  return out;
}

std::string save_checkpoint(const std::string& dir, const Checkpoint& ckpt, int64_t keep) {
  RT_CHECK(keep >= 1, "keep must be >= 1");
  remove_stale_temporaries(dir);
  const std::string step_path = (fs::path(dir) / step_checkpoint_name(ckpt.step)).string();
  write_checkpoint(step_path, ckpt);
  checkpoint_test_pause("link", ckpt.step);

  // checkpoint.h5 becomes the new file in one rename: readers never see a missing or partial "latest".
  const std::string latest = (fs::path(dir) / kLatestCheckpointName).string();
  const std::string tmp = latest + ".tmp." + std::to_string(::getpid());
  std::remove(tmp.c_str());
  if (::link(step_path.c_str(), tmp.c_str()) == 0) {
    if (std::rename(tmp.c_str(), latest.c_str()) != 0) {
      const std::string why = std::strerror(errno);
      std::remove(tmp.c_str());
      throw UserError("cannot replace '" + latest + "': " + why, "check that the output folder is writable");
    }
  } else {
    std::error_code ec;   // a file system without hard links: a second, identical file
    fs::copy_file(step_path, tmp, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      std::remove(tmp.c_str());   // a partial copy (a full disk) must not stay behind
      throw UserError("cannot write '" + tmp + "': " + ec.message(),
                      "check that the output folder is writable and has free space; " + step_path + " is complete");
    }
    commit_file(tmp, latest);
  }

  std::vector<StepCheckpoint> all = list_step_checkpoints(dir);
  for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i) std::remove(all[i].path.c_str());
  sync_dir(dir);
  return step_path;
}

std::string resolve_resume_path(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;   // read_checkpoint says what is wrong with a file
  const std::string latest = (fs::path(path) / kLatestCheckpointName).string();
  const std::vector<StepCheckpoint> all = list_step_checkpoints(path);
  if (fs::exists(latest, ec)) {
    // A run killed between the rename of a new step file and the switch of checkpoint.h5 leaves checkpoint.h5 one
    // checkpoint behind; the step file is complete (it is renamed only after fsync), so it is the newest.
    if (!all.empty() && !fs::equivalent(latest, all.back().path, ec)) {
      const int64_t latest_step = peek_step(latest);
      if (latest_step >= 0 && all.back().step > latest_step) return all.back().path;
    }
    return latest;   // also when it is unreadable: read_checkpoint names the damage
  }
  USER_CHECK(!all.empty(), "--resume " << path << ": the folder holds no checkpoint.h5 and no checkpoint-step*.h5",
             "pass the --out folder of an earlier run, or one of its checkpoint files");
  return all.back().path;
}

std::string resolve_model_path(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;   // read_checkpoint says what is wrong with a file
  for (const char* name : {kBestCheckpointName, kLatestCheckpointName}) {
    const std::string file = (fs::path(path) / name).string();
    if (fs::exists(file, ec)) return file;
  }
  throw UserError("--checkpoint " + path + ": the folder holds neither best.h5 nor checkpoint.h5",
                  "pass the --out folder of a train run, or a checkpoint file");
}

}  // namespace ragtrain
