// libFuzzer target for the NumPy readers. Three forms of input:
//   - bytes that start like a .npy file ("\x93NUMPY") go to parse_npy (src/data/npy.cpp), every element then read
//     back;
//   - bytes that start like a zip archive ("PK") are an .npz file for read_npz_file (src/data/npz_import.cpp,
//     through minizip, from an in-memory file);
//   - anything else is a list of archive entries, NAME '\n' BYTES, separated by "|npz|": the harness zips them
//     (stored and deflated in turn, with correct CRC-32s) and hands the archive to read_npz_file, so that mutated
//     arrays reach the importer instead of stopping at a checksum.
// Each must give data that keeps the invariants write_dataset relies on, or throw UserError naming the input.
// Anything else (a sanitizer report, InternalError or another exception, a broken invariant) is a finding: the
// process aborts and libFuzzer saves the input.
#include <minizip/zip.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_harness.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/data/importers.hpp"
#include "ragtrain/data/npy.hpp"

namespace {

constexpr const char* kTarget = "fuzz_npz";

[[noreturn]] void fail(const char* what) { fuzz::fail(kTarget, what); }
using fuzz::verbose;

void check_array(const ragtrain::NpyArray& a) {
  if (a.item_size < 1) fail("item_size < 1");
  for (int64_t d : a.shape)
    if (d < 0) fail("negative dimension");
  if (static_cast<int64_t>(a.data.size()) != a.size() * a.item_size) fail("data size != elements x item size");
  for (int64_t i = 0; i < a.size(); ++i) {   // every element converts (the importer reads them all)
    if (a.numeric()) (void)ragtrain::npy_number(a, i);
    else if (a.text()) (void)ragtrain::npy_string(a, i);
    else fail("neither numeric nor text");
  }
}

// .npz files and CSV folders may leave class names out and carry several targets.
void check_data(const ragtrain::RaggedData& d) { fuzz::check_data(kTarget, d, fuzz::Promises{}); }

void check_message(const ragtrain::UserError& e, const std::string& name) { fuzz::check_message(kTarget, e, name); }

[[noreturn]] void harness_error(const char* what) {
  std::perror(what);
  std::abort();
}

// A file that minizip can open by name without touching the disk: an anonymous memory file, closed on every
// path out.
class MemoryFile {
 public:
  MemoryFile() : fd_(memfd_create("fuzz.npz", 0)) {
    if (fd_ < 0) harness_error("fuzz_npz: memfd_create");
  }
  MemoryFile(const uint8_t* data, size_t size) : MemoryFile() {
    if (write(fd_, data, size) != static_cast<ssize_t>(size)) harness_error("fuzz_npz: write");
  }
  ~MemoryFile() { close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

// Zips the entries of `spec` (NAME '\n' BYTES, separated by "|npz|") into `file`, as numpy.savez (stored) and
// numpy.savez_compressed (deflated) would, in turn.
void zip_entries(const std::string& spec, const MemoryFile& file) {
  zipFile zip = zipOpen64(file.path().c_str(), APPEND_STATUS_CREATE);
  if (zip == nullptr) harness_error("fuzz_npz: zipOpen64");
  const std::string sep = "|npz|";
  int index = 0;
  for (size_t at = 0; at <= spec.size(); ++index) {
    size_t end = spec.find(sep, at);
    if (end == std::string::npos) end = spec.size();
    const std::string entry = spec.substr(at, end - at);
    at = end + sep.size();
    const size_t nl = entry.find('\n');
    const std::string name = entry.substr(0, nl);
    const std::string bytes = nl == std::string::npos ? "" : entry.substr(nl + 1);
    zip_fileinfo info{};
    const int method = index % 2 ? Z_DEFLATED : 0;
    if (zipOpenNewFileInZip64(zip, name.c_str(), &info, nullptr, 0, nullptr, 0, nullptr, method,
                              Z_DEFAULT_COMPRESSION, 1) != ZIP_OK ||
        zipWriteInFileInZip(zip, bytes.data(), static_cast<unsigned>(bytes.size())) != ZIP_OK ||
        zipCloseFileInZip(zip) != ZIP_OK)
      harness_error("fuzz_npz: writing a zip entry");
  }
  if (zipClose(zip, nullptr) != ZIP_OK) harness_error("fuzz_npz: zipClose");
}

// read_npz_file on `file` as `convert` reads it, and as `convert --regression` does (integer labels become
// targets). The --missing mode follows from `seed` (the input's size), so that the corpus meets every mode
// without reading each input four more times.
void import(const MemoryFile& file, size_t seed) {
  constexpr ragtrain::MissingMode kModes[] = {ragtrain::MissingMode::Error, ragtrain::MissingMode::Trim,
                                              ragtrain::MissingMode::Zero, ragtrain::MissingMode::Ffill};
  for (const bool regression : {false, true}) {
    ragtrain::ImportOptions opts;
    opts.regression = regression;
    opts.missing = kModes[(seed + (regression ? 1 : 0)) % 4];
    try {
      check_data(ragtrain::read_npz_file(file.path(), opts));
      if (verbose()) std::fprintf(stderr, "fuzz_npz: accepted (regression: %d)\n", regression);
    } catch (const ragtrain::UserError& e) {
      check_message(e, file.path());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // Any exception other than UserError escapes and terminates: InternalError on input is a bug of the reader.
  if (bytes.compare(0, 6, "\x93NUMPY") == 0) {
    try {
      check_array(ragtrain::parse_npy(bytes, "fuzz.npy"));
      if (verbose()) std::fprintf(stderr, "fuzz_npz: accepted .npy\n");
    } catch (const ragtrain::UserError& e) {
      check_message(e, "fuzz.npy");
    }
  } else if (bytes.compare(0, 2, "PK") == 0) {
    import(MemoryFile(data, size), size);
  } else {
    const MemoryFile file;
    zip_entries(bytes, file);
    import(file, size);
  }
  return 0;
}
