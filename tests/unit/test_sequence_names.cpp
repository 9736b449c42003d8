// Sequence names (/names, optional in format v1): written by write_dataset, found by read_dataset_info, read and
// checked by read_sequence_names and inspect, in the forms h5py writes (fixed-length bytes, variable-length str).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <sstream>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/h5.hpp"
#include "ragtrain/data/inspect.hpp"
#include "ragtrain/data/names.hpp"
#include "ragtrain/data/ragged_data.hpp"

#include "unit_test_util.hpp"

using namespace ragtrain;
using ragtrain::test::expect_user_error;
using ragtrain::test::TempDir;

namespace {

// Three sequences of one feature, two classes, no names.
RaggedData three_sequences() {
  RaggedData d;
  d.num_features = 1;
  d.num_outputs = 2;
  d.offsets = {0, 2, 3, 6};
  d.features = {1, 2, 3, 4, 5, 6};
  d.labels = {0, 1, 0};
  return d;
}

// Adds /names to a file written without them, as another writer (h5py) would: fixed-length NUL-padded strings of
// `width` bytes (0: the longest name), or variable-length strings; `cset` ASCII as numpy's bytes, UTF-8 as str.
void add_names(const std::string& path, const std::vector<std::string>& names, bool variable, size_t width = 0,
               H5T_cset_t cset = H5T_CSET_ASCII, std::vector<hsize_t> dims = {}) {
  H5Handle file = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  ASSERT_TRUE(file);
  if (dims.empty()) dims = {names.size()};
  H5Handle space = h5_space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  H5Handle type = h5_type(H5Tcopy(H5T_C_S1));
  H5Tset_cset(type.get(), cset);
  if (variable) {
    H5Tset_size(type.get(), H5T_VARIABLE);
    std::vector<const char*> ptrs;
    for (const std::string& s : names) ptrs.push_back(s.c_str());
    H5Handle d = h5_dataset(H5Dcreate2(file.get(), "/names", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(H5Dwrite(d.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), 0);
  } else {
    for (const std::string& s : names) width = std::max(width, s.size());
    H5Tset_size(type.get(), width);
    H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
    std::string buf(names.size() * width, '\0');
    for (size_t i = 0; i < names.size(); ++i) buf.replace(i * width, names[i].size(), names[i]);
    H5Handle d = h5_dataset(H5Dcreate2(file.get(), "/names", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(H5Dwrite(d.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), 0);
  }
}

std::vector<std::string> names_of(const std::string& path) {
  const DatasetInfo info = read_dataset_info(path, MPI_COMM_SELF);
  EXPECT_TRUE(info.has_names);
  return read_sequence_names(info, MemoryBudget::machine());
}

}  // namespace

TEST(SequenceNames, WrittenReadBackAndShownByInspect) {
  TempDir tmp;
  RaggedData d = three_sequences();
  d.names = {"walk_000.csv", "émeu, \"quoted\"", "x"};   // UTF-8, a comma and quotes: predict quotes them
  const std::string path = tmp.file("named.h5");
  write_dataset(path, d);
  EXPECT_EQ(names_of(path), d.names);

  const DatasetReport r = inspect_dataset(path);
  std::ostringstream out;
  print_report(r, out);
  EXPECT_NE(out.str().find("names            walk_000.csv .. x\n"), std::string::npos) << out.str();

  // The stored type: fixed-length UTF-8, as wide as the longest name (what parallel HDF5 reads as one block).
  H5Handle file = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  H5Handle dset = h5_dataset(H5Dopen2(file.get(), "/names", H5P_DEFAULT));
  H5Handle type = h5_type(H5Dget_type(dset.get()));
  EXPECT_EQ(H5Tis_variable_str(type.get()), 0);
  EXPECT_EQ(H5Tget_cset(type.get()), H5T_CSET_UTF8);
  EXPECT_EQ(H5Tget_size(type.get()), d.names[1].size());
}

TEST(SequenceNames, AFileWithoutNamesStaysValidAndHasNone) {
  TempDir tmp;
  const std::string path = tmp.file("plain.h5");
  write_dataset(path, three_sequences());
  EXPECT_FALSE(read_dataset_info(path, MPI_COMM_SELF).has_names);
  std::ostringstream out;
  print_report(inspect_dataset(path), out);
  EXPECT_EQ(out.str().find("names"), std::string::npos) << out.str();
}

// h5py's two simple ways: numpy bytes (fixed length, ASCII character set, NUL-padded; a name filling the width has
// no NUL) and Python str with h5py.string_dtype() (variable length, UTF-8).
TEST(SequenceNames, FixedAndVariableLengthAsH5pyWritesThem) {
  TempDir tmp;
  const std::vector<std::string> names = {"a", "bbbb", "cc"};
  for (bool variable : {false, true}) {
    SCOPED_TRACE(variable ? "variable length" : "fixed length");
    const std::string path = tmp.file(variable ? "v.h5" : "f.h5");
    write_dataset(path, three_sequences());
    add_names(path, names, variable, 0, variable ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
    EXPECT_EQ(names_of(path), names);
  }
  // Wider than the longest name: the padding is not part of the name.
  const std::string wide = tmp.file("wide.h5");
  write_dataset(wide, three_sequences());
  add_names(wide, names, false, 16);
  EXPECT_EQ(names_of(wide), names);
}

TEST(SequenceNames, HeaderChecksOfReadDatasetInfo) {
  TempDir tmp;
  const auto with = [&](const std::string& name, auto&& put) {
    const std::string path = tmp.file(name);
    write_dataset(path, three_sequences());
    put(path);
    return path;
  };
  const std::string short_list = with("short.h5", [](const std::string& p) { add_names(p, {"a", "b"}, false); });
  expect_user_error([&] { read_dataset_info(short_list, MPI_COMM_SELF); },
                    {"short.h5", "/names has 2 names", "3 sequences"});
  const std::string two_d =
      with("twod.h5", [](const std::string& p) { add_names(p, {"a", "b", "c"}, false, 0, H5T_CSET_ASCII, {3, 1}); });
  expect_user_error([&] { read_dataset_info(two_d, MPI_COMM_SELF); }, {"twod.h5", "/names", "2 dimension(s)"});
  const std::string numbers = with("numbers.h5", [](const std::string& p) {
    H5Handle file = h5_file(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    const hsize_t n = 3;
    const int64_t ids[3] = {7, 8, 9};
    H5Handle space = h5_space(H5Screate_simple(1, &n, nullptr));
    H5Handle d = h5_dataset(
        H5Dcreate2(file.get(), "/names", H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Dwrite(d.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids);
  });
  expect_user_error([&] { read_dataset_info(numbers, MPI_COMM_SELF); }, {"numbers.h5", "/names", "int64", "strings"});
}

// The names themselves: what read_sequence_names (predict) and inspect refuse, each naming the sequence.
TEST(SequenceNames, ValueChecksOfReadAndInspect) {
  TempDir tmp;
  struct Case {
    const char* what;
    std::vector<std::string> names;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"twice", {"a", "b", "a"}, {"sequences 0 and 2 have the same name \"a\""}},
      {"empty", {"a", "", "c"}, {"the name of sequence 1 is empty"}},
      {"line end", {"a", "b\nc", "d"}, {"the name of sequence 1 holds the control character 10"}},
      {"not UTF-8", {"a", "b", "\xC3("}, {"the name of sequence 2 is not valid UTF-8"}},
      {"too long", {"a", std::string(kMaxNameBytes + 1, 'x'), "c"}, {"sequence 1 is 1025 bytes long"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = tmp.file(std::string(c.what) + ".h5");
    write_dataset(path, three_sequences());
    add_names(path, c.names, true, 0, H5T_CSET_UTF8);
    std::vector<std::string> needles = c.needles;
    needles.insert(needles.begin(), path + ": dataset /names");
    const DatasetInfo info = read_dataset_info(path, MPI_COMM_SELF);   // the header is fine
    expect_user_error([&] { read_sequence_names(info, MemoryBudget::machine()); }, needles);
    expect_user_error([&] { inspect_dataset(path); }, needles);
    // The writer holds ragtrain's own files to the same rules.
    RaggedData d = three_sequences();
    d.names = c.names;
    expect_user_error([&] { write_dataset(tmp.file("out.h5"), d); }, {"out.h5: dataset /names"});
  }
}

TEST(SequenceNames, ReadingThemRespectsTheMemoryBudget) {
  TempDir tmp;
  const std::string path = tmp.file("wide.h5");
  write_dataset(path, three_sequences());
  add_names(path, {"a", "b", "c"}, false, 1 << 20);   // 1 MiB per name as declared
  const DatasetInfo info = read_dataset_info(path, MPI_COMM_SELF);
  expect_user_error([&] { read_sequence_names(info, MemoryBudget::of("1M", 1)); }, {"wide.h5", "/names"});
}

TEST(SequenceNames, IndexNames) {
  EXPECT_EQ(index_names(3), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_TRUE(index_names(0).empty());
}
