// Path identity and atomic output files (temporary name in the same folder, fsync, rename, fsync of the folder).
#include "ragtrain/core/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

std::optional<FileId> file_id(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

bool same_file(const std::string& a, const std::string& b) {
  const auto x = file_id(a), y = file_id(b);
  return x && y && *x == *y;
}

std::string temp_name_for(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

namespace {

UserError write_error(const std::string& path, const std::string& what, int err) {
  const bool full = err == ENOSPC || err == EDQUOT;
  return UserError(RT_MSG("cannot write '" << path << "': " << std::strerror(err) << " (" << what << ")"),
                   full ? "free space on that file system (df -h) or write elsewhere; the previous file, if there was "
                          "one, is unchanged"
                        : "check that the folder exists and is writable; the previous file, if there was one, is "
                          "unchanged");
}

// The folder of `path`, for the fsync that makes a rename durable.
std::string folder_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace

void commit_temp_file(const std::string& tmp, const std::string& path) {
  const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    std::remove(tmp.c_str());
    throw write_error(path, "fsync of '" + tmp + "'", err);
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw write_error(path, "renaming '" + tmp + "' to it", err);
  }
  // Best effort: some file systems refuse fsync on folders; the rename itself already happened.
  const int dir = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

AtomicOutput::AtomicOutput(std::string path) : path_(std::move(path)), tmp_(temp_name_for(path_)) {}

AtomicOutput::~AtomicOutput() {
  if (!committed_) std::remove(tmp_.c_str());
}

void AtomicOutput::commit() {
  commit_temp_file(tmp_, path_);
  committed_ = true;
}

void write_text_atomic(const std::string& path, const std::string& text) {
  AtomicOutput out(path);
  const int fd = ::open(out.temp_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw write_error(path, "creating '" + out.temp_path() + "'", errno);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;   // a write of 0 bytes to a regular file: no room
      ::close(fd);
      throw write_error(path, "writing '" + out.temp_path() + "'", err);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) throw write_error(path, "closing '" + out.temp_path() + "'", errno);
  out.commit();
}

}  // namespace ragtrain
