// Data without labels and missing values, through the binary: convert turns unlabeled .ts, .npz and CSV
// folders into data sets that predict scores exactly as it scores the same features with labels, while train
// and eval refuse them on every rank; convert --missing trims a NaN-padded real UEA set back to the set itself
// and fills the gaps of a CSV export; an input of an unknown type gets a hint on how to export it.
#include <hdf5.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "e2e_util.hpp"

using namespace e2e;
namespace fs = std::filesystem;

namespace {

// A whole dataset of a v1 file as `T` (HDF5 converts); empty if the file or dataset is absent.
template <class T>
std::vector<T> read_dataset(const std::string& path, const char* name, hid_t mem_type) {
  std::vector<T> out;
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return out;
  if (H5Lexists(f, name, H5P_DEFAULT) > 0) {
    const hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    const hid_t space = H5Dget_space(ds);
    out.resize(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
    H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
    H5Sclose(space);
    H5Dclose(ds);
  }
  H5Fclose(f);
  return out;
}
std::vector<float> features_of(const std::string& path) { return read_dataset<float>(path, "/features", H5T_NATIVE_FLOAT); }
std::vector<int64_t> offsets_of(const std::string& path) { return read_dataset<int64_t>(path, "/offsets", H5T_NATIVE_INT64); }
std::vector<int32_t> labels_of(const std::string& path) { return read_dataset<int32_t>(path, "/labels", H5T_NATIVE_INT32); }

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A predict CSV without its first column (name), and that column's values below the header.
std::string without_names(const std::string& csv, std::vector<std::string>* names = nullptr) {
  std::istringstream in(csv);
  std::string out, line;
  for (bool header = true; std::getline(in, line); header = false) {
    const size_t comma = line.find(',');
    if (!header && names) names->push_back(line.substr(0, comma));
    out += line.substr(comma + 1) + "\n";
  }
  return out;
}

// The value tests/fixtures/byod/make_npz.py stores at (sequence i, timestep t, feature f), as float32 text that
// reads back to the same float.
std::string fixture_value(int i, int t, int f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(static_cast<float>(t * 10 + f + i / 10.0)));
  return buf;
}
const int kFixtureLengths[3] = {5, 7, 4};

}  // namespace

// The fixtures' three sequences (F=3) with labels (.npz) and without (.npz, .ts with @classLabel false, a CSV
// folder without a labels file): predict on 2 ranks writes the same file for all four.
TEST(UnlabeledE2e, PredictOnUnlabeledTsNpzAndCsvEqualsPredictOnLabeled) {
  Scratch d;
  ASSERT_EQ(run(0, "convert " + repo_path("tests/fixtures/byod/seq_int_labels.npz") + " " + d / "labeled.h5").rc, 0);
  const Result t = run(0, "train --data " + d / "labeled.h5" + " --out " + d / "run --epochs 2 --hidden 4 --quiet");
  ASSERT_EQ(t.rc, 0) << t.output;

  std::ofstream ts(d / "unlabeled.ts");
  ts << "# the fixture's sequences, no labels\n@problemName Fixture\n@dimensions 3\n@equalLength false\n"
        "@classLabel false\n@data\n";
  fs::create_directories(d / "csv");
  for (int i = 0; i < 3; ++i) {
    std::ofstream csv(d / ("csv/s" + std::to_string(i) + ".csv"));   // name order is sequence order
    csv << "a,b,c\n";
    for (int f = 0; f < 3; ++f) {
      for (int t2 = 0; t2 < kFixtureLengths[i]; ++t2) ts << (t2 ? "," : "") << fixture_value(i, t2, f);
      ts << (f < 2 ? ":" : "\n");
    }
    for (int t2 = 0; t2 < kFixtureLengths[i]; ++t2)
      csv << fixture_value(i, t2, 0) << "," << fixture_value(i, t2, 1) << "," << fixture_value(i, t2, 2) << "\n";
  }
  ts.close();

  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"npz", repo_path("tests/fixtures/byod/unlabeled.npz")}, {"ts", d / "unlabeled.ts"}, {"csv", d / "csv"}};
  const Result labeled = run(2, "predict --checkpoint " + d / "run" + " --data " + d / "labeled.h5" + " --out " +
                                    d / "labeled.csv");
  ASSERT_EQ(labeled.rc, 0) << labeled.output;
  const std::string want = slurp(d / "labeled.csv");
  EXPECT_EQ(want.substr(0, want.find('\n')), "name,index,predicted,p_walk,p_run,p_sit");
  EXPECT_EQ(std::count(want.begin(), want.end(), '\n'), 4);
  // The rows are named as convert named the sequences: by position (.npz, .ts), by file (a CSV folder).
  const std::map<std::string, std::vector<std::string>> names = {
      {"npz", {"0", "1", "2"}}, {"ts", {"0", "1", "2"}}, {"csv", {"s0.csv", "s1.csv", "s2.csv"}}};
  for (const auto& [kind, input] : inputs) {
    SCOPED_TRACE(kind);
    const std::string h5 = d / ("u_" + kind + ".h5");
    const Result c = run(0, "convert " + input + " " + h5);
    ASSERT_EQ(c.rc, 0) << c.output;
    EXPECT_TRUE(contains(c.output, "3 sequences, F=3, lengths 4..7, no labels")) << c.output;
    EXPECT_EQ(features_of(h5), features_of(d / "labeled.h5"));
    EXPECT_TRUE(labels_of(h5).empty());
    const Result in = run(0, "inspect " + h5);
    EXPECT_EQ(in.rc, 0) << in.output;
    EXPECT_TRUE(contains(in.output, "none: no labels")) << in.output;
    const Result p = run(2, "predict --checkpoint " + d / "run" + " --data " + h5 + " --out " + d / (kind + ".csv"));
    ASSERT_EQ(p.rc, 0) << p.output;
    EXPECT_TRUE(contains(p.output, "wrote 3 predictions")) << p.output;
    std::vector<std::string> got_names;
    EXPECT_EQ(without_names(slurp(d / (kind + ".csv")), &got_names), without_names(want));
    EXPECT_EQ(got_names, names.at(kind));
  }
  // simulate reads only the lengths of a data set without labels (and counts no classes).
  const Result sim = run(2, "simulate --data " + d / "u_ts.h5" + " --ranks 2 --batch-per-rank 1");
  EXPECT_EQ(sim.rank_rcs, (std::vector<int>{0, 0})) << sim.output;
}

// train (--data or --val) and eval on a data set without labels: exit 2 on both ranks, naming the option, the
// file and what to do, and leaving no run folder behind.
TEST(UnlabeledE2e, TrainAndEvalRefuseItOnEveryRank) {
  Scratch d;
  const std::string u = d / "u.h5", l = d / "l.h5";
  ASSERT_EQ(run(0, "convert " + repo_path("tests/fixtures/byod/unlabeled.npz") + " " + u).rc, 0);
  ASSERT_EQ(run(0, "convert " + repo_path("tests/fixtures/byod/seq_int_labels.npz") + " " + l).rc, 0);
  ASSERT_EQ(run(0, "train --data " + l + " --out " + d / "ok --epochs 1 --hidden 4 --quiet").rc, 0);
  struct Case {
    const char* name;
    std::string args, option, needed_for;
  };
  const std::vector<Case> cases = {
      {"train --data", "train --data " + u + " --out " + d / "a --epochs 1", "--data", "training"},
      {"train --val", "train --data " + l + " --val " + u + " --out " + d / "b --epochs 1", "--val", "validation"},
      {"eval", "eval --checkpoint " + d / "ok" + " --data " + u, "--data",
       "eval (which compares predictions with labels)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Result r = run(2, c.args);
    EXPECT_EQ(r.rank_rcs, (std::vector<int>{2, 2})) << r.output;
    EXPECT_TRUE(contains(r.output, c.option + " " + u + ": the data set has no labels")) << r.output;
    EXPECT_TRUE(contains(r.output, c.needed_for + " needs a label")) << r.output;
    EXPECT_TRUE(contains(r.output, "hint:") && contains(r.output, "ragtrain predict")) << r.output;
  }
  EXPECT_FALSE(fs::exists(d / "a"));
  EXPECT_FALSE(fs::exists(d / "b"));

  // Options that describe labels, on an input without them.
  const Result reg = run(0, "convert " + repo_path("tests/fixtures/byod/unlabeled.npz") + " --regression " + d / "r.h5");
  EXPECT_EQ(reg.rc, 2) << reg.output;
  EXPECT_TRUE(contains(reg.output, "has no labels; --regression")) << reg.output;
  EXPECT_FALSE(fs::exists(d / "r.h5"));
}

// A real UEA set NaN-padded to its longest series, as unequal-length sets are often distributed: convert stops
// with a hint naming --missing; --missing trim gives exactly the file converted from the unpadded set.
TEST(MissingE2e, NanPaddedUeaSetTrimsBackToTheSet) {
  Scratch d;
  const std::string original = repo_path("inputs/all-gesture-wiimote-x/AllGestureWiimoteX_TRAIN.ts");
  ASSERT_EQ(run(0, "convert " + original + " " + d / "plain.h5").rc, 0);
  const std::vector<int64_t> offsets = offsets_of(d / "plain.h5");
  ASSERT_EQ(offsets.size(), 301u);
  int64_t longest = 0;
  for (size_t i = 0; i + 1 < offsets.size(); ++i) longest = std::max(longest, offsets[i + 1] - offsets[i]);

  // Every series padded with NaN (and the archive's '?') to the longest; the label stays last.
  std::ifstream in(original);
  std::ofstream out(d / "padded.ts");
  int64_t series = 0, padding = 0, padded_series = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line[0] == '@') {
      out << line << "\n";
      continue;
    }
    const size_t colon = line.rfind(':');
    std::string values = line.substr(0, colon);
    const int64_t n = offsets[static_cast<size_t>(series + 1)] - offsets[static_cast<size_t>(series)];
    for (int64_t k = n; k < longest; ++k) values += (k % 2 ? ",?" : ",NaN");
    out << values << line.substr(colon) << "\n";
    padding += longest - n;
    padded_series += n < longest ? 1 : 0;
    ++series;
  }
  out.close();
  ASSERT_EQ(series, 300);

  const Result stop = run(0, "convert " + d / "padded.ts " + d / "x.h5");
  EXPECT_EQ(stop.rc, 2) << stop.output;
  EXPECT_TRUE(contains(stop.output, "is missing")) << stop.output;
  EXPECT_TRUE(contains(stop.output, "--missing trim")) << stop.output;
  EXPECT_FALSE(fs::exists(d / "x.h5"));

  const Result trim = run(0, "convert " + d / "padded.ts " + d / "trimmed.h5 --missing trim");
  ASSERT_EQ(trim.rc, 0) << trim.output;
  const std::string summary = "missing values: " + std::to_string(padding) + " in " + std::to_string(padded_series) +
                              " sequences; --missing trim removed " + std::to_string(padding) + " trailing steps";
  EXPECT_TRUE(contains(trim.output, summary)) << trim.output << "\nexpected: " << summary;
  EXPECT_TRUE(contains(trim.output, "300 sequences, F=1, lengths 11..385, 10 classes")) << trim.output;
  EXPECT_EQ(offsets_of(d / "trimmed.h5"), offsets);
  EXPECT_EQ(features_of(d / "trimmed.h5"), features_of(d / "plain.h5"));
  EXPECT_EQ(labels_of(d / "trimmed.h5"), labels_of(d / "plain.h5"));

  // zero keeps the padding as steps of 0: every series is as long as the longest.
  ASSERT_EQ(run(0, "convert " + d / "padded.ts " + d / "zero.h5 --missing zero").rc, 0);
  EXPECT_EQ(offsets_of(d / "zero.h5").back(), 300 * longest);
}

// A CSV export with empty fields, ? and NA: the default stops at the first with file, line and column; zero
// and ffill fill them as documented (ffill: a leading gap takes the first observed value).
TEST(MissingE2e, CsvExportWithEmptyFieldsAndQuestionMarks) {
  Scratch d;
  fs::create_directories(d / "seqs");
  std::ofstream(d / "seqs/a.csv") << "x,y\n1,2\n,4\n5,?\n";
  std::ofstream(d / "seqs/b.csv") << "x,y\nNA,1\n2,3\n";
  std::ofstream(d / "labels.csv") << "file,label\na.csv,up\nb.csv,down\n";
  const std::string args = "convert " + d / "seqs --labels " + d / "labels.csv ";

  const Result stop = run(2, args + d / "e.h5");
  EXPECT_EQ(stop.rank_rcs, (std::vector<int>{2, 2})) << stop.output;
  EXPECT_TRUE(contains(stop.output, "a.csv:3: column 1 is missing")) << stop.output;
  EXPECT_TRUE(contains(stop.output, "hint:") && contains(stop.output, "--missing")) << stop.output;

  const Result z = run(0, args + d / "z.h5 --missing zero");
  ASSERT_EQ(z.rc, 0) << z.output;
  EXPECT_TRUE(contains(z.output, "missing values: 3 in 2 sequences; --missing zero replaced 3 by 0")) << z.output;
  EXPECT_EQ(features_of(d / "z.h5"), (std::vector<float>{1, 2, 0, 4, 5, 0, 0, 1, 2, 3}));

  const Result f = run(0, args + d / "f.h5 --missing ffill");
  ASSERT_EQ(f.rc, 0) << f.output;
  EXPECT_TRUE(contains(f.output, "--missing ffill filled 3 (2 from the value before, 1 leading")) << f.output;
  EXPECT_EQ(features_of(d / "f.h5"), (std::vector<float>{1, 2, 1, 4, 5, 4, 2, 1, 2, 3}));
  EXPECT_EQ(run(0, "inspect " + d / "f.h5").rc, 0);

  const Result bad = run(0, args + d / "b.h5 --missing drop");
  EXPECT_EQ(bad.rc, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "--missing: must be error, trim, zero or ffill, got 'drop'")) << bad.output;
}

// Inputs convert does not read: the message says what it reads, the hint how to get there from the tool that
// wrote the file (never just "rename it").
TEST(ConvertE2e, UnknownInputTypesGetAnExportHint) {
  Scratch d;
  struct Case {
    std::string name;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"data.parquet", {".parquet", "pandas.read_parquet", "numpy.savez", "lengths="}},
      {"table.csv", {"single .csv file", "pandas.read_csv", "groupby"}},
      {"x.npy", {".npy", "numpy.savez"}},
      {"Train.tsv", {".tsv", "tools/ucr_tsv_to_ts.py"}},
      {"data.xyz", {".xyz", "numpy.savez"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::ofstream(d / c.name) << "something\n";
    const Result r = run(0, "convert " + d / c.name + " " + d / "out.h5");
    EXPECT_EQ(r.rc, 2) << r.output;
    EXPECT_TRUE(contains(r.output, "convert reads a UEA/sktime .ts file, a NumPy .npz file")) << r.output;
    for (const std::string& n : c.needles) EXPECT_TRUE(contains(r.output, n)) << r.output << "\nlacks " << n;
    EXPECT_FALSE(contains(r.output, "rename")) << r.output;
  }
}
