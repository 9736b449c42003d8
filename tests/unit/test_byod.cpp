// Bring your own data: .npy parsing, .npz archives (as numpy writes them and as users get them wrong), folders of
// CSV files with a labels file, and the mapping of text labels to class ids.
#include <gtest/gtest.h>
#include <minizip/zip.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/class_labels.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/importers.hpp"
#include "ragtrain/data/inspect.hpp"
#include "ragtrain/data/npy.hpp"

#include "unit_test_util.hpp"

namespace fs = std::filesystem;
using namespace ragtrain;
using ragtrain::test::expect_user_error;
using ragtrain::test::TempDir;

namespace {

std::string fixture(const std::string& name) { return "tests/fixtures/byod/" + name; }   // tests run from the repo root

// A .npy file as numpy.save writes it (version 1.0, header padded to 64 bytes, ending in '\n').
std::string npy(const std::string& descr, const std::string& shape, const std::string& data, bool fortran = false) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': " + shape + ", }";
  const size_t pad = (64 - (10 + header.size() + 1) % 64) % 64;
  header += std::string(pad, ' ') + "\n";
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

template <class T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// An .npz written with minizip: entries "KEY.npy", stored or deflated.
void write_npz(const std::string& path, const std::vector<std::pair<std::string, std::string>>& arrays,
               bool deflate = false) {
  zipFile z = zipOpen64(path.c_str(), 0);
  ASSERT_NE(z, nullptr);
  for (const auto& [key, bytes] : arrays) {
    zip_fileinfo info{};
    ASSERT_EQ(zipOpenNewFileInZip64(z, (key + ".npy").c_str(), &info, nullptr, 0, nullptr, 0, nullptr,
                                    deflate ? Z_DEFLATED : 0, deflate ? Z_DEFAULT_COMPRESSION : 0, 0),
              ZIP_OK);
    ASSERT_EQ(zipWriteInFileInZip(z, bytes.data(), static_cast<unsigned>(bytes.size())), ZIP_OK);
    ASSERT_EQ(zipCloseFileInZip(z), ZIP_OK);
  }
  ASSERT_EQ(zipClose(z, nullptr), ZIP_OK);
}

// Two valid sequences (2, 2) and (1, 2) as seq_0/seq_1, int64 labels 0 and 1.
std::vector<std::pair<std::string, std::string>> good_seq_arrays() {
  return {{"seq_0", npy("<f4", "(2, 2)", raw(std::vector<float>{1, 2, 3, 4}))},
          {"seq_1", npy("<f4", "(1, 2)", raw(std::vector<float>{5, 6}))},
          {"labels", npy("<i8", "(2,)", raw(std::vector<int64_t>{0, 1}))}};
}

// The feature value numpy fixtures hold at (sequence i, timestep t, feature f): t*10 + f + i/10.
float fixture_value(int i, int t, int f) { return static_cast<float>(t * 10 + f + i / 10.0); }

void expect_fixture_features(const RaggedData& d) {
  ASSERT_EQ(d.num_features, 3);
  ASSERT_EQ(d.offsets, (std::vector<int64_t>{0, 5, 12, 16}));
  for (int i = 0; i < 3; ++i)
    for (int64_t t = 0; t < d.offsets[static_cast<size_t>(i + 1)] - d.offsets[static_cast<size_t>(i)]; ++t)
      for (int f = 0; f < 3; ++f)
        EXPECT_FLOAT_EQ(d.features[static_cast<size_t>((d.offsets[static_cast<size_t>(i)] + t) * 3 + f)],
                        fixture_value(i, static_cast<int>(t), f))
            << "sequence " << i << " t " << t << " f " << f;
}

}  // namespace

// ---- .npy ----

TEST(ByodNpy, ParsesHeaderAndConvertsEveryDtype) {
  const NpyArray f4 = parse_npy(npy("<f4", "(2, 3)", raw(std::vector<float>{1, 2, 3, 4, 5, -6.5f})), "x");
  EXPECT_EQ(f4.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f4.size(), 6);
  EXPECT_EQ(f4.shape_string(), "(2, 3)");
  EXPECT_DOUBLE_EQ(npy_number(f4, 5), -6.5);

  // Big-endian float64: 1.5 is 3F F8 00 00 00 00 00 00.
  const std::string be("\x3F\xF8\0\0\0\0\0\0", 8);
  EXPECT_DOUBLE_EQ(npy_number(parse_npy(npy(">f8", "(1,)", be), "x"), 0), 1.5);
  EXPECT_DOUBLE_EQ(npy_number(parse_npy(npy("<i2", "(2,)", raw(std::vector<int16_t>{-3, 7})), "x"), 0), -3);
  EXPECT_DOUBLE_EQ(npy_number(parse_npy(npy(">i4", "(1,)", std::string("\xFF\xFF\xFF\xFE", 4)), "x"), 0), -2);
  EXPECT_DOUBLE_EQ(npy_number(parse_npy(npy("|u1", "(1,)", "\xC8"), "x"), 0), 200);
  EXPECT_DOUBLE_EQ(npy_number(parse_npy(npy("<u8", "(1,)", raw(std::vector<uint64_t>{1ull << 40})), "x"), 0),
                   1099511627776.0);
  EXPECT_DOUBLE_EQ(npy_number(parse_npy(npy("|b1", "(2,)", std::string("\x00\x01", 2)), "x"), 1), 1);

  // '<U3': UTF-32 code points padded with NULs; "é" (U+00E9) comes out as UTF-8.
  const NpyArray u = parse_npy(npy("<U3", "(2,)", raw(std::vector<uint32_t>{'r', 'u', 'n', 0xE9, 0, 0})), "x");
  EXPECT_EQ(npy_string(u, 0), "run");
  EXPECT_EQ(npy_string(u, 1), "\xC3\xA9");
  EXPECT_EQ(npy_string(parse_npy(npy("|S3", "(2,)", std::string("ab\0cde", 6)), "x"), 1), "cde");

  // A scalar (shape ()) and an empty array are well-formed .npy files.
  EXPECT_EQ(parse_npy(npy("<f8", "()", raw(std::vector<double>{2})), "x").size(), 1);
  EXPECT_EQ(parse_npy(npy("<f4", "(0, 3)", ""), "x").size(), 0);
}

TEST(ByodNpy, RejectsWhatCannotBeRead) {
  expect_user_error([] { parse_npy(npy("|O", "(3,)", std::string(24, '\0')), "data.npz: array 'seqs'"); },
                    {"data.npz: array 'seqs'", "object array", "pickle"});
  expect_user_error([] { parse_npy(npy("<f4", "(2, 2)", std::string(16, '\0'), true), "a"); }, {"a:", "Fortran"});
  expect_user_error([] { parse_npy(npy("<c8", "(1,)", std::string(8, '\0')), "a"); }, {"complex"});
  expect_user_error([] { parse_npy(npy("<f2", "(1,)", std::string(2, '\0')), "a"); }, {"'<f2'"});
  expect_user_error([] { parse_npy(npy("<M8[ns]", "(1,)", std::string(8, '\0')), "a"); }, {"date/time"});
  expect_user_error([] { parse_npy(npy("<f4", "(2, 2)", std::string(12, '\0')), "a"); }, {"(2, 2)", "16 bytes", "12"});
  expect_user_error([] { parse_npy(npy("<f4", "(1,)", std::string(8, '\0')), "a"); }, {"needs 4 bytes"});
  expect_user_error([] { parse_npy("PK\x03\x04 not an array", "a"); }, {"not a .npy array"});
  std::string structured = npy("<f4", "(1,)", std::string(4, '\0'));
  structured.replace(structured.find("'<f4'"), 5, "[('a', '<f4')]");
  expect_user_error([&] { parse_npy(structured, "a"); }, {"structured"});
  // A shape whose byte count overflows int64 is reported, not multiplied into nonsense.
  expect_user_error([] { parse_npy(npy("<f8", "(4611686018427387904, 4)", ""), "a"); }, {"more than 2^63"});
}

// ---- .npz as numpy writes it (committed fixtures from tests/fixtures/byod/make_npz.py) ----

TEST(ByodNpz, OneArrayPerSequenceFromNumpySavez) {
  ImportLog log;
  const RaggedData d = read_npz_file(fixture("seq_int_labels.npz"), {}, &log);
  EXPECT_EQ(d.task, Task::Classification);
  expect_fixture_features(d);
  EXPECT_EQ(d.labels, (std::vector<int32_t>{2, 0, 1}));
  EXPECT_EQ(d.num_outputs, 3);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"walk", "run", "sit"}));
  EXPECT_EQ(log.read.size(), 5u);
  EXPECT_TRUE(log.ignored.empty());
  EXPECT_NE(d.source.find("seq_int_labels.npz (seq_0 .. seq_2)"), std::string::npos) << d.source;
}

TEST(ByodNpz, ValuesAndLengthsFromSavezCompressedWithStringLabels) {
  const RaggedData d = read_npz_file(fixture("values_string_labels.npz"), {});
  expect_fixture_features(d);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"run", "walk"}));   // sorted, independent of row order
  EXPECT_EQ(d.labels, (std::vector<int32_t>{1, 0, 1}));
}

TEST(ByodNpz, FloatLabelsAreRegressionTargetsAndOtherArraysAreIgnored) {
  ImportLog log;
  const RaggedData d = read_npz_file(fixture("values_regression.npz"), {}, &log);   // big-endian float64 values
  expect_fixture_features(d);
  EXPECT_EQ(d.task, Task::Regression);
  EXPECT_EQ(d.num_outputs, 2);
  EXPECT_EQ(d.targets, (std::vector<float>{0.5f, -1.0f, 1.5f, 2.0f, 3.0f, 4.25f}));
  EXPECT_TRUE(d.class_names.empty());
  ASSERT_EQ(log.ignored.size(), 1u);
  EXPECT_EQ(log.ignored[0].rfind("note", 0), 0u) << log.ignored[0];
}

TEST(ByodNpz, ConvertedFileIsValidFormatV1) {
  TempDir tmp;
  const std::string out = tmp.file("out.h5");
  write_dataset(out, read_npz_file(fixture("seq_int_labels.npz"), {}));
  const DatasetReport r = inspect_dataset(out);
  EXPECT_EQ(r.num_sequences, 3);
  EXPECT_EQ(r.num_features, 3);
  EXPECT_EQ(r.class_names, (std::vector<std::string>{"walk", "run", "sit"}));
  EXPECT_EQ(r.class_counts, (std::map<int64_t, int64_t>{{0, 1}, {1, 1}, {2, 1}}));
}

TEST(ByodNpz, RejectsTheMistakesNumpyUsersMake) {
  expect_user_error([] { read_npz_file(fixture("positional.npz"), {}); }, {"positional.npz", "arr_0", "no sequences"});
  expect_user_error([] { read_npz_file(fixture("object_list.npz"), {}); },
                    {"object_list.npz", "'seqs'", "object array", "pickle"});
  expect_user_error([] { read_npz_file(fixture("fortran.npz"), {}); }, {"fortran.npz", "'seq_0'", "Fortran"});
}

TEST(ByodNpz, MinizipWrittenArchivesStoredAndDeflated) {
  TempDir tmp;
  for (bool deflate : {false, true}) {
    const std::string path = tmp.file(deflate ? "d.npz" : "s.npz");
    write_npz(path, good_seq_arrays(), deflate);
    const RaggedData d = read_npz_file(path, {});
    EXPECT_EQ(d.offsets, (std::vector<int64_t>{0, 2, 3}));
    EXPECT_EQ(d.features, (std::vector<float>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(d.num_outputs, 2);
    EXPECT_TRUE(d.class_names.empty());
  }
}

// No labels array: a data set without labels; class_names alone name nothing and are listed as ignored.
TEST(ByodNpz, WithoutLabelsIsAnUnlabeledDataSet) {
  ImportLog log;
  const RaggedData d = read_npz_file(fixture("unlabeled.npz"), {}, &log);
  EXPECT_FALSE(d.labeled);
  expect_fixture_features(d);
  EXPECT_EQ(d.num_outputs, 0);
  EXPECT_TRUE(d.labels.empty() && d.targets.empty() && d.class_names.empty());
  EXPECT_EQ(log.ignored, (std::vector<std::string>{"class_names (no labels to name)"}));
  TempDir tmp;
  write_dataset(tmp.file("u.h5"), d);
  EXPECT_FALSE(inspect_dataset(tmp.file("u.h5")).labeled);
}

// NaN in the values is a missing value: a NaN-padded (N, T_max, F) array saved as values + lengths T_max gives
// back the sequences with --missing trim; the messages name the array, row and sequence.
TEST(ByodNpz, NanPaddedValuesWithMissingModes) {
  ImportOptions opts;
  expect_user_error([&] { read_npz_file(fixture("nan_padded.npz"), opts); },
                    {"nan_padded.npz", "array 'values': row 5, column 0 (sequence 0, step 5)", "is missing (NaN)"});
  opts.missing = MissingMode::Trim;
  ImportLog log;
  const RaggedData d = read_npz_file(fixture("nan_padded.npz"), opts, &log);
  expect_fixture_features(d);
  EXPECT_EQ(d.labels, (std::vector<int32_t>{2, 0, 1}));
  EXPECT_EQ(log.missing.missing, (2 + 0 + 3) * 3);
  EXPECT_EQ(log.missing.trimmed_steps, 5);
  EXPECT_EQ(log.missing.sequences, 2);

  opts.missing = MissingMode::Zero;
  const RaggedData z = read_npz_file(fixture("nan_padded.npz"), opts, &log);
  EXPECT_EQ(z.offsets, (std::vector<int64_t>{0, 7, 14, 21}));
  EXPECT_EQ(z.features[5 * 3], 0.0f);
  EXPECT_EQ(log.missing.filled, 15);

  // One array per sequence: the message names the array; ffill carries the last value on.
  TempDir tmp;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  write_npz(tmp.file("s.npz"), {{"seq_0", npy("<f4", "(3, 1)", raw(std::vector<float>{1, nan, 3}))},
                                {"seq_1", npy("<f4", "(2, 1)", raw(std::vector<float>{nan, 5}))}});
  expect_user_error([&] { read_npz_file(tmp.file("s.npz"), {}); }, {"array 'seq_0': row 1, column 0 is missing"});
  opts.missing = MissingMode::Ffill;
  const RaggedData f = read_npz_file(tmp.file("s.npz"), opts, &log);
  EXPECT_FALSE(f.labeled);
  EXPECT_EQ(f.features, (std::vector<float>{1, 1, 3, 5, 5}));
  EXPECT_EQ(log.missing.backfilled, 1);
}

// A padded (N, T, F) array, as padded batches are stored: with 'lengths' each sequence is its first lengths[i]
// steps (whatever the padding holds), without them NaN padding is missing values that --missing trim removes.
TEST(ByodNpz, PaddedValuesWithLengthsOrNanPadding) {
  TempDir tmp;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // (2, 3, 2): sequence 0 has 3 steps, sequence 1 has 1 step, then padding.
  const std::vector<float> zero_padded = {1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0};
  std::vector<float> nan_padded = zero_padded;
  std::fill(nan_padded.begin() + 8, nan_padded.end(), nan);
  const std::string labels = npy("<i8", "(2,)", raw(std::vector<int64_t>{1, 0}));
  const std::vector<float> expected = {1, 2, 3, 4, 5, 6, 7, 8};

  write_npz(tmp.file("len.npz"), {{"values", npy("<f4", "(2, 3, 2)", raw(zero_padded))},
                                  {"lengths", npy("<i4", "(2,)", raw(std::vector<int32_t>{3, 1}))},
                                  {"labels", labels}});
  const RaggedData a = read_npz_file(tmp.file("len.npz"), {});
  EXPECT_EQ(a.offsets, (std::vector<int64_t>{0, 3, 4}));
  EXPECT_EQ(a.features, expected);
  EXPECT_EQ(a.labels, (std::vector<int32_t>{1, 0}));
  EXPECT_NE(a.source.find("values (N, T, F) + lengths"), std::string::npos) << a.source;

  write_npz(tmp.file("nan.npz"), {{"values", npy("<f4", "(2, 3, 2)", raw(nan_padded))}, {"labels", labels}});
  expect_user_error([&] { read_npz_file(tmp.file("nan.npz"), {}); },
                    {"nan.npz", "array 'values'[1, 1, 0] is missing (NaN)"});
  ImportOptions trim;
  trim.missing = MissingMode::Trim;
  ImportLog log;
  const RaggedData b = read_npz_file(tmp.file("nan.npz"), trim, &log);
  EXPECT_EQ(b.offsets, a.offsets);
  EXPECT_EQ(b.features, expected);
  EXPECT_EQ(log.missing.trimmed_steps, 2);

  // What cannot be: a length beyond T or below 1, lengths of another count, an infinity inside a sequence.
  const auto padded = [&](const std::string& lengths) {
    fs::remove(tmp.file("bad.npz"));
    write_npz(tmp.file("bad.npz"), {{"values", npy("<f4", "(2, 3, 2)", raw(zero_padded))},
                                    {"lengths", lengths}, {"labels", labels}});
    return tmp.file("bad.npz");
  };
  expect_user_error([&] { read_npz_file(padded(npy("<i8", "(2,)", raw(std::vector<int64_t>{3, 4}))), {}); },
                    {"'lengths'", "lengths[1] is 4", "expected 1..3"});
  expect_user_error([&] { read_npz_file(padded(npy("<i8", "(2,)", raw(std::vector<int64_t>{0, 1}))), {}); },
                    {"'lengths'", "lengths[0] is 0"});
  expect_user_error([&] { read_npz_file(padded(npy("<i8", "(3,)", raw(std::vector<int64_t>{1, 1, 1}))), {}); },
                    {"'lengths'", "(3,)", "expected (2,)"});
  std::vector<float> inf = zero_padded;
  inf[3] = std::numeric_limits<float>::infinity();
  fs::remove(tmp.file("bad.npz"));
  write_npz(tmp.file("bad.npz"), {{"values", npy("<f4", "(2, 3, 2)", raw(inf))}, {"labels", labels}});
  expect_user_error([&] { read_npz_file(tmp.file("bad.npz"), {}); }, {"array 'values'[0, 1, 1] is inf"});
}

// Sequence names: a 'names' array (strings or integer ids), else the positions "0".."N-1".
TEST(ByodNpz, SequenceNamesFromANamesArrayOrPositions) {
  TempDir tmp;
  auto arrays = good_seq_arrays();
  write_npz(tmp.file("plain.npz"), arrays);
  EXPECT_EQ(read_npz_file(tmp.file("plain.npz"), {}).names, (std::vector<std::string>{"0", "1"}));

  arrays.emplace_back("names", npy("<U5", "(2,)", raw(std::vector<uint32_t>{'r', 'u', 'n', '_', '1', 0xE9, 0, 0, 0, 0})));
  write_npz(tmp.file("named.npz"), arrays);
  EXPECT_EQ(read_npz_file(tmp.file("named.npz"), {}).names, (std::vector<std::string>{"run_1", "\xC3\xA9"}));

  arrays.back() = {"names", npy("<i8", "(2,)", raw(std::vector<int64_t>{1007, 42}))};
  write_npz(tmp.file("ids.npz"), arrays);
  EXPECT_EQ(read_npz_file(tmp.file("ids.npz"), {}).names, (std::vector<std::string>{"1007", "42"}));

  arrays.back() = {"names", npy("<i8", "(2,)", raw(std::vector<int64_t>{5, 5}))};
  write_npz(tmp.file("twice.npz"), arrays);
  expect_user_error([&] { read_npz_file(tmp.file("twice.npz"), {}); },
                    {"twice.npz: array 'names'", "sequences 0 and 1 have the same name \"5\""});
  arrays.back() = {"names", npy("<f4", "(2,)", raw(std::vector<float>{1, 2}))};
  write_npz(tmp.file("floats.npz"), arrays);
  expect_user_error([&] { read_npz_file(tmp.file("floats.npz"), {}); }, {"array 'names'", "'<f4'", "strings or integers"});
  arrays.back() = {"names", npy("|S1", "(3,)", "abc")};
  write_npz(tmp.file("three.npz"), arrays);
  expect_user_error([&] { read_npz_file(tmp.file("three.npz"), {}); }, {"array 'names'", "(3,)", "expected (2,)"});
}

// A .ts file knows its series only by position: series i is named "i".
TEST(ByodTs, SeriesAreNamedByTheirPosition) {
  std::istringstream in("@problemName p\n@classLabel true a b\n@data\n1,2:a\n3:b\n4,5,6:a\n");
  EXPECT_EQ(parse_ts(in, "p.ts").names, (std::vector<std::string>{"0", "1", "2"}));
}

TEST(ByodNpz, RejectsMalformedArchives) {
  TempDir tmp;
  const auto f4 = [](const std::string& shape, std::vector<float> v) { return npy("<f4", shape, raw(v)); };
  const auto i8 = [](const std::string& shape, std::vector<int64_t> v) { return npy("<i8", shape, raw(v)); };
  struct Case {
    const char* name;
    std::vector<std::pair<std::string, std::string>> arrays;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"labels too short", {{"seq_0", f4("(1, 1)", {1})}, {"seq_1", f4("(1, 1)", {2})}, {"labels", i8("(1,)", {0})}},
       {"'labels'", "(1,)", "expected 2 rows"}},
      {"gap in seq_i", {{"seq_0", f4("(1, 1)", {1})}, {"seq_2", f4("(1, 1)", {2})}, {"labels", i8("(3,)", {0, 1, 0})}},
       {"no seq_1"}},
      {"both layouts", {{"seq_0", f4("(1, 1)", {1})}, {"values", f4("(1, 1)", {1})}, {"labels", i8("(1,)", {0})}},
       {"both 'values' and 'seq_*'"}},
      {"values without lengths", {{"values", f4("(2, 1)", {1, 2})}, {"labels", i8("(1,)", {0})}}, {"no 'lengths'"}},
      {"lengths do not add up",
       {{"values", f4("(3, 1)", {1, 2, 3})}, {"lengths", i8("(2,)", {1, 1})}, {"labels", i8("(2,)", {0, 1})}},
       {"'lengths'", "add up to 2", "3 rows"}},
      // Found by fuzz_npz: a uint64 length beyond int64_t was converted unchecked (undefined behaviour), and
      // lengths whose sum overflows int64_t wrapped around.
      {"length beyond int64",
       {{"values", f4("(2, 1)", {1, 2})},
        {"lengths", npy("<u8", "(1,)", raw(std::vector<uint64_t>{~uint64_t{0}}))},
        {"labels", i8("(1,)", {0})}},
       {"'lengths'", "add up to more than the 2 rows", "lengths[0] is 1.84467e+19"}},
      {"lengths whose sum overflows",
       {{"values", f4("(2, 1)", {1, 2})},
        {"lengths", i8("(3,)", {1, int64_t{1} << 62, int64_t{1} << 62})},
        {"labels", i8("(3,)", {0, 1, 0})}},
       {"'lengths'", "lengths[0..1] add up to more than the 2 rows"}},
      {"empty sequence in lengths",
       {{"values", f4("(2, 1)", {1, 2})}, {"lengths", i8("(3,)", {1, 0, 1})}, {"labels", i8("(3,)", {0, 1, 0})}},
       {"lengths[1] is 0"}},
      {"float lengths",
       {{"values", f4("(2, 1)", {1, 2})}, {"lengths", f4("(2,)", {1, 1})}, {"labels", i8("(2,)", {0, 1})}},
       {"'lengths'", "expected integers"}},
      {"empty seq", {{"seq_0", f4("(0, 2)", {})}, {"seq_1", f4("(1, 2)", {1, 2})}, {"labels", i8("(2,)", {0, 1})}},
       {"'seq_0'", "(0, 2)", "at least one timestep"}},
      {"feature count differs",
       {{"seq_0", f4("(1, 2)", {1, 2})}, {"seq_1", f4("(1, 3)", {1, 2, 3})}, {"labels", i8("(2,)", {0, 1})}},
       {"'seq_1'", "3 feature column(s)", "expected 2"}},
      {"3-D sequence", {{"seq_0", f4("(1, 1, 1)", {1})}, {"labels", i8("(1,)", {0})}}, {"'seq_0'", "(1, 1, 1)"}},
      {"NaN value",
       {{"seq_0", f4("(2, 2)", {1, 2, std::numeric_limits<float>::quiet_NaN(), 4})}, {"seq_1", f4("(1, 2)", {1, 2})},
        {"labels", i8("(2,)", {0, 1})}},
       {"'seq_0'", "row 1, column 0", "is missing (NaN)"}},
      {"infinite value",
       {{"seq_0", f4("(1, 2)", {1, std::numeric_limits<float>::infinity()})}, {"labels", i8("(1,)", {0})}},
       {"'seq_0'", "row 0, column 1", "inf"}},
      {"float64 value beyond float32",
       {{"seq_0", npy("<f8", "(1, 2)", raw(std::vector<double>{1, 1e39}))}, {"seq_1", f4("(1, 2)", {1, 2})},
        {"labels", i8("(2,)", {0, 1})}},
       {"'seq_0'", "row 0, column 1", "1e+39", "float32 range"}},
      {"float64 target beyond float32",
       {{"seq_0", f4("(1, 1)", {1})}, {"labels", npy("<f8", "(1,)", raw(std::vector<double>{-2e300}))}},
       {"'labels'", "sequence 0", "-2e+300", "float32 range"}},
      {"text values", {{"seq_0", npy("|S1", "(1,)", "a")}, {"labels", i8("(1,)", {0})}}, {"'seq_0'", "text dtype"}},
      {"negative class id", {{"seq_0", f4("(1, 1)", {1})}, {"seq_1", f4("(1, 1)", {1})}, {"labels", i8("(2,)", {0, -1})}},
       {"labels[1] is -1"}},
      {"one class only", {{"seq_0", f4("(1, 1)", {1})}, {"seq_1", f4("(1, 1)", {1})}, {"labels", i8("(2,)", {0, 0})}},
       {"at least 2 classes"}},
      {"2-D class labels",
       {{"seq_0", f4("(1, 1)", {1})}, {"seq_1", f4("(1, 1)", {1})}, {"labels", i8("(2, 1)", {0, 1})}},
       {"'labels'", "(2, 1)", "(N,)"}},
      {"NaN target",
       {{"seq_0", f4("(1, 1)", {1})}, {"labels", f4("(1,)", {std::numeric_limits<float>::infinity()})}},
       {"'labels'", "sequence 0", "inf"}},
      {"class id beyond class_names",
       {{"seq_0", f4("(1, 1)", {1})}, {"seq_1", f4("(1, 1)", {1})}, {"labels", i8("(2,)", {0, 2})},
        {"class_names", npy("<U1", "(2,)", raw(std::vector<uint32_t>{'a', 'b'}))}},
       {"labels[1] is 2", "0..1"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = tmp.file("bad.npz");
    fs::remove(path);
    write_npz(path, c.arrays);
    std::vector<std::string> needles = c.needles;
    needles.insert(needles.begin(), "bad.npz");
    expect_user_error([&] { read_npz_file(path, {}); }, needles);
  }
}

TEST(ByodNpz, RejectsDamagedAndNonZipFiles) {
  TempDir tmp;
  const std::string text = tmp.write("text.npz", "this is not a zip archive\n");
  expect_user_error([&] { read_npz_file(text, {}); }, {"text.npz", "not a zip archive"});
  expect_user_error([&] { read_npz_file(tmp.file("missing.npz"), {}); }, {"missing.npz", "no such file"});

  // A stored entry whose data no longer matches its CRC-32: flip one byte of the float data of seq_0.
  const std::string path = tmp.file("crc.npz");
  write_npz(path, good_seq_arrays(), false);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string one = raw(std::vector<float>{1});
  const size_t at = bytes.find(one);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 3] ^= 0x01;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  expect_user_error([&] { read_npz_file(path, {}); }, {"crc.npz", "'seq_0.npy'", "CRC-32"});
}

TEST(ByodNpz, FixedClassNamesAndTheRegressionSwitch) {
  TempDir tmp;
  const std::string path = tmp.file("a.npz");
  write_npz(path, good_seq_arrays());
  ImportOptions fixed;
  fixed.class_names = {"a", "b", "c", "d"};
  fixed.class_names_source = "train.h5";
  const RaggedData d = read_npz_file(path, fixed);
  EXPECT_EQ(d.num_outputs, 4);   // the training set's class count, though only ids 0 and 1 occur here
  EXPECT_EQ(d.class_names, fixed.class_names);

  ImportOptions regression;
  regression.regression = true;
  const RaggedData r = read_npz_file(path, regression);
  EXPECT_EQ(r.task, Task::Regression);
  EXPECT_EQ(r.targets, (std::vector<float>{0, 1}));

  // String labels follow the fixed order, and one that it lacks is an error naming the label.
  auto arrays = good_seq_arrays();
  arrays[2] = {"labels", npy("<U1", "(2,)", raw(std::vector<uint32_t>{'c', 'a'}))};
  fs::remove(path);
  write_npz(path, arrays);
  EXPECT_EQ(read_npz_file(path, fixed).labels, (std::vector<int32_t>{2, 0}));
  fixed.class_names = {"a", "b"};
  expect_user_error([&] { read_npz_file(path, fixed); }, {"labels[0]", "\"c\"", "train.h5"});
  expect_user_error([&] { read_npz_file(path, regression); }, {"'labels'", "holds text"});
}

// ---- folders of CSV files ----

TEST(ByodCsv, FolderWithOptionalHeadersInLabelsFileOrder) {
  TempDir tmp;
  tmp.write("seqs/walk_1.csv", "acc_x,acc_y,acc_z\n0.5,1,1.5\n2,2.5,3\n");
  tmp.write("seqs/run_1.csv", "\xEF\xBB\xBF" "acc_x,acc_y,acc_z\r\n-1,-2,-3\r\n");   // BOM and CRLF, as Excel saves
  tmp.write("seqs/sit_1.csv", "7,8,9\n\n10,11,12\n1e-3,+4,5\n");                      // no header, a blank line
  tmp.write("seqs/README.txt", "not a sequence");
  // The labels file may sit in the folder itself; it is not a sequence. A name without .csv is accepted.
  const std::string labels = tmp.write("seqs/labels.csv", "file,activity\nsit_1.csv,sit\nwalk_1,walk\n\"run_1.csv\",run\n");
  ImportLog log;
  const RaggedData d = read_csv_folder(tmp.file("seqs"), labels, {}, &log);
  EXPECT_EQ(d.task, Task::Classification);
  EXPECT_EQ(d.num_features, 3);
  EXPECT_EQ(d.offsets, (std::vector<int64_t>{0, 3, 5, 6}));   // sit, walk, run: the order of labels.csv
  EXPECT_EQ(d.features, (std::vector<float>{7, 8, 9, 10, 11, 12, 1e-3f, 4, 5, 0.5f, 1, 1.5f, 2, 2.5f, 3, -1, -2, -3}));
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"run", "sit", "walk"}));
  EXPECT_EQ(d.labels, (std::vector<int32_t>{1, 2, 0}));
  EXPECT_EQ(log.read, (std::vector<std::string>{"sit_1.csv: 3 x 3", "walk_1.csv: 2 x 3", "run_1.csv: 1 x 3"}));
  EXPECT_EQ(log.ignored, (std::vector<std::string>{"README.txt (not .csv)"}));
  EXPECT_NE(d.source.find("seqs/ (3 CSV files) with labels labels.csv"), std::string::npos) << d.source;
  // Each sequence is named by its file (predict's name column), ".csv" added where the row left it out.
  EXPECT_EQ(d.names, (std::vector<std::string>{"sit_1.csv", "walk_1.csv", "run_1.csv"}));
}

// Without --labels the folder's *.csv files are the sequences, in name order; a labels file of one column
// (FILE) gives the order instead. Either way the data set has no labels.
TEST(ByodCsv, FolderWithoutLabels) {
  TempDir tmp;
  tmp.write("seqs/b.csv", "x,y\n1,2\n3,4\n");
  tmp.write("seqs/a.csv", "x,y\n5,6\n");
  tmp.write("seqs/c.csv", "7,8\n9,10\n11,12\n");
  tmp.write("seqs/notes.txt", "not a sequence");
  ImportLog log;
  const RaggedData d = read_csv_folder(tmp.file("seqs"), "", {}, &log);
  EXPECT_FALSE(d.labeled);
  EXPECT_EQ(d.num_outputs, 0);
  EXPECT_EQ(d.offsets, (std::vector<int64_t>{0, 1, 3, 6}));   // a, b, c
  EXPECT_EQ(d.features, (std::vector<float>{5, 6, 1, 2, 3, 4, 7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(log.read, (std::vector<std::string>{"a.csv: 1 x 2", "b.csv: 2 x 2", "c.csv: 3 x 2"}));
  EXPECT_EQ(log.ignored, (std::vector<std::string>{"notes.txt (not .csv)"}));
  EXPECT_NE(d.source.find("without labels, in name order"), std::string::npos) << d.source;
  EXPECT_EQ(d.names, (std::vector<std::string>{"a.csv", "b.csv", "c.csv"}));

  const std::string order = tmp.write("order.csv", "file\nc.csv\na\nb.csv\n");
  const RaggedData o = read_csv_folder(tmp.file("seqs"), order, {});
  EXPECT_FALSE(o.labeled);
  EXPECT_EQ(o.offsets, (std::vector<int64_t>{0, 3, 4, 6}));   // c, a, b
  EXPECT_NE(o.source.find("in the order of order.csv"), std::string::npos) << o.source;
  EXPECT_EQ(o.names, (std::vector<std::string>{"c.csv", "a.csv", "b.csv"}));
  expect_user_error([&] { read_csv_folder(tmp.file("seqs"), tmp.write("short.csv", "file\na.csv\nb.csv\n"), {}); },
                    {"c.csv", "has no row in"});
  // The labels file left in the folder, --labels forgotten: the hint says so.
  tmp.write("forgot/a.csv", "1,2\n");
  tmp.write("forgot/b.csv", "3,4\n");
  tmp.write("forgot/labels.csv", "file,label\na.csv,x\nb.csv,y\n");
  try {
    read_csv_folder(tmp.file("forgot"), "", {});
    ADD_FAILURE() << "no UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("labels.csv:2"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("looks like a labels file"), std::string::npos) << e.hint();
    EXPECT_NE(e.hint().find("--labels " + tmp.file("forgot/labels.csv")), std::string::npos) << e.hint();
  }
  tmp.write("empty/readme.txt", "x");
  expect_user_error([&] { read_csv_folder(tmp.file("empty"), "", {}); }, {"empty", "no .csv file"});
}

// Missing values of CSV exports: empty fields, ?, NaN, NA. A first row with gaps is data, not a header.
TEST(ByodCsv, MissingValueModes) {
  TempDir tmp;
  tmp.write("d/a.csv", "x,y\n1,2\n,4\n?,NA\n");     // header; the last row all missing (padding)
  tmp.write("d/b.csv", "?,1\n2,NaN\n\n3,3\n");         // no header: "?,1" is data; a blank line
  const std::string dir = tmp.file("d");
  expect_user_error([&] { read_csv_folder(dir, "", {}); }, {"a.csv:3: column 1 is missing"});
  ImportOptions opts;
  opts.missing = MissingMode::Trim;
  expect_user_error([&] { read_csv_folder(dir, "", opts); }, {"a.csv:3: column 1 is missing", "inside the sequence"});

  opts.missing = MissingMode::Ffill;
  ImportLog log;
  const RaggedData f = read_csv_folder(dir, "", opts, &log);
  EXPECT_EQ(f.offsets, (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(f.features, (std::vector<float>{1, 2, 1, 4, 1, 4, 2, 1, 2, 1, 3, 3}));
  EXPECT_EQ(log.missing.missing, 5);
  EXPECT_EQ(log.missing.backfilled, 1);

  tmp.write("p/a.csv", "1,2\n3,4\n,\n?,nan\n");   // NaN-padded at the end only
  tmp.write("p/b.csv", "5,6\n");
  opts.missing = MissingMode::Trim;
  log = ImportLog{};
  const RaggedData t = read_csv_folder(tmp.file("p"), tmp.write("l.csv", "file,label\na.csv,x\nb.csv,y\n"), opts, &log);
  EXPECT_EQ(t.offsets, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(t.features, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(t.labels, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(log.missing.trimmed_steps, 2);
  EXPECT_EQ(log.read, (std::vector<std::string>{"a.csv: 2 x 2", "b.csv: 1 x 2"}));
}

TEST(ByodCsv, RegressionTargetsAndNumericClassOrder) {
  TempDir tmp;
  tmp.write("d/a.csv", "1\n2\n");
  tmp.write("d/b.csv", "3\n");
  tmp.write("d/c.csv", "4\n");
  ImportOptions reg;
  reg.regression = true;
  const RaggedData r = read_csv_folder(tmp.file("d"), tmp.write("y.csv", "file,y1,y2\na.csv,0.5,1\nb.csv,2,-3\nc.csv,4,5\n"), reg);
  EXPECT_EQ(r.task, Task::Regression);
  EXPECT_EQ(r.num_outputs, 2);
  EXPECT_EQ(r.targets, (std::vector<float>{0.5f, 1, 2, -3, 4, 5}));

  // Numeric labels sort as numbers: "2" before "10".
  const RaggedData c = read_csv_folder(tmp.file("d"), tmp.write("c.csv", "file,label\na.csv,10\nb.csv,2\nc.csv,10\n"), {});
  EXPECT_EQ(c.class_names, (std::vector<std::string>{"2", "10"}));
  EXPECT_EQ(c.labels, (std::vector<int32_t>{1, 0, 1}));
}

TEST(ByodCsv, RejectsMalformedFilesWithFileAndLine) {
  struct Case {
    const char* name;
    std::vector<std::pair<std::string, std::string>> files;   // under d/
    std::string labels;                                        // labels.csv next to d/
    std::vector<std::string> needles;
    bool regression = false;
  };
  const std::string two = "file,label\na.csv,x\nb.csv,y\n";
  const std::vector<Case> cases = {
      {"ragged rows", {{"a.csv", "1,2\n3,4\n5\n"}, {"b.csv", "1,2\n"}}, two, {"a.csv:3", "1 value(s)", "expected 2 like line 1"}},
      {"non-numeric value", {{"a.csv", "1,2\n3,abc\n"}, {"b.csv", "1,2\n"}}, two, {"a.csv:2", "column 2", "\"abc\""}},
      {"empty value", {{"a.csv", "x,y\n1,\n"}, {"b.csv", "1,2\n"}}, two, {"a.csv:2", "column 2 is missing"}},
      {"NaN value", {{"a.csv", "1,NaN\n"}, {"b.csv", "1,2\n"}}, two, {"a.csv:1", "column 2 is missing"}},
      {"? value", {{"a.csv", "1,2\n?,4\n"}, {"b.csv", "1,2\n"}}, two, {"a.csv:2", "column 1 is missing"}},
      {"infinite value", {{"a.csv", "1,inf\n"}, {"b.csv", "1,2\n"}}, two, {"a.csv:1", "infinite value \"inf\""}},
      {"missing target", {{"a.csv", "1\n"}, {"b.csv", "1\n"}}, "file,y\na.csv,1.5\nb.csv,\n",
       {"labels.csv:3", "a missing value"}, true},
      {"missing label", {{"a.csv", "1\n"}, {"b.csv", "1\n"}, {"c.csv", "1\n"}}, "file,label\na.csv,x\nb.csv,\nc.csv,y\n",
       {"labels.csv:3", "label of b.csv is missing"}},
      {"value beyond float32", {{"a.csv", "1,2\n3,-1e39\n"}, {"b.csv", "1,2\n"}}, two,
       {"a.csv:2", "column 2", "\"-1e39\"", "beyond float32 range"}},
      {"target beyond float32", {{"a.csv", "1\n"}, {"b.csv", "1\n"}}, "file,y\na.csv,1.5\nb.csv,4e38\n",
       {"labels.csv:3", "\"4e38\"", "beyond float32 range"}, true},
      {"header mixes text and numbers", {{"a.csv", "time,1.5\n1,2\n"}, {"b.csv", "1,2\n"}}, two, {"a.csv:1", "mixes"}},
      {"header only", {{"a.csv", "x,y\n"}, {"b.csv", "1,2\n"}}, two, {"a.csv", "no rows"}},
      {"feature count differs", {{"a.csv", "1,2\n"}, {"b.csv", "1,2,3\n"}}, two, {"b.csv", "3 column(s)", "expected 2"}},
      {"feature names differ", {{"a.csv", "x,y\n1,2\n"}, {"b.csv", "y,x\n1,2\n"}}, two, {"b.csv:1", "column names differ"}},
      {"file without a label", {{"a.csv", "1\n"}, {"b.csv", "1\n"}, {"c.csv", "1\n"}}, two, {"c.csv", "has no row in"}},
      {"label row without a file", {{"a.csv", "1\n"}}, two, {"labels.csv:3", "no file \"b.csv\""}},
      {"duplicate label row", {{"a.csv", "1\n"}, {"b.csv", "1\n"}}, two + "a.csv,y\n", {"labels.csv:4", "line 2"}},
      {"labels without a header", {{"a.csv", "1\n"}, {"b.csv", "1\n"}}, "a.csv,x\nb.csv,y\n", {"labels.csv:1", "header row"}},
      {"labels row width", {{"a.csv", "1\n"}, {"b.csv", "1\n"}}, "file,label\na.csv,x\nb.csv,y,z\n", {"labels.csv:3", "3 column(s)"}},
      {"three label columns", {{"a.csv", "1\n"}, {"b.csv", "1\n"}}, "file,l1,l2\na.csv,x,1\nb.csv,y,2\n", {"labels.csv:1", "exactly 2"}},
      {"one class", {{"a.csv", "1\n"}, {"b.csv", "1\n"}}, "file,label\na.csv,x\nb.csv,x\n", {"labels.csv:2", "at least 2 classes"}},
      {"non-numeric target", {{"a.csv", "1\n"}, {"b.csv", "1\n"}}, "file,y\na.csv,1.5\nb.csv,high\n", {"labels.csv:3", "\"high\""}, true},
      {"no label rows", {{"a.csv", "1\n"}}, "file,label\n", {"labels.csv", "no rows after the header"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir tmp;
    for (const auto& [name, text] : c.files) tmp.write("d/" + name, text);
    const std::string labels = tmp.write("labels.csv", c.labels);
    ImportOptions opts;
    opts.regression = c.regression;
    expect_user_error([&] { read_csv_folder(tmp.file("d"), labels, opts); }, c.needles);
  }
  TempDir tmp;
  expect_user_error([&] { read_csv_folder(tmp.file("nope"), tmp.write("l.csv", "f,l\n"), {}); }, {"nope", "no such folder"});
  expect_user_error([&] { read_csv_folder(tmp.dir(), tmp.file("missing.csv"), {}); }, {"missing.csv", "no such file"});
}

// ---- text labels to class ids ----

TEST(ByodLabels, SortedOrFixedOrder) {
  const auto where = [](int64_t i) { return "row " + std::to_string(i); };
  ClassLabels a = map_class_labels({"b", "a", "b", "c"}, {}, "", where);
  EXPECT_EQ(a.names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(a.ids, (std::vector<int32_t>{1, 0, 1, 2}));
  ClassLabels n = map_class_labels({"10", "9", "-1", "9.5"}, {}, "", where);
  EXPECT_EQ(n.names, (std::vector<std::string>{"-1", "9", "9.5", "10"}));
  EXPECT_EQ(n.ids, (std::vector<int32_t>{3, 1, 0, 2}));
  ClassLabels f = map_class_labels({"sit", "walk"}, {"walk", "run", "sit"}, "train.h5", where);
  EXPECT_EQ(f.ids, (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(f.names.size(), 3u);
  expect_user_error([&] { map_class_labels({"fly"}, {"walk", "run"}, "train.h5", where); }, {"row 0", "\"fly\"", "train.h5"});
  expect_user_error([&] { map_class_labels({"x", "x"}, {}, "", where); }, {"at least 2 classes"});
}
