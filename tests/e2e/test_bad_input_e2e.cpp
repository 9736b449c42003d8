// Bad input through the real binary on 1 and 3 ranks: every rank exits 2 within 10 s, the message names what
// and where with a hint, and no output is left behind.
#include <hdf5.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "e2e_util.hpp"

using namespace e2e;

namespace {

// Opens a generated file read-write and lets `edit` damage it with the raw HDF5 API.
template <class F>
void damage(const std::string& path, F&& edit) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
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

struct Case {
  std::string name;
  std::function<std::string(const Scratch&)> prepare;   // returns the arguments after `ragtrain`
  std::vector<std::string> expect;                      // substrings of the message
};

// A valid file (30 sequences, F=4, 3 classes) copied from one generated per test process, which each case may damage.
std::string good_file(const Scratch& d, const std::string& name) {
  static const std::string pristine = [] {
    const std::string p = std::filesystem::temp_directory_path() / ("ragtrain_e2e_good_" + std::to_string(::getpid()) + ".h5");
    const Result r = run(0, "gen --out " + p + " --sequences 30 --features 4 --min-length 3 --max-length 9 --classes 3");
    EXPECT_EQ(r.rc, 0) << r.output;
    return p;
  }();
  std::filesystem::copy_file(pristine, d / name, std::filesystem::copy_options::overwrite_existing);
  return d / name;
}

std::string train_args(const Scratch& d, const std::string& data, const std::string& extra = "") {
  return "train --data " + data + " --out " + d / "out" + " --epochs 1 --hidden 4 " + extra;
}

std::vector<Case> cases() {
  return {
      {"missing file", [](const Scratch& d) { return train_args(d, d / "nope.h5"); }, {"nope.h5", "hint:"}},
      {"not HDF5",
       [](const Scratch& d) {
         std::ofstream(d / "text.h5") << "this is not an HDF5 file\n";
         return train_args(d, d / "text.h5");
       },
       {"text.h5", "HDF5", "hint:"}},
      {"missing /labels",
       [](const Scratch& d) {
         const std::string f = good_file(d, "a.h5");
         damage(f, [](hid_t h) { H5Ldelete(h, "/labels", H5P_DEFAULT); });
         return train_args(d, f);
       },
       {"a.h5", "labels", "hint:"}},
      {"zero-length sequence",
       [](const Scratch& d) {
         const std::string f = good_file(d, "a.h5");
         damage(f, [](hid_t h) {
           // offsets[5] = offsets[4]: sequence 4 becomes empty (and 5 longer).
           const hid_t ds = H5Dopen2(h, "/offsets", H5P_DEFAULT);
           std::vector<int64_t> off(31);
           H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, off.data());
           H5Dclose(ds);
           write_element<int64_t>(h, "/offsets", H5T_NATIVE_INT64, {5}, off[4]);
         });
         return train_args(d, f);
       },
       {"a.h5", "offsets", "4", "hint:"}},
      {"label out of range",
       [](const Scratch& d) {
         const std::string f = good_file(d, "a.h5");
         damage(f, [](hid_t h) { write_element<int32_t>(h, "/labels", H5T_NATIVE_INT32, {17}, 7); });
         return train_args(d, f);
       },
       {"a.h5", "labels", "17", "hint:"}},
      {"NaN feature",
       [](const Scratch& d) {
         const std::string f = good_file(d, "a.h5");
         damage(f, [](hid_t h) { write_element<float>(h, "/features", H5T_NATIVE_FLOAT, {20, 2}, NAN); });
         return train_args(d, f);
       },
       {"a.h5", "features", "hint:"}},
      {"validation features differ",
       [](const Scratch& d) {
         const std::string t = good_file(d, "a.h5");
         const Result r = run(0, "gen --out " + d / "v.h5" + " --sequences 10 --features 5 --min-length 3 --max-length 9 --classes 3");
         EXPECT_EQ(r.rc, 0);
         return train_args(d, t, "--val " + d / "v.h5");
       },
       {"v.h5", "features", "hint:"}},
      {"bad option value",
       [](const Scratch& d) { return train_args(d, good_file(d, "a.h5"), "--hidden -3"); },
       {"--hidden", "hint:"}},
      {"unknown option",
       [](const Scratch& d) { return train_args(d, good_file(d, "a.h5"), "--hiddne 3"); },
       {"hiddne", "hint:"}},
      {"unwritable output",
       [](const Scratch& d) {
         const std::string f = good_file(d, "a.h5");
         std::ofstream(d / "blocker") << "a file where the output folder's parent should be\n";
         return "train --data " + f + " --out " + d / "blocker/run --epochs 1 --hidden 4";
       },
       {"blocker", "hint:"}},
      {"missing checkpoint",
       [](const Scratch& d) { return "eval --checkpoint " + d / "none.h5" + " --data " + good_file(d, "a.h5"); },
       {"none.h5", "hint:"}},
      {"data file as checkpoint",
       [](const Scratch& d) {
         const std::string f = good_file(d, "a.h5");
         return "eval --checkpoint " + f + " --data " + f;
       },
       {"a.h5", "checkpoint", "hint:"}},
  };
}

}  // namespace

TEST(BadInput, EveryRankExitsTwoWithAClearMessage) {
  for (int np : {1, 3}) {
    for (const Case& c : cases()) {
      Scratch d;
      const std::string args = c.prepare(d);
      const Result r = run(np, args + " --quiet", 30);
      SCOPED_TRACE(c.name + " on " + std::to_string(np) + " ranks: ragtrain " + args + "\n" + r.output);
      EXPECT_EQ(r.rc, 2);
      for (size_t k = 0; k < r.rank_rcs.size(); ++k) EXPECT_EQ(r.rank_rcs[k], 2) << "rank " << k;
      EXPECT_LT(r.seconds, 10.0);
      for (const std::string& s : c.expect) EXPECT_TRUE(contains(r.output, s)) << "message lacks '" << s << "'";
      EXPECT_FALSE(contains(r.output, "core dumped"));
      EXPECT_FALSE(std::filesystem::exists(d / "out")) << "a failed run left an output folder";
    }
  }
}

TEST(BadInput, InspectExitsTwoOnInvalidAndZeroOnValid) {
  Scratch d;
  const std::string f = good_file(d, "a.h5");
  const Result ok = run(0, "inspect " + f);
  EXPECT_EQ(ok.rc, 0) << ok.output;
  EXPECT_TRUE(contains(ok.output, "30")) << ok.output;
  damage(f, [](hid_t h) { write_element<int32_t>(h, "/labels", H5T_NATIVE_INT32, {3}, -1); });
  const Result bad = run(0, "inspect " + f);
  EXPECT_EQ(bad.rc, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "labels")) << bad.output;
}
