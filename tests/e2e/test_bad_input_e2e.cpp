// The bad-input corpus: every kind of bad input a user can hand ragtrain, run through the real binary on 1 and
// on 3 ranks. For every case: every rank exits 2 within 10 s, the message names what and where and carries a
// hint, nothing dumps core, and the scratch folder holds exactly what it held before (no output folder, no
// half-written file, no temporary left over).
//
// HDF5 cases damage a copy of one generated file with the raw HDF5 API; malformed .ts files are fixtures in
// tests/fixtures/bad/ (README.md there lists their mistakes); checkpoint cases damage a copy of one checkpoint
// trained once per test process.
#include <hdf5.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "e2e_util.hpp"
#include "ragtrain/checkpoint/checksum.hpp"

using namespace e2e;
namespace fs = std::filesystem;

namespace {

// ---- raw HDF5 edits ----------------------------------------------------------------------------------------

// Opens a file read-write and lets `edit` damage it.
template <class F>
void damage(const std::string& path, F&& edit) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  edit(f);
  H5Fclose(f);
}

template <class T>
void write_element(hid_t file, const char* dataset, hid_t memtype, std::vector<hsize_t> at, T value) {
  const hid_t ds = H5Dopen2(file, dataset, H5P_DEFAULT);
  const hid_t space = H5Dget_space(ds);
  H5Sselect_elements(space, H5S_SELECT_SET, 1, at.data());
  const hsize_t one = 1;
  const hid_t mem = H5Screate_simple(1, &one, nullptr);
  H5Dwrite(ds, memtype, mem, space, H5P_DEFAULT, &value);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(ds);
}

std::vector<int64_t> read_offsets(hid_t file) {
  const hid_t ds = H5Dopen2(file, "/offsets", H5P_DEFAULT);
  const hid_t space = H5Dget_space(ds);
  std::vector<int64_t> off(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
  H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, off.data());
  H5Sclose(space);
  H5Dclose(ds);
  return off;
}

// Replaces dataset `name` (if present) by a new one of `file_type` and `dims`, holding `data` (`mem_type`) if
// given. With `chunk`, the dataset is chunked and nothing is written: HDF5 allocates no storage, so the file
// stays tiny whatever `dims` declares (10^12 rows and a few KiB on disk).
void put_dataset(hid_t file, const char* name, hid_t file_type, const std::vector<hsize_t>& dims, hid_t mem_type = -1,
                 const void* data = nullptr, const std::vector<hsize_t>& chunk = {}) {
  if (H5Lexists(file, name, H5P_DEFAULT) > 0) H5Ldelete(file, name, H5P_DEFAULT);
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (!chunk.empty()) H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
  const hid_t ds = H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  EXPECT_GE(ds, 0) << name;
  if (data != nullptr) H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
}

void put_int_attr(hid_t obj, const char* name, int64_t value) {
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attr = H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attr, H5T_NATIVE_INT64, &value);
  H5Aclose(attr);
  H5Sclose(space);
}

// Keeps the first `fraction` of a file's bytes, as a copy cut off mid-transfer or a full disk leaves it.
void truncate_file(const std::string& path, double fraction) {
  fs::resize_file(path, static_cast<uintmax_t>(static_cast<double>(fs::file_size(path)) * fraction));
}

// Flips the bits of a few bytes inside the stored data of `dataset`: the file stays valid HDF5, the values change.
void flip_bytes_in_dataset(const std::string& path, const char* dataset) {
  haddr_t at = HADDR_UNDEF;
  damage(path, [&](hid_t f) {
    const hid_t ds = H5Dopen2(f, dataset, H5P_DEFAULT);
    at = H5Dget_offset(ds);
    H5Dclose(ds);
  });
  ASSERT_NE(at, HADDR_UNDEF) << dataset << " has no contiguous storage in " << path;
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  for (haddr_t k = at + 4; k < at + 8; ++k) {
    file.seekg(static_cast<std::streamoff>(k));
    const char c = static_cast<char>(file.get());
    file.seekp(static_cast<std::streamoff>(k));
    file.put(static_cast<char>(~c));
  }
}

// ---- inputs ------------------------------------------------------------------------------------------------

std::string scratch_root() {
  static const std::string root = [] {
    const fs::path p = fs::temp_directory_path() / ("ragtrain_e2e_bad_" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p.string();
  }();
  return root;
}

// One case's folder, under the process's scratch root: cases run in parallel lanes, so each needs its own.
class CaseDir {
 public:
  explicit CaseDir(const std::string& name) : path_(scratch_root() + "/" + name) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~CaseDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  CaseDir(const CaseDir&) = delete;
  CaseDir& operator=(const CaseDir&) = delete;
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

// A valid file (30 sequences, F=4, 3 classes, lengths 3..9) generated once per test process; each case damages
// a copy.
std::string good_file(const CaseDir& d, const std::string& name) {
  static const std::string pristine = [] {
    const std::string p = scratch_root() + "/good.h5";
    const Result r = run(0, "gen --out " + p + " --sequences 30 --features 4 --min-length 3 --max-length 9 --classes 3");
    EXPECT_EQ(r.rc, 0) << r.output;
    return p;
  }();
  fs::copy_file(pristine, d / name, fs::copy_options::overwrite_existing);
  return d / name;
}

// A run folder with the checkpoint of one epoch on good.h5 (F=4, --hidden 4, 3 classes), made once per process;
// each case copies it.
std::string good_run(const CaseDir& d, const std::string& name) {
  static const std::string pristine = [] {
    const std::string dir = scratch_root() + "/run";
    const Result g = run(0, "gen --out " + scratch_root() + "/train.h5 --sequences 30 --features 4 --min-length 3 "
                            "--max-length 9 --classes 3");
    EXPECT_EQ(g.rc, 0) << g.output;
    const Result r = run(0, "train --data " + scratch_root() + "/train.h5 --out " + dir + " --epochs 1 --hidden 4 --quiet");
    EXPECT_EQ(r.rc, 0) << r.output;
    return dir;
  }();
  fs::copy(pristine, d / name, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  return d / name;
}
std::string good_checkpoint(const CaseDir& d, const std::string& name) {
  const std::string dir = good_run(d, name + ".run");
  fs::rename(dir + "/checkpoint.h5", d / name);
  fs::remove_all(dir);
  return d / name;
}

std::string gen(const CaseDir& d, const std::string& name, const std::string& args) {
  const Result r = run(0, "gen --out " + d / name + " --min-length 3 --max-length 9 " + args);
  EXPECT_EQ(r.rc, 0) << r.output;
  return d / name;
}

std::string fixture(const std::string& name) { return repo_path("tests/fixtures/bad/" + name); }

std::string train_args(const CaseDir& d, const std::string& data, const std::string& extra = "") {
  return "train --data " + data + " --out " + d / "out" + " --epochs 1 --hidden 4 " + extra;
}

// A data file after `edit`, trained on.
template <class F>
std::string train_damaged(const CaseDir& d, F&& edit, const std::string& extra = "") {
  const std::string f = good_file(d, "a.h5");
  damage(f, edit);
  return train_args(d, f, extra);
}

// ---- the corpus ---------------------------------------------------------------------------------------------

struct Case {
  std::string name;
  std::function<std::string(const CaseDir&)> prepare;   // returns the arguments after `ragtrain`
  std::vector<std::string> expect;                      // substrings of the message ("hint:" in every case)
  int min_ranks = 1;                                    // the kinds that only exist on several ranks
};

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::vector<Case> cases() {
  std::vector<Case> c;
  // -- the file itself
  c.push_back({"missing file", [](const CaseDir& d) { return train_args(d, d / "nope.h5"); },
               {"nope.h5", "no such file"}});
  c.push_back({"not HDF5",
               [](const CaseDir& d) {
                 std::ofstream(d / "text.h5") << "this is not an HDF5 file\n";
                 return train_args(d, d / "text.h5");
               },
               {"text.h5", "not an HDF5 file"}});
  c.push_back({"truncated HDF5",
               [](const CaseDir& d) {
                 const std::string f = good_file(d, "cut.h5");
                 truncate_file(f, 0.5);
                 return train_args(d, f);
               },
               {"cut.h5", "truncated"}});
  // -- structure: datasets, dtypes, ranks
  for (const char* name : {"/features", "/offsets", "/labels"})
    c.push_back({std::string("missing ") + name,
                 [name](const CaseDir& d) { return train_damaged(d, [name](hid_t h) { H5Ldelete(h, name, H5P_DEFAULT); }); },
                 {"a.h5", std::string("dataset ") + name + " is missing"}});
  c.push_back({"/features float64",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) {
                   const std::vector<int64_t> off = read_offsets(h);
                   const std::vector<double> x(static_cast<size_t>(off.back()) * 4, 0.5);
                   put_dataset(h, "/features", H5T_IEEE_F64LE, {static_cast<hsize_t>(off.back()), 4}, H5T_NATIVE_DOUBLE,
                               x.data());
                 });
               },
               {"a.h5", "/features has dtype float64; expected float32", "astype(np.float32)"}});
  c.push_back({"/features 1-D",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) {
                   const std::vector<int64_t> off = read_offsets(h);
                   std::vector<float> x(static_cast<size_t>(off.back()), 0.5f);
                   put_dataset(h, "/features", H5T_IEEE_F32LE, {static_cast<hsize_t>(off.back())}, H5T_NATIVE_FLOAT, x.data());
                 });
               },
               {"a.h5", "/features has 1 dimension(s)", "expected 2-D"}});
  c.push_back({"/offsets int32",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) {
                   const std::vector<int64_t> off = read_offsets(h);
                   const std::vector<int32_t> o32(off.begin(), off.end());
                   put_dataset(h, "/offsets", H5T_STD_I32LE, {o32.size()}, H5T_NATIVE_INT32, o32.data());
                 });
               },
               {"a.h5", "/offsets has dtype int32; expected int64"}});
  c.push_back({"/labels float32 in a classification file",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) {
                   const std::vector<float> y(30, 1.0f);
                   put_dataset(h, "/labels", H5T_IEEE_F32LE, {30}, H5T_NATIVE_FLOAT, y.data());
                 });
               },
               {"a.h5", "/labels has dtype float32; expected int32"}});
  // -- offsets
  c.push_back({"offsets not starting at 0",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) { write_element<int64_t>(h, "/offsets", H5T_NATIVE_INT64, {0}, 1); });
               },
               {"a.h5", "/offsets", "offsets[0] is 1; expected 0"}});
  c.push_back({"offsets decreasing",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) {
                   const std::vector<int64_t> off = read_offsets(h);
                   write_element<int64_t>(h, "/offsets", H5T_NATIVE_INT64, {10}, off[9] - 1);
                 });
               },
               {"a.h5", "/offsets", "offsets[10]", "is less than offsets[9]"}});
  c.push_back({"offsets past the end",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) {
                   const std::vector<int64_t> off = read_offsets(h);
                   write_element<int64_t>(h, "/offsets", H5T_NATIVE_INT64, {30}, off[30] + 5);
                 });
               },
               {"a.h5", "/offsets", "the last offset (offsets[30])", "rows"}});
  c.push_back({"negative offset",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) { write_element<int64_t>(h, "/offsets", H5T_NATIVE_INT64, {3}, -7); });
               },
               {"a.h5", "/offsets", "offsets[3] = -7"}});
  c.push_back({"overflowing offset (INT64_MAX)",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) { write_element<int64_t>(h, "/offsets", H5T_NATIVE_INT64, {7}, kInt64Max); });
               },
               {"a.h5", "/offsets", "offsets[7] = 9223372036854775807"}});
  c.push_back({"zero-length sequence",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) {
                   const std::vector<int64_t> off = read_offsets(h);   // offsets[5] = offsets[4]: sequence 4 empty
                   write_element<int64_t>(h, "/offsets", H5T_NATIVE_INT64, {5}, off[4]);
                 });
               },
               {"a.h5", "/offsets", "sequence 4 is empty"}});
  // -- values
  c.push_back({"NaN feature",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) { write_element<float>(h, "/features", H5T_NATIVE_FLOAT, {20, 2}, NAN); });
               },
               {"a.h5", "/features", "non-finite value (nan)", "feature 2"}});
  c.push_back({"Inf feature",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) {
                   write_element<float>(h, "/features", H5T_NATIVE_FLOAT, {0, 3}, -INFINITY);
                 });
               },
               {"a.h5", "/features", "sequence 0 has a non-finite value (-inf) at timestep 0, feature 3"}});
  c.push_back({"negative label",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) { write_element<int32_t>(h, "/labels", H5T_NATIVE_INT32, {3}, -1); });
               },
               {"a.h5", "/labels", "sequence 3 has label -1; expected 0..2"}});
  c.push_back({"label >= classes",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) { write_element<int32_t>(h, "/labels", H5T_NATIVE_INT32, {17}, 3); });
               },
               {"a.h5", "/labels", "sequence 17 has label 3; expected 0..2"}});
  c.push_back({"labels of the wrong count",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) {
                   const std::vector<int32_t> y(29, 0);
                   put_dataset(h, "/labels", H5T_STD_I32LE, {29}, H5T_NATIVE_INT32, y.data());
                 });
               },
               {"a.h5", "/labels has 29 labels but /offsets describes 30 sequences"}});
  // -- attributes
  c.push_back({"num_classes missing",
               [](const CaseDir& d) { return train_damaged(d, [](hid_t h) { H5Adelete(h, "num_classes"); }); },
               {"a.h5", "root attribute 'num_classes' is missing"}});
  c.push_back({"num_classes below 2",
               [](const CaseDir& d) { return train_damaged(d, [](hid_t h) { put_int_attr(h, "num_classes", 1); }); },
               {"a.h5", "'num_classes' is 1"}});
  c.push_back({"num_classes inconsistent with the labels",
               [](const CaseDir& d) {
                 // Every class occurs in the generated file: with num_classes 2, some label is 2.
                 return train_damaged(d, [](hid_t h) { put_int_attr(h, "num_classes", 2); });
               },
               {"a.h5", "/labels", "has label 2; expected 0..1 (num_classes = 2)"}});
  c.push_back({"validation set with another feature count",
               [](const CaseDir& d) {
                 const std::string t = good_file(d, "a.h5");
                 return train_args(d, t, "--val " + gen(d, "v.h5", "--sequences 10 --features 5 --classes 3"));
               },
               {"v.h5", "features"}});
  // -- sizes
  c.push_back({"empty data set",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) {
                   const int64_t zero = 0;
                   put_dataset(h, "/offsets", H5T_STD_I64LE, {1}, H5T_NATIVE_INT64, &zero);
                   put_dataset(h, "/features", H5T_IEEE_F32LE, {0, 4});
                   put_dataset(h, "/labels", H5T_STD_I32LE, {0});
                 });
               },
               {"a.h5", "/offsets", "at least one sequence"}});
  c.push_back({"fewer sequences than ranks",
               [](const CaseDir& d) { return train_args(d, gen(d, "two.h5", "--sequences 2 --features 4 --classes 3")); },
               {"two.h5", "2 sequences but the job has 3 ranks", "use at most 2 ranks"},
               /*min_ranks=*/2});
  c.push_back({"declared /offsets of 10^12 entries",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) {
                   const hsize_t n = 1000000000000ULL;
                   put_dataset(h, "/features", H5T_IEEE_F32LE, {n, 4}, -1, nullptr, {4096, 4});
                   put_dataset(h, "/offsets", H5T_STD_I64LE, {n + 1}, -1, nullptr, {4096});
                   put_dataset(h, "/labels", H5T_STD_I32LE, {n}, -1, nullptr, {4096});
                 });
               },
               {"a.h5", "dataset /offsets (1000000000001 int64 entries", "TiB", "--max-memory auto", "raise --max-memory"}});
  c.push_back({"declared sequence of 10^11 timesteps (predict)",
               [](const CaseDir& d) {
                 const std::string f = good_file(d, "a.h5");
                 damage(f, [](hid_t h) {
                   const int64_t off[2] = {0, 100000000000LL};
                   const int32_t label = 1;
                   put_dataset(h, "/features", H5T_IEEE_F32LE, {static_cast<hsize_t>(off[1]), 4}, -1, nullptr, {4096, 4});
                   put_dataset(h, "/offsets", H5T_STD_I64LE, {2}, H5T_NATIVE_INT64, off);
                   put_dataset(h, "/labels", H5T_STD_I32LE, {1}, H5T_NATIVE_INT32, &label);
                 });
                 return "predict --checkpoint " + good_checkpoint(d, "ck.h5") + " --data " + f + " --out " + d / "pred.csv";
               },
               {"a.h5", "this rank's shard (1 sequence(s), 100000000000 timesteps", "--max-memory auto"}});
  c.push_back({"declared rows past 2^63 bytes",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) {
                   const int64_t off[2] = {0, kInt64Max / 4};
                   const int32_t label = 1;
                   put_dataset(h, "/features", H5T_IEEE_F32LE, {static_cast<hsize_t>(off[1]), 4}, -1, nullptr, {4096, 4});
                   put_dataset(h, "/offsets", H5T_STD_I64LE, {2}, H5T_NATIVE_INT64, off);
                   put_dataset(h, "/labels", H5T_STD_I32LE, {1}, H5T_NATIVE_INT32, &label);
                 });
               },
               {"a.h5", "/features has shape", "more than 2^63 bytes"}});
  c.push_back({"a compression filter this HDF5 lacks (h5py's lzf)",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) {
                   // Read back the features, then store them again through filter 32000 (lzf), which libhdf5 does
                   // not have: set as optional, HDF5 accepts it in the pipeline, as h5py's own plugin would.
                   const hid_t old = H5Dopen2(h, "/features", H5P_DEFAULT);
                   const hid_t old_space = H5Dget_space(old);
                   hsize_t dims[2] = {0, 0};
                   H5Sget_simple_extent_dims(old_space, dims, nullptr);
                   std::vector<float> v(static_cast<size_t>(dims[0] * dims[1]));
                   H5Dread(old, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
                   H5Sclose(old_space);
                   H5Dclose(old);
                   H5Ldelete(h, "/features", H5P_DEFAULT);
                   const hid_t space = H5Screate_simple(2, dims, nullptr);
                   const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
                   H5Pset_chunk(dcpl, 2, dims);
                   H5Pset_filter(dcpl, 32000, H5Z_FLAG_OPTIONAL, 0, nullptr);
                   const hid_t ds = H5Dcreate2(h, "/features", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
                   H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
                   H5Dclose(ds);
                   H5Pclose(dcpl);
                   H5Sclose(space);
                 });
               },
               {"a.h5", "/features is stored with HDF5 filter 32000", "h5repack"}});
  c.push_back({"--max-memory 1K",
               [](const CaseDir& d) { return train_args(d, good_file(d, "a.h5"), "--max-memory 1K"); },
               {"a.h5", "this rank may use 1.0 KiB (--max-memory 1K)"}});
  // A model or a step that cannot fit: refused before anything is allocated (was std::bad_alloc, exit 3).
  c.push_back({"--layers 100000000 (the model does not fit)",
               [](const CaseDir& d) { return train_args(d, good_file(d, "a.h5"), "--layers 100000000"); },
               {"a.h5", "layers 100000000", "needs about", "--layers"}});
  c.push_back({"--batch-per-rank 2147483647 (a step does not fit)",
               [](const CaseDir& d) { return train_args(d, good_file(d, "a.h5"), "--batch-per-rank 2147483647"); },
               {"2147483647 sequence(s)", "--batch-per-rank"}});
  c.push_back({"num_classes 2^31 - 1 (the head does not fit)",
               [](const CaseDir& d) {
                 return train_damaged(d, [](hid_t h) { put_int_attr(h, "num_classes", 2147483647); });
               },
               {"a.h5", "Linear(", "-> 2147483647)"}});
  // inspect reads in blocks that fit the budget, so 1K is enough for it; 100 bytes do not hold /offsets (248).
  c.push_back({"--max-memory 100 (inspect)",
               [](const CaseDir& d) { return "inspect " + good_file(d, "a.h5") + " --max-memory 100"; },
               {"a.h5", "dataset /offsets (31 int64 entries", "(--max-memory 100)"}});
  // -- .ts files (convert)
  c.push_back({".ts ragged channels",
               [](const CaseDir& d) { return "convert " + fixture("ragged_channels.ts") + " " + d / "o.h5"; },
               {"ragged_channels.ts:8:", "channel 1 has 2 values but channel 0 has 3"}});
  c.push_back({".ts missing @data",
               [](const CaseDir& d) { return "convert " + fixture("missing_data.ts") + " " + d / "o.h5"; },
               {"missing_data.ts:6:", "@data line missing"}});
  c.push_back({".ts unknown label",
               [](const CaseDir& d) { return "convert " + fixture("unknown_label.ts") + " " + d / "o.h5"; },
               {"unknown_label.ts:9:", "unknown class label \"c\""}});
  c.push_back({".ts non-numeric value",
               [](const CaseDir& d) { return "convert " + fixture("non_numeric.ts") + " " + d / "o.h5"; },
               {"non_numeric.ts:8:", "\"1.5x\""}});
  c.push_back({".ts channel count differs from @dimensions",
               [](const CaseDir& d) { return "convert " + fixture("channel_count.ts") + " " + d / "o.h5"; },
               {"channel_count.ts:9:", "3 channel(s); expected 2"}});
  // -- options and output
  c.push_back({"bad option value", [](const CaseDir& d) { return train_args(d, good_file(d, "a.h5"), "--hidden -3"); },
               {"--hidden"}});
  c.push_back({"unknown option", [](const CaseDir& d) { return train_args(d, good_file(d, "a.h5"), "--hiddne 3"); },
               {"hiddne"}});
  c.push_back({"conflicting options",
               [](const CaseDir& d) { return train_args(d, good_file(d, "a.h5"), "--verbose"); },   // the runner adds --quiet
               {"--verbose", "--quiet"}});
  c.push_back({"--max-memory not a size",
               [](const CaseDir& d) { return train_args(d, good_file(d, "a.h5"), "--max-memory lots"); },
               {"max-memory", "lots"}});
  c.push_back({"unwritable output folder",
               [](const CaseDir& d) {
                 const std::string f = good_file(d, "a.h5");
                 std::ofstream(d / "blocker") << "a file where the output folder's parent should be\n";
                 return "train --data " + f + " --out " + d / "blocker/run --epochs 1 --hidden 4";
               },
               {"blocker"}});
  // -- checkpoints
  c.push_back({"missing checkpoint",
               [](const CaseDir& d) { return "eval --checkpoint " + d / "none.h5" + " --data " + good_file(d, "a.h5"); },
               {"none.h5", "does not exist"}});
  c.push_back({"data file as checkpoint",
               [](const CaseDir& d) {
                 const std::string f = good_file(d, "a.h5");
                 return "eval --checkpoint " + f + " --data " + f;
               },
               {"a.h5", "not a ragtrain checkpoint"}});
  c.push_back({"checkpoint of another model shape (eval, F=5 data)",
               [](const CaseDir& d) {
                 return "eval --checkpoint " + good_checkpoint(d, "ck.h5") + " --data " +
                        gen(d, "f5.h5", "--sequences 10 --features 5 --classes 3");
               },
               {"f5.h5", "ck.h5", "has 5 features per timestep", "expects 4"}});
  c.push_back({"checkpoint of another model shape (train --resume --hidden 8)",
               [](const CaseDir& d) {
                 const std::string run_dir = good_run(d, "run");
                 return "train --data " + good_file(d, "a.h5") + " --out " + run_dir + " --resume " + run_dir +
                        " --epochs 2 --hidden 8";
               },
               {"checkpoint.h5", "H=4", "H=8"}});
  c.push_back({"checkpoint of another model shape (train --init-from --hidden 8)",
               [](const CaseDir& d) {
                 return "train --data " + good_file(d, "a.h5") + " --out " + d / "out" + " --epochs 1 --hidden 8 --init-from " +
                        good_checkpoint(d, "ck.h5");
               },
               {"--init-from", "ck.h5", "hidden 4", "hidden 8"}});
  c.push_back({"checkpoint of another format version",
               [](const CaseDir& d) {
                 const std::string ck = good_checkpoint(d, "ck.h5");
                 damage(ck, [](hid_t h) { put_int_attr(h, "version", 99); });
                 return "eval --checkpoint " + ck + " --data " + good_file(d, "a.h5");
               },
               {"ck.h5", "version 99"}});
  c.push_back({"corrupted checkpoint (bytes flipped in /params)",
               [](const CaseDir& d) {
                 const std::string ck = good_checkpoint(d, "ck.h5");
                 flip_bytes_in_dataset(ck, "/params/lstm.weight_hh_l0");
                 return "eval --checkpoint " + ck + " --data " + good_file(d, "a.h5");
               },
               {"ck.h5", "params/lstm.weight_hh_l0 fails its checksum"}});
  c.push_back({"truncated checkpoint",
               [](const CaseDir& d) {
                 const std::string ck = good_checkpoint(d, "ck.h5");
                 truncate_file(ck, 0.6);
                 return "eval --checkpoint " + ck + " --data " + good_file(d, "a.h5");
               },
               {"ck.h5", "truncated"}});
  c.push_back({"checkpoint holding a NaN parameter (its checksum recomputed)",
               [](const CaseDir& d) {
                 const std::string ck = good_checkpoint(d, "ck.h5");
                 damage(ck, [](hid_t h) {
                   const hid_t ds = H5Dopen2(h, "/params/fc.bias", H5P_DEFAULT);
                   const hid_t space = H5Dget_space(ds);
                   std::vector<float> v(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
                   H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
                   v[1] = std::nanf("");
                   H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
                   put_int_attr(ds, "crc32", ragtrain::crc32(v.data(), v.size() * sizeof(float)));
                   H5Sclose(space);
                   H5Dclose(ds);
                 });
                 return "eval --checkpoint " + ck + " --data " + good_file(d, "a.h5");
               },
               {"ck.h5", "params/fc.bias holds nan at index 1"}});
  c.push_back({"checkpoint declaring a huge model",
               [](const CaseDir& d) {
                 const std::string ck = good_checkpoint(d, "ck.h5");
                 damage(ck, [](hid_t h) { put_int_attr(h, "hidden", 4000000000LL); });
                 return "eval --checkpoint " + ck + " --data " + good_file(d, "a.h5");
               },
               {"ck.h5", "hidden 4000000000", "more than this machine's memory"}});
  return c;
}

// Every file and folder under `root`, relative to it.
std::set<std::string> listing(const std::string& root) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) out.insert(fs::relative(e.path(), root).string());
  return out;
}

// What every case must show: exit 2 on every rank, an error line with a hint and the case's words, no crash, and
// the case's folder exactly as before the run. A case that hangs is ended by run_corpus's time-out (exit 124).
void check_case(const Case& c, int np, const std::string& args, const Result& r, const CaseDir& d,
                const std::set<std::string>& before) {
  SCOPED_TRACE(c.name + " on " + std::to_string(np) + " rank(s): ragtrain " + args + " --quiet\n" + r.output);
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(static_cast<int>(r.rank_rcs.size()), np);
  for (size_t k = 0; k < r.rank_rcs.size(); ++k) EXPECT_EQ(r.rank_rcs[k], 2) << "rank " << k;
  EXPECT_TRUE(contains(r.output, "ragtrain: error")) << "no error line";
  EXPECT_TRUE(contains(r.output, "hint:")) << "message lacks a hint";
  for (const std::string& s : c.expect) EXPECT_TRUE(contains(r.output, s)) << "message lacks '" << s << "'";
  EXPECT_FALSE(contains(r.output, "core dumped"));
  EXPECT_FALSE(contains(r.output, "terminate called")) << "an exception escaped";
  EXPECT_FALSE(contains(r.output, "HDF5-DIAG")) << "HDF5's own error stack reached the user";
  EXPECT_EQ(listing(d.str()), before) << "a failed run left output behind (or changed its inputs' folder)";
}

// Runs every case on `np` ranks, `lanes` cases at a time: most of a case's time is mpirun starting and the
// runner's failing ranks lingering a second, not CPU, so two lanes halve the wall time even on two cores.
void run_corpus(int np, int lanes) {
  const std::vector<Case> all = cases();
  std::atomic<size_t> next{0};
  std::atomic<int> ran{0};
  std::mutex slowest_mutex;
  // The lanes overlap only in running ragtrain: preparing a case and checking it call the HDF5 library, which
  // Debian builds without thread safety (two threads inside it at once crashed this test binary once).
  std::mutex h5_mutex;
  double slowest = 0;
  std::string slowest_name;
  auto lane = [&] {
    for (size_t i; (i = next++) < all.size();) {
      const Case& c = all[i];
      if (np < c.min_ranks) continue;
      const CaseDir d("np" + std::to_string(np) + "-case" + std::to_string(i));
      std::string args;
      std::set<std::string> before;
      {
        const std::lock_guard<std::mutex> lock(h5_mutex);
        args = c.prepare(d);
        before = listing(d.str());
      }
      // One rank runs as a plain process (MPI singleton), how one-rank jobs are usually started; it also spares
      // the corpus mpirun's start-up and the second the runner's failing ranks linger under it.
      // The time-out only tells a hang from a slow start: a case takes 1-5 s, but two lanes on a busy 2-core
      // machine (or a sanitizer build) have taken several times that, and a bound that close fails on luck.
      const Result r = run(np == 1 ? 0 : np, args + " --quiet", static_cast<int>(120 * e2e::time_scale()));
      ++ran;
      {
        const std::lock_guard<std::mutex> lock(slowest_mutex);
        if (r.seconds > slowest) slowest = r.seconds, slowest_name = c.name;
      }
      const std::lock_guard<std::mutex> lock(h5_mutex);
      check_case(c, np, args, r, d, before);
    }
  };
  std::vector<std::thread> threads;
  for (int k = 0; k < lanes; ++k) threads.emplace_back(lane);
  for (std::thread& t : threads) t.join();
  EXPECT_GE(ran.load(), np == 1 ? 55 : 56);   // the corpus cannot shrink unnoticed
  std::printf("%d cases on %d rank(s); slowest %.1f s (%s)\n", ran.load(), np, slowest, slowest_name.c_str());
}


}  // namespace

// Two tests, so that each stays well under a few minutes on a small machine and a failure says which rank count.
TEST(BadInput, CorpusOnOneRank) { run_corpus(1, 2); }
TEST(BadInput, CorpusOnThreeRanks) { run_corpus(3, 2); }

// A --batch-per-rank typo of 2^31 is refused by the memory check before the schedule deals its P x K columns
// (which took 12 s on one rank and 55 s on three before: every rank dealt 2^31 empty columns first).
TEST(BadInput, AHugeBatchIsRefusedAtOnce) {
  const CaseDir d("huge-batch");
  const Result r = run(3, train_args(d, good_file(d, "a.h5"), "--batch-per-rank 2147483647") + " --quiet");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "2147483647 sequence(s)")) << r.output;
  EXPECT_LT(r.seconds, 15.0 * e2e::time_scale()) << "the refusal should not depend on --batch-per-rank's size";
}

TEST(BadInput, InspectExitsTwoOnInvalidAndZeroOnValid) {
  const CaseDir d("inspect");
  const std::string f = good_file(d, "a.h5");
  const Result ok = run(0, "inspect " + f);
  EXPECT_EQ(ok.rc, 0) << ok.output;
  EXPECT_TRUE(contains(ok.output, "30")) << ok.output;
  const Result quiet = run(0, "inspect " + f + " --quiet");   // the verdict alone
  EXPECT_EQ(quiet.rc, 0) << quiet.output;
  EXPECT_EQ(quiet.output, "valid: yes\n");
  damage(f, [](hid_t h) { write_element<int32_t>(h, "/labels", H5T_NATIVE_INT32, {3}, -1); });
  const Result bad = run(0, "inspect " + f);
  EXPECT_EQ(bad.rc, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "labels")) << bad.output;
}

// Runs once after all tests of this binary: removes the per-process pristine files.
class CleanScratchRootDir : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("ragtrain_e2e_bad_" + std::to_string(::getpid())), ec);
  }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new CleanScratchRootDir);
