// Output files that never lose data: the identity of a path (links and other names resolved), and the atomic
// write every output goes through (a temporary name in the destination's folder, fsync, rename, fsync of the
// folder), so that a kill or a full disk leaves the previous file or none, never a partial one.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace ragtrain {

// Device and inode of an existing file or folder, links followed: two names of one file have the same FileId.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
};

// nullopt when nothing exists at `path` (or it is a dangling link).
std::optional<FileId> file_id(const std::string& path);

// True when both paths exist and name the same file or folder (a symlink, a hard link, "a/../b", ...).
bool same_file(const std::string& a, const std::string& b);

// The temporary name an atomic write of `path` uses: in the same folder (so rename is atomic), with the pid
// (so two processes never share one).
std::string temp_name_for(const std::string& path);

// Makes `tmp` durable and renames it over `path`, then syncs the folder. On failure removes `tmp` and throws
// UserError naming `path` and the system's reason (a full disk gets its own hint).
void commit_temp_file(const std::string& tmp, const std::string& path);

// One output written atomically: write to temp_path(), then commit(). Destroyed without commit() (an error, an
// exception), it removes the temporary file, so nothing partial stays behind.
class AtomicOutput {
 public:
  explicit AtomicOutput(std::string path);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }
  void commit();

 private:
  std::string path_, tmp_;
  bool committed_ = false;
};

// `text` to `path` atomically, every write() checked (a full disk is a UserError, the old file stays).
void write_text_atomic(const std::string& path, const std::string& text);

}  // namespace ragtrain
