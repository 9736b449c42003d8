// Tests of the data module: writer, header reader, shard reader (one rank), synthetic data, .ts import, inspect.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/h5.hpp"
#include "ragtrain/data/importers.hpp"
#include "ragtrain/data/inspect.hpp"
#include "ragtrain/data/shard.hpp"
#include "ragtrain/data/synthetic.hpp"

#include "unit_test_util.hpp"

namespace fs = std::filesystem;
using namespace ragtrain;
using ragtrain::test::expect_user_error;
using ragtrain::test::TempDir;

namespace {

RaggedData small_classification() {
  RaggedData d;
  d.task = Task::Classification;
  d.num_features = 2;
  d.num_outputs = 3;
  d.offsets = {0, 3, 4, 8, 10};
  for (int i = 0; i < 10 * 2; ++i) d.features.push_back(0.5f * static_cast<float>(i) - 3.0f);
  d.labels = {2, 0, 1, 2};
  d.class_names = {"cat", "dog", "émeu"};
  d.source = "unit test";
  return d;
}

// A v1 file written with the raw HDF5 API, so that each field can be broken on purpose.
struct RawFile {
  bool has_features = true, has_offsets = true, has_labels = true;
  hid_t features_type = H5T_IEEE_F32LE, offsets_type = H5T_STD_I64LE, labels_type = H5T_STD_I32LE;
  std::vector<hsize_t> features_dims = {7, 2};
  std::vector<double> features = std::vector<double>(14, 0.25);
  std::vector<int64_t> offsets = {0, 3, 5, 7};
  std::vector<hsize_t> labels_dims = {3};
  std::vector<double> labels = {0, 1, 1};
  bool has_format = true, fixed_strings = false, has_task = true, has_num_classes = true;
  std::string format = "ragtrain-ragged", task = "classification";
  int64_t version = 1, num_classes = 2;
  hid_t int_attr_type = H5T_STD_I64LE;
};

void put_string(hid_t file, const char* name, const std::string& value, bool fixed) {
  H5Handle type = h5_type(H5Tcopy(H5T_C_S1));
  H5Handle space = h5_space(H5Screate(H5S_SCALAR));
  if (fixed) {
    H5Tset_size(type.get(), value.size());
    H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
    H5Handle a = h5_attribute(H5Acreate2(file, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
    H5Awrite(a.get(), type.get(), value.data());
  } else {
    H5Tset_size(type.get(), H5T_VARIABLE);
    H5Handle a = h5_attribute(H5Acreate2(file, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
    const char* p = value.c_str();
    H5Awrite(a.get(), type.get(), &p);
  }
}

void put_int(hid_t file, const char* name, int64_t value, hid_t file_type) {
  H5Handle space = h5_space(H5Screate(H5S_SCALAR));
  H5Handle a = h5_attribute(H5Acreate2(file, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  H5Awrite(a.get(), H5T_NATIVE_INT64, &value);
}

template <class T>
void put_dataset(hid_t file, const char* name, hid_t file_type, hid_t mem_type, const std::vector<hsize_t>& dims,
                 const std::vector<T>& values) {
  H5Handle space = h5_space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  H5Handle d = h5_dataset(H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_GE(H5Dwrite(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0) << name;
}

void write_raw(const std::string& path, const RawFile& r) {
  H5Handle file = h5_file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_TRUE(file);
  const hid_t f = file.get();
  if (r.has_format) put_string(f, "format", r.format, r.fixed_strings);
  put_int(f, "version", r.version, r.int_attr_type);
  if (r.has_task) put_string(f, "task", r.task, r.fixed_strings);
  if (r.has_num_classes) put_int(f, "num_classes", r.num_classes, r.int_attr_type);
  if (r.has_features) put_dataset(f, "/features", r.features_type, H5T_NATIVE_DOUBLE, r.features_dims, r.features);
  if (r.has_offsets)
    put_dataset(f, "/offsets", r.offsets_type, H5T_NATIVE_INT64, {static_cast<hsize_t>(r.offsets.size())}, r.offsets);
  if (r.has_labels) put_dataset(f, "/labels", r.labels_type, H5T_NATIVE_DOUBLE, r.labels_dims, r.labels);
}

std::vector<int64_t> all_indices(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

std::string jv_dir() {
  const char* env = std::getenv("RAGTRAIN_JV_DIR");
  return env != nullptr ? env : "inputs/japanese-vowels";   // the embedded copy; tests run from the repo root
}

}  // namespace

TEST(DataFormat, WriteThenReadInfoAndShard) {
  TempDir tmp;
  const std::string path = tmp.file("small.h5");
  const RaggedData d = small_classification();
  write_dataset(path, d);

  const DatasetInfo info = read_dataset_info(path, MPI_COMM_SELF);
  EXPECT_EQ(info.path, path);
  EXPECT_EQ(info.task, Task::Classification);
  EXPECT_EQ(info.num_sequences, 4);
  EXPECT_EQ(info.num_features, 2);
  EXPECT_EQ(info.num_outputs, 3);
  EXPECT_EQ(info.total_timesteps, 10);
  EXPECT_EQ(info.offsets, d.offsets);
  EXPECT_EQ(info.lengths(), (std::vector<int64_t>{3, 1, 4, 2}));
  EXPECT_EQ(info.class_names, d.class_names);

  const std::vector<int64_t> want = {3, 0, 2};
  const Shard s = read_shard(info, want, MPI_COMM_SELF);
  EXPECT_EQ(s.indices, want);
  EXPECT_EQ(s.offsets, (std::vector<int64_t>{0, 2, 5, 9}));
  ASSERT_EQ(s.features.size(), 9u * 2u);
  for (int64_t p = 0; p < s.size(); ++p) {
    const int64_t g = want[static_cast<size_t>(p)];
    EXPECT_EQ(s.labels[static_cast<size_t>(p)], d.labels[static_cast<size_t>(g)]);
    for (int64_t v = 0; v < s.length(p) * 2; ++v) EXPECT_EQ(s.x(p)[v], d.features[static_cast<size_t>(d.offsets[static_cast<size_t>(g)] * 2 + v)]);
  }
  // No temporary file is left next to the result.
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);
}

// A data set without labels (for predict): written without task attributes and /labels, read back with
// labeled == false, its features whole; inspect reports it; train and eval's check refuses it, naming the file.
TEST(DataFormat, UnlabeledRoundTripInspectAndRequireLabels) {
  TempDir tmp;
  const std::string path = tmp.file("unlabeled.h5");
  RaggedData d = small_classification();
  d.labeled = false;
  d.labels.clear();
  d.class_names.clear();
  d.num_outputs = 0;
  write_dataset(path, d);
  {
    H5Handle file = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    ASSERT_TRUE(file);
    EXPECT_EQ(H5Lexists(file.get(), "/labels", H5P_DEFAULT), 0);
    for (const char* attr : {"task", "num_classes", "num_outputs", "class_names"})
      EXPECT_EQ(H5Aexists(file.get(), attr), 0) << attr;
  }

  const DatasetInfo info = read_dataset_info(path, MPI_COMM_SELF);
  EXPECT_FALSE(info.labeled);
  EXPECT_EQ(info.num_outputs, 0);
  EXPECT_EQ(info.offsets, d.offsets);
  const Shard s = read_shard(info, {2, 0}, MPI_COMM_SELF);
  EXPECT_FALSE(s.labeled);
  EXPECT_TRUE(s.labels.empty() && s.targets.empty());
  ASSERT_EQ(s.features.size(), 7u * 2u);
  for (int64_t v = 0; v < 4 * 2; ++v) EXPECT_EQ(s.x(0)[v], d.features[static_cast<size_t>(4 * 2 + v)]);
  for (int64_t v = 0; v < 3 * 2; ++v) EXPECT_EQ(s.x(1)[v], d.features[static_cast<size_t>(v)]);

  const DatasetReport r = inspect_dataset(path);
  EXPECT_FALSE(r.labeled);
  EXPECT_TRUE(r.class_counts.empty());
  std::ostringstream out;
  print_report(r, out);
  EXPECT_NE(out.str().find("task             none: no labels"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("classes"), std::string::npos) << out.str();

  expect_user_error([&] { require_labels(info, "--data", "training"); }, {"--data", path, "no labels", "training"});
  write_dataset(tmp.file("labeled.h5"), small_classification());
  require_labels(read_dataset_info(tmp.file("labeled.h5"), MPI_COMM_SELF), "--data", "training");   // no throw
}

// What an h5py user writes without labels is accepted; attributes that describe labels a file lacks are not.
TEST(DataFormat, RawFileWithoutLabels) {
  TempDir tmp;
  const std::string path = tmp.file("raw.h5");
  RawFile r;
  r.has_labels = r.has_task = r.has_num_classes = false;
  write_raw(path, r);
  const DatasetInfo info = read_dataset_info(path, MPI_COMM_SELF);
  EXPECT_FALSE(info.labeled);
  EXPECT_EQ(info.num_sequences, 3);
  EXPECT_EQ(inspect_dataset(path).num_sequences, 3);

  r.has_num_classes = true;   // num_classes without /labels: it contradicts the missing labels
  write_raw(path, r);
  expect_user_error([&] { read_dataset_info(path, MPI_COMM_SELF); }, {"'num_classes'", "no /labels"});
  r.has_num_classes = false;
  r.has_labels = true;        // /labels without task: which kind of labels?
  write_raw(path, r);
  expect_user_error([&] { read_dataset_info(path, MPI_COMM_SELF); }, {"'task'", "missing"});
  r.has_labels = false;
  r.has_task = true;          // task without /labels: a damaged or unfinished file
  write_raw(path, r);
  expect_user_error([&] { read_dataset_info(path, MPI_COMM_SELF); }, {"/labels", "missing", "classification"});
}

TEST(DataFormat, SyntheticRoundTripWholeFile) {
  TempDir tmp;
  SyntheticSpec spec;
  spec.sequences = 37;
  spec.features = 5;
  spec.min_length = 1;
  spec.max_length = 9;
  spec.classes = 4;
  const RaggedData d = make_synthetic(spec);
  write_dataset(tmp.file("syn.h5"), d);
  const DatasetInfo info = read_dataset_info(tmp.file("syn.h5"), MPI_COMM_SELF);
  const Shard s = read_shard(info, all_indices(info.num_sequences), MPI_COMM_SELF);
  EXPECT_EQ(s.offsets, d.offsets);
  EXPECT_EQ(s.features, d.features);
  EXPECT_EQ(s.labels, d.labels);
  EXPECT_TRUE(info.class_names.empty());
}

TEST(DataFormat, RegressionRoundTrip) {
  TempDir tmp;
  SyntheticSpec spec;
  spec.task = Task::Regression;
  spec.sequences = 20;
  spec.features = 4;
  spec.outputs = 3;
  spec.min_length = 2;
  spec.max_length = 6;
  const RaggedData d = make_synthetic(spec);
  ASSERT_EQ(d.targets.size(), 60u);
  write_dataset(tmp.file("reg.h5"), d);
  const DatasetInfo info = read_dataset_info(tmp.file("reg.h5"), MPI_COMM_SELF);
  EXPECT_EQ(info.task, Task::Regression);
  EXPECT_EQ(info.num_outputs, 3);
  const Shard s = read_shard(info, {19, 4}, MPI_COMM_SELF);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(s.target(0)[k], d.targets[19 * 3 + k]);
    EXPECT_EQ(s.target(1)[k], d.targets[4 * 3 + k]);
  }
  EXPECT_TRUE(s.labels.empty());
  const DatasetReport r = inspect_dataset(tmp.file("reg.h5"));
  EXPECT_EQ(r.num_outputs, 3);
  EXPECT_TRUE(r.class_counts.empty());
}

TEST(DataFormat, EmptyShardOnOneRank) {
  TempDir tmp;
  write_dataset(tmp.file("small.h5"), small_classification());
  const DatasetInfo info = read_dataset_info(tmp.file("small.h5"), MPI_COMM_SELF);
  const Shard s = read_shard(info, {}, MPI_COMM_SELF);
  EXPECT_EQ(s.size(), 0);
  EXPECT_EQ(s.timesteps(), 0);
}

TEST(DataFormat, ReadShardRejectsBadIndicesAfterTheRead) {
  TempDir tmp;
  write_dataset(tmp.file("small.h5"), small_classification());
  const DatasetInfo info = read_dataset_info(tmp.file("small.h5"), MPI_COMM_SELF);
  EXPECT_THROW(read_shard(info, {0, 4}, MPI_COMM_SELF), InternalError);
  EXPECT_THROW(read_shard(info, {-1}, MPI_COMM_SELF), InternalError);
  EXPECT_THROW(read_shard(info, {2, 1, 2}, MPI_COMM_SELF), InternalError);
}

TEST(DataFormat, RawFileWithFixedStringsAndNarrowIntegersIsAccepted) {
  TempDir tmp;
  RawFile r;
  r.fixed_strings = true;
  r.int_attr_type = H5T_STD_U8BE;
  write_raw(tmp.file("raw.h5"), r);
  const DatasetInfo info = read_dataset_info(tmp.file("raw.h5"), MPI_COMM_SELF);
  EXPECT_EQ(info.num_sequences, 3);
  EXPECT_EQ(info.num_outputs, 2);
  EXPECT_EQ(info.lengths(), (std::vector<int64_t>{3, 2, 2}));
}

TEST(DataFormat, RejectsBadHeaders) {
  struct Case {
    const char* name;
    std::function<void(RawFile&)> breakit;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"missing /features", [](RawFile& r) { r.has_features = false; }, {"/features", "missing"}},
      {"missing /offsets", [](RawFile& r) { r.has_offsets = false; }, {"/offsets", "missing"}},
      {"missing /labels", [](RawFile& r) { r.has_labels = false; }, {"/labels", "missing"}},
      {"float64 features", [](RawFile& r) { r.features_type = H5T_IEEE_F64LE; }, {"/features", "float64", "float32"}},
      {"int32 offsets", [](RawFile& r) { r.offsets_type = H5T_STD_I32LE; }, {"/offsets", "int32", "int64"}},
      {"float labels", [](RawFile& r) { r.labels_type = H5T_IEEE_F32LE; }, {"/labels", "float32", "int32"}},
      {"1-D features", [](RawFile& r) { r.features_dims = {14}; }, {"/features", "dimension"}},
      {"2-D labels", [](RawFile& r) { r.labels_dims = {3, 1}; }, {"/labels", "dimension"}},
      {"offsets start at 1", [](RawFile& r) { r.offsets = {1, 3, 5, 7}; }, {"/offsets", "offsets[0]"}},
      {"decreasing offsets", [](RawFile& r) { r.offsets = {0, 5, 3, 7}; }, {"/offsets", "offsets[2]"}},
      {"zero-length sequence", [](RawFile& r) { r.offsets = {0, 3, 3, 7}; }, {"/offsets", "sequence 1", "empty"}},
      {"last offset != rows", [](RawFile& r) { r.offsets = {0, 3, 5, 6}; }, {"/offsets", "6", "7 rows"}},
      {"labels count != N",
       [](RawFile& r) {
         r.labels_dims = {2};
         r.labels = {0, 1};
       },
       {"/labels", "2 labels", "3 sequences"}},
      {"no sequences", [](RawFile& r) { r.offsets = {0}; }, {"/offsets", "at least one sequence"}},
      {"missing format", [](RawFile& r) { r.has_format = false; }, {"'format'", "missing"}},
      {"wrong format", [](RawFile& r) { r.format = "something-else"; }, {"'format'", "something-else"}},
      {"wrong version", [](RawFile& r) { r.version = 2; }, {"'version'", "2"}},
      {"unknown task", [](RawFile& r) { r.task = "ranking"; }, {"'task'", "ranking"}},
      {"one class", [](RawFile& r) { r.num_classes = 1; }, {"'num_classes'"}},
  };
  TempDir tmp;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RawFile r;
    c.breakit(r);
    const std::string path = tmp.file("bad.h5");
    write_raw(path, r);
    expect_user_error([&] { read_dataset_info(path, MPI_COMM_SELF); }, c.needles);
    expect_user_error([&] { inspect_dataset(path); }, c.needles);
  }
}

TEST(DataFormat, RejectsBadValuesWhenRead) {
  struct Case {
    const char* name;
    std::function<void(RawFile&)> breakit;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"label >= classes", [](RawFile& r) { r.labels = {0, 2, 1}; }, {"/labels", "sequence 1", "label 2"}},
      {"negative label", [](RawFile& r) { r.labels = {0, 1, -1}; }, {"/labels", "sequence 2", "label -1"}},
      {"NaN feature", [](RawFile& r) { r.features[11] = std::numeric_limits<double>::quiet_NaN(); },
       {"/features", "sequence 2", "timestep 0", "feature 1"}},
      {"infinite feature", [](RawFile& r) { r.features[0] = std::numeric_limits<double>::infinity(); },
       {"/features", "sequence 0"}},
  };
  TempDir tmp;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RawFile r;
    c.breakit(r);
    const std::string path = tmp.file("bad.h5");
    write_raw(path, r);
    const DatasetInfo info = read_dataset_info(path, MPI_COMM_SELF);   // the header is fine
    expect_user_error([&] { read_shard(info, all_indices(3), MPI_COMM_SELF); }, c.needles);
    expect_user_error([&] { inspect_dataset(path); }, c.needles);
  }
}

TEST(DataFormat, RejectsFilesThatAreNotThere) {
  TempDir tmp;
  const std::string text = tmp.file("notes.h5");
  std::ofstream(text) << "just some text\n";
  expect_user_error([&] { read_dataset_info(text, MPI_COMM_WORLD); }, {text, "not an HDF5 file"});
  const std::string ts = tmp.file("data.ts");
  std::ofstream(ts) << "@data\n";
  expect_user_error([&] { read_dataset_info(ts, MPI_COMM_SELF); }, {ts, "not an HDF5 file"});
  const std::string missing = tmp.file("missing.h5");
  expect_user_error([&] { read_dataset_info(missing, MPI_COMM_WORLD); }, {missing, "no such file"});
  expect_user_error([&] { read_dataset_info(tmp.path().string(), MPI_COMM_SELF); }, {"folder"});
}

// Found by tests/fuzz: an HDF5 file whose global heap (where the string attributes live) is damaged made
// H5Aread fail, which was an InternalError (exit 3); it is the file's fault: UserError (exit 2) naming it.
TEST(DataFormat, DamagedAttributeIsAUserError) {
  const std::string path = "tests/fuzz/corpus/h5/regress_internal_error_attr_read.h5";   // from the repo root
  for (const auto& read : std::vector<std::function<void()>>{[&] { read_dataset_info(path, MPI_COMM_SELF); },
                                                             [&] { inspect_dataset(path); }})
    expect_user_error(read, {path, "attribute 'format' could not be read", "global heap"});
}

TEST(DataFormat, WriterIsAtomicAndChecksItsInput) {
  TempDir tmp;
  const std::string path = tmp.file("out.h5");
  write_dataset(path, small_classification());
  RaggedData bad = small_classification();
  bad.features[9] = std::numeric_limits<float>::quiet_NaN();
  expect_user_error([&] { write_dataset(path, bad); }, {"sequence 2", "/features"});
  bad = small_classification();
  bad.labels[1] = 3;
  expect_user_error([&] { write_dataset(path, bad); }, {"sequence 1", "label 3"});
  bad = small_classification();
  bad.offsets = {0, 3, 3, 8, 10};
  expect_user_error([&] { write_dataset(path, bad); }, {"sequence 1", "empty"});
  // The earlier file is intact and alone.
  EXPECT_EQ(read_dataset_info(path, MPI_COMM_SELF).num_sequences, 4);
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);

  expect_user_error([&] { write_dataset(tmp.file("no/such/folder/x.h5"), small_classification()); },
                    {"no/such/folder", "does not exist"});
  if (::geteuid() != 0) {   // root writes anywhere
    fs::create_directory(tmp.file("ro"));
    fs::permissions(tmp.file("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    expect_user_error([&] { write_dataset(tmp.file("ro/x.h5"), small_classification()); }, {"not writable"});
    fs::permissions(tmp.file("ro"), fs::perms::owner_all);
  }
}

// Generated on several threads (blocks of 256 sequences), the data are the one-thread data, bit for bit.
TEST(DataSynthetic, TheSameBitsOnAnyNumberOfThreads) {
  for (Task task : {Task::Classification, Task::Regression}) {
    SyntheticSpec spec;
    spec.sequences = 700;
    spec.features = 5;
    spec.min_length = 1;
    spec.max_length = 30;
    spec.task = task;
    spec.outputs = 3;
    const RaggedData one = make_synthetic(spec, 1), four = make_synthetic(spec, 4);
    EXPECT_EQ(one.offsets, four.offsets);
    EXPECT_EQ(one.features, four.features);
    EXPECT_EQ(one.labels, four.labels);
    EXPECT_EQ(one.targets, four.targets);
    EXPECT_EQ(one.features.size(), static_cast<size_t>(one.offsets.back() * 5));
  }
}

TEST(DataSynthetic, DeterministicForASeed) {
  SyntheticSpec spec;
  spec.sequences = 50;
  spec.features = 6;
  spec.min_length = 10;
  spec.max_length = 20;
  spec.classes = 5;
  const RaggedData a = make_synthetic(spec), b = make_synthetic(spec);
  EXPECT_EQ(a.offsets, b.offsets);
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(a.labels, b.labels);
  spec.seed = 2;
  const RaggedData c = make_synthetic(spec);
  EXPECT_NE(a.features, c.features);
  EXPECT_NE(a.labels, c.labels);

  std::vector<int> per_class(5, 0);
  for (int32_t l : a.labels) ++per_class[static_cast<size_t>(l)];
  EXPECT_EQ(per_class, std::vector<int>(5, 10));
  for (int64_t i = 0; i < a.num_sequences(); ++i) {
    const int64_t len = a.offsets[static_cast<size_t>(i + 1)] - a.offsets[static_cast<size_t>(i)];
    EXPECT_GE(len, 10);
    EXPECT_LE(len, 20);
  }
  for (float v : a.features) EXPECT_LT(std::fabs(v), 5.0f);

  spec.task = Task::Regression;
  spec.outputs = 2;
  EXPECT_EQ(make_synthetic(spec).targets, make_synthetic(spec).targets);
  spec.outputs = 7;
  EXPECT_THROW(make_synthetic(spec), UserError);
}

// The class must be visible over time but not from one timestep: a nearest-class-mean rule on the time
// average of a sequence is nearly always right, on a single timestep it is close to chance.
TEST(DataSynthetic, ClassesNeedMoreThanOneTimestep) {
  SyntheticSpec spec;
  spec.sequences = 400;
  spec.features = 36;
  spec.classes = 10;
  const RaggedData d = make_synthetic(spec);
  const int64_t F = d.num_features, C = d.num_outputs, n = d.num_sequences();
  std::vector<double> mean(static_cast<size_t>(C * F), 0.0), seq_mean(static_cast<size_t>(n * F), 0.0);
  std::vector<double> count(static_cast<size_t>(C), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t lo = d.offsets[static_cast<size_t>(i)], hi = d.offsets[static_cast<size_t>(i + 1)];
    for (int64_t t = lo; t < hi; ++t)
      for (int64_t f = 0; f < F; ++f)
        seq_mean[static_cast<size_t>(i * F + f)] += d.features[static_cast<size_t>(t * F + f)] / static_cast<double>(hi - lo);
    const auto c = static_cast<size_t>(d.labels[static_cast<size_t>(i)]);
    count[c] += 1;
    for (int64_t f = 0; f < F; ++f) mean[c * static_cast<size_t>(F) + static_cast<size_t>(f)] += seq_mean[static_cast<size_t>(i * F + f)];
  }
  for (int64_t c = 0; c < C; ++c)
    for (int64_t f = 0; f < F; ++f) mean[static_cast<size_t>(c * F + f)] /= count[static_cast<size_t>(c)];
  auto nearest = [&](const float* xf, const double* xd) {
    int64_t best = 0;
    double best_d = 1e300;
    for (int64_t c = 0; c < C; ++c) {
      double dist = 0;
      for (int64_t f = 0; f < F; ++f) {
        const double v = xf ? xf[f] : xd[f];
        dist += (v - mean[static_cast<size_t>(c * F + f)]) * (v - mean[static_cast<size_t>(c * F + f)]);
      }
      if (dist < best_d) best_d = dist, best = c;
    }
    return best;
  };
  int64_t right_avg = 0, right_step = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t y = d.labels[static_cast<size_t>(i)];
    right_avg += nearest(nullptr, seq_mean.data() + i * F) == y;
    right_step += nearest(d.features.data() + (d.offsets[static_cast<size_t>(i)] + 5) * F, nullptr) == y;
  }
  const double acc_avg = static_cast<double>(right_avg) / static_cast<double>(n);
  const double acc_step = static_cast<double>(right_step) / static_cast<double>(n);
  EXPECT_GT(acc_avg, 0.95);
  EXPECT_LT(acc_step, 0.7);   // 0.52 for this seed; chance is 0.1
}

TEST(DataTs, JapaneseVowelsTrainAndTest) {
  const std::string dir = jv_dir();
  if (!fs::exists(dir + "/JapaneseVowels_TRAIN.ts"))
    GTEST_SKIP() << "JapaneseVowels not found in " << dir << " (set RAGTRAIN_JV_DIR to the folder of the .ts files)";
  const RaggedData train = read_ts_file(dir + "/JapaneseVowels_TRAIN.ts");
  const RaggedData test = read_ts_file(dir + "/JapaneseVowels_TEST.ts");
  EXPECT_EQ(train.num_sequences(), 270);
  EXPECT_EQ(test.num_sequences(), 370);
  EXPECT_EQ(train.num_features, 12);
  EXPECT_EQ(test.num_features, 12);
  EXPECT_EQ(train.task, Task::Classification);
  EXPECT_EQ(train.num_outputs, 9);
  EXPECT_EQ(train.class_names, (std::vector<std::string>{"1", "2", "3", "4", "5", "6", "7", "8", "9"}));
  EXPECT_EQ(train.offsets.back(), 4274);
  EXPECT_EQ(test.offsets.back(), 5687);

  auto min_max = [](const RaggedData& d) {
    int64_t lo = INT64_MAX, hi = 0;
    for (int64_t i = 0; i < d.num_sequences(); ++i) {
      const int64_t len = d.offsets[static_cast<size_t>(i + 1)] - d.offsets[static_cast<size_t>(i)];
      lo = std::min(lo, len);
      hi = std::max(hi, len);
    }
    return std::make_pair(lo, hi);
  };
  EXPECT_EQ(min_max(train), std::make_pair(int64_t{7}, int64_t{26}));
  EXPECT_EQ(min_max(test), std::make_pair(int64_t{7}, int64_t{29}));

  std::vector<int> train_counts(9, 0), test_counts(9, 0);
  for (int32_t l : train.labels) ++train_counts[static_cast<size_t>(l)];
  for (int32_t l : test.labels) ++test_counts[static_cast<size_t>(l)];
  EXPECT_EQ(train_counts, std::vector<int>(9, 30));
  EXPECT_EQ(test_counts, (std::vector<int>{31, 35, 88, 44, 29, 24, 40, 50, 29}));

  // First series of TRAIN: 20 timesteps, label "1"; row t holds the 12 channels at time t.
  EXPECT_EQ(train.offsets[1], 20);
  EXPECT_EQ(train.labels[0], 0);
  EXPECT_FLOAT_EQ(train.features[0], 1.860936f);        // t 0, channel 0
  EXPECT_FLOAT_EQ(train.features[1], -0.207383f);       // t 0, channel 1
  EXPECT_FLOAT_EQ(train.features[12], 1.891651f);       // t 1, channel 0
  EXPECT_FLOAT_EQ(train.features[19 * 12 + 11], -0.175986f);   // t 19, channel 11
  EXPECT_EQ(test.offsets[1], 19);
  EXPECT_FLOAT_EQ(test.features[0], 1.635533f);

  // Converted, written and inspected, it reports the same numbers.
  TempDir tmp;
  write_dataset(tmp.file("jv.h5"), train);
  const DatasetReport r = inspect_dataset(tmp.file("jv.h5"));
  ASSERT_EQ(r.class_counts.size(), 9u);
  for (const auto& [c, n] : r.class_counts) EXPECT_EQ(n, 30) << "class " << c;
  EXPECT_EQ(r.class_names, train.class_names);
  EXPECT_EQ(r.total_timesteps, 4274);
  std::ostringstream out;
  print_report(r, out);
  EXPECT_NE(out.str().find("sequences (N)    270"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("min 7"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("max 26"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("#"), std::string::npos) << out.str();
}

// A file may declare far more classes than it holds (num_classes 2^31 - 1): the report lists the classes with
// sequences, in bounded time and memory; a usual set lists every class, the empty ones too.
TEST(DataInspect, ManyDeclaredClassesListOnlyThoseWithSequences) {
  DatasetReport r;
  r.path = "big.h5";
  r.num_sequences = 3;
  r.num_features = 2;
  r.num_outputs = 2147483647;
  r.lengths = {3, 4, 5};
  r.class_counts = {{0, 1}, {2147483646, 2}};
  std::ostringstream out;
  print_report(r, out);
  EXPECT_NE(out.str().find("class counts (the 2 of 2147483647 declared classes with sequences)\n     0         1\n"
                           "  2147483646         2\n"),
            std::string::npos)
      << out.str();
  r.num_outputs = 3;
  r.class_counts = {{0, 1}, {2, 2}};
  std::ostringstream small;
  print_report(r, small);
  EXPECT_NE(small.str().find("class counts\n     0         1\n     1         0\n     2         2\n"), std::string::npos)
      << small.str();
}

TEST(DataTs, RejectsBadFiles) {
  const std::string header = "# comment\n@problemName Toy\n@dimensions 2\n@classLabel true a b\n";
  struct Case {
    const char* name;
    std::string text;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"ragged channels", header + "@data\n1,2,3:4,5,6:a\n1,2:3:b\n", {":7:", "channel 1", "1 values", "channel 0 has 2"}},
      {"missing @data", header + "1,2:3,4:a\n", {":5:", "@data"}},
      {"repeated class label", "@dimensions 1\n@classLabel true a b a\n@data\n1,2:a\n", {":2:", "\"a\" twice"}},
      {"@classLabel neither true nor false", "@classLabel maybe a b\n@data\n1,2:a\n", {":1:", "true or false", "maybe"}},
      {"missing @data at end", header, {"no @data"}},
      {"unknown label", header + "@data\n1,2:3,4:c\n", {":6:", "\"c\""}},
      {"non-numeric value", header + "@data\n1,x2:3,4:a\n", {":6:", "channel 0", "\"x2\""}},
      {"missing value", header + "@data\n1,2:?,4:a\n", {":6:", "channel 1", "missing"}},
      {"time stamps", "@timeStamps true\n@classLabel true a b\n@data\n", {":1:", "time stamps"}},
      {"no class labels", "@problemName Toy\n@data\n1,2:a\n", {"@classLabel", "@classLabel false"}},
      {"a label on a series of a file without labels", "@dimensions 2\n@classLabel false\n@data\n1,2:3,4:a\n",
       {":4:", "3 channel(s)", "no label"}},
      {"wrong channel count", header + "@data\n1,2:a\n", {":6:", "1 channel", "expected 2"}},
      // Found by tests/fuzz: finite as double, inf as the float32 stored; and a count beyond int64.
      {"value beyond float32", header + "@data\n1e300,2:3,4:a\n", {":6:", "channel 0", "\"1e300\"", "float32"}},
      {"huge @dimensions", "@dimensions 1e300\n@classLabel true a b\n@data\n", {":1:", "@dimensions"}},
  };
  TempDir tmp;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = tmp.file("bad.ts");
    std::ofstream(path) << c.text;
    expect_user_error([&] { read_ts_file(path); }, c.needles);
  }
  expect_user_error([&] { read_ts_file(tmp.file("absent.ts")); }, {"absent.ts", "no such file"});

  // And a good one with CRLF line ends, blank lines and an unequal length.
  const std::string path = tmp.file("good.ts");
  std::ofstream(path) << header << "\r\n@data\r\n1,2,3:4,5,6:b\r\n\r\n7:8:a\r\n";
  const RaggedData d = read_ts_file(path);
  EXPECT_EQ(d.offsets, (std::vector<int64_t>{0, 3, 4}));
  EXPECT_EQ(d.features, (std::vector<float>{1, 4, 2, 5, 3, 6, 7, 8}));
  EXPECT_EQ(d.labels, (std::vector<int32_t>{1, 0}));
}

// @classLabel false (or @targetLabel false alone): series without a label field, a data set without labels.
TEST(DataTs, SeriesWithoutLabels) {
  for (const std::string& header : {std::string("@classLabel false\n"), std::string("@targetLabel false\n")}) {
    SCOPED_TRACE(header);
    std::istringstream in("@problemName Toy\n@dimensions 2\n" + header + "@data\n1,2,3:4,5,6\n7:8\n");
    const RaggedData d = parse_ts(in, "toy.ts");
    EXPECT_FALSE(d.labeled);
    EXPECT_EQ(d.num_outputs, 0);
    EXPECT_TRUE(d.labels.empty() && d.targets.empty() && d.class_names.empty());
    EXPECT_EQ(d.offsets, (std::vector<int64_t>{0, 3, 4}));
    EXPECT_EQ(d.features, (std::vector<float>{1, 4, 2, 5, 3, 6, 7, 8}));
  }
}

// A file saved with a UTF-8 byte order mark (some Windows editors add one) reads as without it, as CSV files do.
TEST(DataTs, ByteOrderMarkIsSkipped) {
  std::istringstream in("\xEF\xBB\xBF@classLabel true a b\n@data\n1,2,3:a\n4,5:b\n");
  const RaggedData d = parse_ts(in, "bom.ts");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(d.offsets, (std::vector<int64_t>{0, 3, 5}));
}

// --missing on .ts files: '?' and NaN in any case are missing values; NaN padding at the end is trimmed.
TEST(DataTs, MissingValueModes) {
  const std::string head = "@problemName Toy\n@dimensions 2\n@classLabel true a b\n@data\n";
  // NaN-padded to 4 steps, as unequal-length sets often are: lengths 2, 4, 1 underneath.
  const std::string padded = head + "1,2,NaN,NaN:5,6,?,?:a\n1,2,3,4:5,6,7,8:b\n7,nan,?,NAN:8,?,?,?:b\n";
  // Missing values inside series: leading, in the middle, and one whole step.
  const std::string gaps = head + "?,2,NaN,4:5,?,7,NaN:a\n1,?:2,3:b\n";
  const auto parse = [](const std::string& text, MissingMode mode, ImportLog* log = nullptr) {
    std::istringstream in(text);
    return parse_ts(in, "toy.ts", mode, log);
  };

  expect_user_error([&] { parse(padded, MissingMode::Error); }, {"toy.ts:5:", "channel 0, step 2", "is missing"});
  try {
    parse(padded, MissingMode::Error);
  } catch (const UserError& e) {
    EXPECT_NE(e.hint().find("--missing trim"), std::string::npos) << e.hint();
  }

  ImportLog log;
  const RaggedData t = parse(padded, MissingMode::Trim, &log);
  EXPECT_EQ(t.offsets, (std::vector<int64_t>{0, 2, 6, 7}));
  EXPECT_EQ(t.features, (std::vector<float>{1, 5, 2, 6, 1, 5, 2, 6, 3, 7, 4, 8, 7, 8}));
  EXPECT_EQ(t.labels, (std::vector<int32_t>{0, 1, 1}));
  EXPECT_EQ(log.missing.missing, 10);
  EXPECT_EQ(log.missing.sequences, 2);
  EXPECT_EQ(log.missing.trimmed_steps, 5);
  EXPECT_EQ(log.missing.summary(), "missing values: 10 in 2 sequences; --missing trim removed 5 trailing steps");
  expect_user_error([&] { parse(gaps, MissingMode::Trim); },
                    {"toy.ts:5:", "channel 0, step 0", "inside the sequence"});
  expect_user_error([&] { parse(head + "?,?:nan,?:a\n", MissingMode::Trim); }, {"toy.ts:5", "every value is missing"});

  const RaggedData z = parse(gaps, MissingMode::Zero, &log);
  EXPECT_EQ(z.offsets, (std::vector<int64_t>{0, 4, 6}));
  EXPECT_EQ(z.features, (std::vector<float>{0, 5, 2, 0, 0, 7, 4, 0, 1, 2, 0, 3}));
  EXPECT_EQ(log.missing.filled, 5);

  const RaggedData f = parse(gaps, MissingMode::Ffill, &log);
  // Channel 0 of series 0 is ?,2,NaN,4: the leading one takes the first observed value (2), the NaN the one
  // before it (2). Channel 1 is 5,?,7,NaN -> 5,5,7,7. Series 1, channel 0: 1,? -> 1,1.
  EXPECT_EQ(f.features, (std::vector<float>{2, 5, 2, 5, 2, 7, 4, 7, 1, 2, 1, 3}));
  EXPECT_EQ(log.missing.filled, 5);
  EXPECT_EQ(log.missing.backfilled, 1);
  EXPECT_EQ(log.missing.summary(),
            "missing values: 5 in 2 sequences; --missing ffill filled 5 (4 from the value before, 1 leading from the "
            "first observed value)");
  expect_user_error([&] { parse(head + "1,2:?,?:a\n", MissingMode::Ffill); },
                    {"toy.ts:5", "feature 1 has no observed value"});

  // Nothing missing: every mode leaves the data as it is, and says so.
  const std::string clean = head + "1,2:3,4:a\n";
  for (MissingMode m : {MissingMode::Trim, MissingMode::Zero, MissingMode::Ffill}) {
    EXPECT_EQ(parse(clean, m, &log).features, (std::vector<float>{1, 3, 2, 4}));
    EXPECT_EQ(log.missing.missing, 0);
    EXPECT_NE(log.missing.summary().find("none"), std::string::npos);
  }
}

TEST(DataMissing, TextThatMeansMissing) {
  for (const char* s : {"", "?", "NaN", "nan", "NAN", "-nan", "+NaN", "NA", "na", "N/A", "n/a"})
    EXPECT_TRUE(is_missing_text(s)) << s;
  for (const char* s : {"0", "1e3", "inf", "-inf", "none", "null", "??", "nana", "x"}) EXPECT_FALSE(is_missing_text(s)) << s;
}
