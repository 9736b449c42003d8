// Direct reads: contiguous datasets located in the file, byte ranges read by several threads with pread.
#include "ragtrain/data/direct_read.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/h5.hpp"
#include "ragtrain/data/parallel_blocks.hpp"

namespace ragtrain {

namespace {

// A read-only POSIX file descriptor, closed once.
class Fd {
 public:
  explicit Fd(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads exactly `bytes` at `offset`; an empty string on success, else what went wrong.
std::string pread_all(int fd, char* dest, int64_t bytes, int64_t offset) {
  while (bytes > 0) {
    const ssize_t got = ::pread(fd, dest, static_cast<size_t>(bytes), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return RT_MSG("reading " << bytes << " bytes at byte " << offset << " failed: " << std::strerror(errno));
    if (got == 0) return RT_MSG("the file ends before byte " << offset + bytes << " (it is truncated)");
    dest += got;
    bytes -= got;
    offset += got;
  }
  return {};
}

// One element of `dset` at `coord` through HDF5 (independent transfer), as raw bytes.
bool read_element(hid_t dset, hid_t mem_type, const std::vector<hsize_t>& coord, std::vector<char>& out) {
  H5Handle space = h5_space(H5Dget_space(dset));
  if (!space) return false;
  std::vector<hsize_t> one(coord.size(), 1);
  if (H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, coord.data(), nullptr, one.data(), nullptr) < 0) return false;
  const hsize_t n = 1;
  H5Handle mem = h5_space(H5Screate_simple(1, &n, nullptr));
  out.assign(H5Tget_size(mem_type), 0);
  return mem && H5Dread(dset, mem_type, mem.get(), space.get(), H5P_DEFAULT, out.data()) >= 0;
}

// Whether the first and last elements of `dset` lie at `offset` of the file as HDF5 reads them.
bool offset_checks_out(const std::string& path, hid_t dset, hid_t mem_type, int64_t offset) {
  H5Handle space = h5_space(H5Dget_space(dset));
  const int rank = space ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 1) return false;
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  hsize_t elements = 1;
  for (hsize_t d : dims) elements *= d;
  if (elements == 0) return false;
  std::vector<hsize_t> last(dims);
  for (hsize_t& d : last) d -= 1;
  const auto size = static_cast<int64_t>(H5Tget_size(mem_type));
  Fd fd(path);
  if (fd.get() < 0) return false;
  for (const auto& [coord, at] : {std::pair{std::vector<hsize_t>(dims.size(), 0), offset},
                                  std::pair{last, offset + static_cast<int64_t>(elements - 1) * size}}) {
    std::vector<char> via_hdf5, direct(static_cast<size_t>(size));
    if (!read_element(dset, mem_type, coord, via_hdf5)) return false;
    if (!pread_all(fd.get(), direct.data(), size, at).empty() || direct != via_hdf5) return false;
  }
  return true;
}

}  // namespace

std::optional<int64_t> contiguous_offset(const std::string& path, hid_t dset, hid_t mem_type) {
  H5QuietErrors quiet;
  H5Handle dcpl = h5_plist(H5Dget_create_plist(dset));
  if (!dcpl || H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS || H5Pget_external_count(dcpl.get()) != 0 ||
      H5Pget_nfilters(dcpl.get()) != 0)
    return std::nullopt;
  H5Handle type = h5_type(H5Dget_type(dset));
  if (!type || H5Tequal(type.get(), mem_type) <= 0) return std::nullopt;
  const haddr_t addr = H5Dget_offset(dset);
  if (addr == HADDR_UNDEF) return std::nullopt;   // storage never written: HDF5 returns fill values
  // The address is relative to HDF5's base address, which a user block moves; try both readings.
  hsize_t userblock = 0;
  H5Handle file = h5_file(H5Iget_file_id(dset));
  H5Handle fcpl = file ? h5_plist(H5Fget_create_plist(file.get())) : H5Handle();
  if (fcpl) H5Pget_userblock(fcpl.get(), &userblock);
  for (const hsize_t base : {hsize_t{0}, userblock}) {
    const auto offset = static_cast<int64_t>(addr + base);
    if (offset_checks_out(path, dset, mem_type, offset)) return offset;
    if (userblock == 0) break;
  }
  return std::nullopt;
}

void append_range(std::vector<ByteRange>& ranges, const ByteRange& r) {
  if (r.bytes == 0) return;
  if (!ranges.empty()) {
    ByteRange& b = ranges.back();
    if (b.file_offset + b.bytes == r.file_offset && b.dest + b.bytes == r.dest) {
      b.bytes += r.bytes;
      return;
    }
  }
  ranges.push_back(r);
}

std::optional<ReadFailure> read_ranges(const std::string& path, const std::vector<ByteRange>& ranges, int threads,
                                       int64_t piece_bytes) {
  if (ranges.empty()) return std::nullopt;
  Fd fd(path);
  if (fd.get() < 0) return ReadFailure{ranges.front().sequence, RT_MSG("it could not be opened: " << std::strerror(errno))};
  // Pieces in file order: (range, first byte within it, bytes).
  struct Piece {
    size_t range;
    int64_t at, bytes;
  };
  std::vector<Piece> pieces;
  for (size_t r = 0; r < ranges.size(); ++r)
    for (int64_t at = 0; at < ranges[r].bytes; at += piece_bytes)
      pieces.push_back(Piece{r, at, std::min(piece_bytes, ranges[r].bytes - at)});
  std::mutex mu;
  size_t failed_range = ranges.size();
  std::string failed_what;
  parallel_blocks(static_cast<int64_t>(pieces.size()), threads, [&](int64_t i) {
    const Piece& p = pieces[static_cast<size_t>(i)];
    const ByteRange& r = ranges[p.range];
    std::string err = pread_all(fd.get(), r.dest + p.at, p.bytes, r.file_offset + p.at);
    if (err.empty()) return;
    std::lock_guard<std::mutex> lock(mu);
    if (p.range < failed_range) {
      failed_range = p.range;
      failed_what = std::move(err);
    }
  });
  if (failed_range == ranges.size()) return std::nullopt;
  return ReadFailure{ranges[failed_range].sequence, failed_what};
}

int reader_threads(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int on_node = 1;
  MPI_CHECK(MPI_Comm_size(node, &on_node));
  MPI_CHECK(MPI_Comm_free(&node));
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const int mine = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : cores;
  // A rank bound to fewer cores than the node has (mpirun --bind-to, srun --cpu-bind) was given its share
  // already; an unbound one takes its part of the node.
  const int share = mine < cores ? mine : cores / std::max(1, on_node);
  return std::clamp(share, 1, 16);
}

}  // namespace ragtrain
