// libFuzzer target for the HDF5 validation layer (validate_dataset): the input is an HDF5 file image, opened
// in memory with the core driver. Every image must either validate into a DatasetInfo that keeps its promises,
// or make HDF5 refuse to open it, or throw UserError. Anything else (a sanitizer report, InternalError or another
// exception, a broken invariant, an HDF5 identifier left open) is a finding: the process aborts.
#include <hdf5.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/format.hpp"

namespace {

// Well below libFuzzer's -rss_limit_mb (2 GB): an image that declares a huge /offsets must be refused by the
// budget check (a UserError) before the allocation. MemoryBudget::machine() (this node's RAM) would not be.
const ragtrain::MemoryBudget kBudget{64 << 20, "64M"};

void fail(const char* what) {
  std::fprintf(stderr, "fuzz_h5: %s\n", what);
  std::abort();
}

void check(const ragtrain::DatasetInfo& info) {
  if (info.num_sequences < 1 || info.num_features < 1) fail("validate_dataset accepted N < 1 or F < 1");
  if (static_cast<int64_t>(info.offsets.size()) != info.num_sequences + 1) fail("offsets size != N + 1");
  if (info.offsets.front() != 0 || info.offsets.back() != info.total_timesteps) fail("offsets ends");
  for (int64_t i = 0; i < info.num_sequences; ++i)
    if (info.length(i) < 1) fail("validate_dataset accepted an empty sequence");
  if (!info.labeled) {   // no /labels: no task attributes either
    if (info.num_outputs != 0 || !info.class_names.empty()) fail("outputs or class names without /labels");
  } else if (info.task == ragtrain::Task::Classification) {
    if (info.num_outputs < 2) fail("validate_dataset accepted fewer than 2 classes");
    if (!info.class_names.empty() && static_cast<int64_t>(info.class_names.size()) != info.num_outputs)
      fail("class_names size != num_classes");
  } else if (info.num_outputs < 1 || !info.class_names.empty()) {
    fail("regression with num_outputs < 1 or class names");
  }
}

// FUZZ_VERBOSE=1 prints what became of each input (for triage: fuzz_x FILE...).
bool verbose() {
  static const bool on = std::getenv("FUZZ_VERBOSE") != nullptr;
  return on;
}

// ---- known bugs of libhdf5 1.10 itself (not of ragtrain), kept away from the library ----
// Images that would only rediscover these would stop every fuzzing run within seconds, and hide the findings
// in our own code that the target is for. Each is documented in tests/fuzz/README.md; the validation layer
// cannot see them coming (they are inside H5Aread of a variable-length string), so real files that carry
// them still hang or crash libhdf5.

uint64_t little_endian(const uint8_t* p, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes && i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// The "size of lengths" of the superblock, which HDF5 looks for at 0, 512, 1024, 2048, ...; 0 if none.
size_t sizeof_lengths(const uint8_t* data, size_t size) {
  static const uint8_t kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  for (size_t at = 0; at + 16 <= size; at = at == 0 ? 512 : 2 * at) {
    if (std::memcmp(data + at, kSignature, 8) != 0) continue;
    const size_t n = data[at + 8] < 2 ? data[at + 14] : data[at + 10];   // superblock v0/1 vs v2/3
    return n == 2 || n == 4 || n == 8 || n == 16 || n == 32 ? n : 0;
  }
  return 0;
}

// Two functions of H5HG.c/H5HGcache.c trust the file:
// - H5HG__cache_heap_deserialize walks the objects of a global heap collection ("GCOL": where variable-length
//   strings live) by their declared sizes: a free-space object (index 0) of size 0 never advances (an endless
//   loop); a size past the end of the collection walks out of the buffer.
// - H5HG_read looks up the object a heap ID (collection address + index, in the attribute's data) names with
//   only an assert: an index the collection lacks reads through a null or wild pointer (SEGV), and an object
//   longer than the string's declared length overflows the buffer it is copied into.
// - H5T__conv_vlen allocates and clears a string's declared length (up to 4 GB) before reading it.
// This replays the walk on every "GCOL" of the image, then checks every 16-byte heap ID that names one.
const char* global_heap_hazard(const uint8_t* data, size_t size) {
  const size_t len = sizeof_lengths(data, size);
  if (len == 0) return nullptr;
  const size_t header = 8 + len, object_header = 8 + len;
  struct Collection {
    uint64_t address;
    std::vector<int64_t> sizes;   // by index; -1: no such object
  };
  std::vector<Collection> collections;
  for (size_t at = 0; at + header <= size; ++at) {
    if (std::memcmp(data + at, "GCOL", 4) != 0) continue;
    const uint8_t* g = data + at;
    const uint64_t collection = little_endian(g + 8, len);
    if (collection > size - at || collection < header) continue;   // HDF5 fails to read it: no walk
    Collection c{at, {}};
    for (uint64_t p = header; p < collection;) {
      if (p + object_header > collection) break;   // trailing free space too small for a header
      const unsigned index = static_cast<unsigned>(little_endian(g + p, 2));
      const uint64_t object = little_endian(g + p + 8, len);
      if (object > collection) return "global heap object larger than its collection";
      const uint64_t need = index > 0 ? object_header + ((object + 7) & ~uint64_t{7}) : object;
      if (need == 0) return "global heap free-space object of size 0 (endless loop)";
      if (need > collection - p) return "global heap object past the end of its collection";
      if (c.sizes.size() <= index) c.sizes.resize(index + 1, -1);
      c.sizes[index] = static_cast<int64_t>(object);
      p += need;
    }
    collections.push_back(std::move(c));
  }
  // A variable-length string on disk: 4-byte length, 8-byte collection address, 4-byte object index (files
  // written at offset 0, where addresses are file offsets). In the version 1 object headers that HDF5 1.10
  // and h5py write by default, attribute data is 8-byte aligned, so the address sits at 4 mod 8. Those 8 bytes
  // equal to a collection's address after a non-zero length count as a heap ID: a
  // heuristic, but a wrong guess only skips an input.
  for (const Collection& c : collections)
    for (size_t at = 4; at + 12 <= size; at += 8) {
      if (little_endian(data + at, 8) != c.address) continue;
      const uint64_t length = little_endian(data + at - 4, 4);
      if (length == 0) continue;
      // H5T__conv_vlen allocates and clears the declared length before it reads: 4 GB for a damaged one.
      if (length > size) return "variable-length string longer than the file";
      const uint64_t index = little_endian(data + at + 8, 4);
      if (index >= c.sizes.size() || c.sizes[index] < 0) return "heap ID names a missing global heap object";
      if (static_cast<uint64_t>(c.sizes[index]) > length) return "global heap object longer than its string";
    }
  return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // HDF5 would print its error stack for every image it refuses; the validation layer reports errors itself.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;   // H5Pset_file_image wants a buffer
  if (const char* hazard = global_heap_hazard(data, size)) {
    if (verbose()) std::fprintf(stderr, "fuzz_h5: skipped, a known libhdf5 1.10 bug: %s\n", hazard);
    return -1;   // libFuzzer: do not add this input to the corpus
  }
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0) fail("H5Pcreate failed");
  // The core driver serves the file from memory; backing_store off: nothing is ever written to disk.
  if (H5Pset_fapl_core(fapl, 64 * 1024, 0) < 0) fail("H5Pset_fapl_core failed");
  if (H5Pset_file_image(fapl, const_cast<uint8_t*>(data), size) < 0) fail("H5Pset_file_image failed");
  const hid_t file = H5Fopen("fuzz.h5", H5F_ACC_RDONLY, fapl);
  H5Pclose(fapl);
  if (file < 0) {   // not an HDF5 image: open_problem() refuses such files before validation
    if (verbose()) std::fprintf(stderr, "fuzz_h5: HDF5 does not open it\n");
    return 0;
  }
  try {
    check(ragtrain::validate_dataset(file, "fuzz.h5", kBudget));
    if (verbose()) std::fprintf(stderr, "fuzz_h5: accepted\n");
  } catch (const ragtrain::UserError& e) {
    // A message for bad input names the file (what, where, hint).
    if (std::string(e.what()).find("fuzz.h5") == std::string::npos) {
      std::fprintf(stderr, "message: %s\n", e.what());
      fail("a UserError that does not name the file");
    }
    if (verbose()) std::fprintf(stderr, "fuzz_h5: UserError: %s\n", e.what());
  }
  // Any other exception escapes and terminates. Every identifier the validation opened must be closed again.
  if (H5Fget_obj_count(file, H5F_OBJ_ALL) != 1) fail("validate_dataset left HDF5 identifiers open");
  H5Fclose(file);
  return 0;
}
