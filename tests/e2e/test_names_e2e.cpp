// Sequence names and convert's inputs through the binary: convert stores each sequence's name (a CSV file's name, an
// .npz names array), inspect shows them and predict writes them as its first column (--quiet: nothing printed); a
// padded (N, T, F) .npz converts with NaN padding (--missing trim) or with lengths; an input of convert given to
// train or inspect is answered with the convert command that turns it into a data set.
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "e2e_util.hpp"

using namespace e2e;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);) out.push_back(line);
  return out;
}

std::vector<float> features_of(const std::string& path) {
  std::vector<float> out;
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return out;
  const hid_t ds = H5Dopen2(f, "/features", H5P_DEFAULT);
  const hid_t space = H5Dget_space(ds);
  out.resize(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
  H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
  H5Sclose(space);
  H5Dclose(ds);
  H5Fclose(f);
  return out;
}

// A sequence file of 2 features whose first one rises (up) or falls (down) over 3..6 steps.
void write_sequence(const std::string& path, int i, bool up) {
  std::ofstream f(path);
  f << "level,noise\n";
  for (int t = 0; t < 3 + i % 4; ++t) f << (up ? t : -t) * 0.3 << "," << ((i * 7 + t * 3) % 5) * 0.1 << "\n";
}

}  // namespace

TEST(NamesE2e, CsvFileNamesBecomePredictsFirstColumn) {
  Scratch d;
  fs::create_directories(d / "seqs");
  std::ofstream labels(d / "labels.csv");
  labels << "file,trend\n";
  for (int i = 5; i >= 0; --i) {   // the labels file's order, not the folder's, is the sequences' order
    const std::string name = "s" + std::to_string(i) + ".csv";
    write_sequence(d / ("seqs/" + name), i, i % 2 == 0);
    labels << name << "," << (i % 2 == 0 ? "up" : "down") << "\n";
  }
  labels.close();
  ASSERT_EQ(run(0, "convert " + d / "seqs" + " --labels " + d / "labels.csv " + d / "train.h5").rc, 0);
  const Result in = run(0, "inspect " + d / "train.h5");
  ASSERT_EQ(in.rc, 0) << in.output;
  EXPECT_TRUE(contains(in.output, "\nnames            s5.csv .. s0.csv\n")) << in.output;
  const Result t = run(0, "train --data " + d / "train.h5" + " --out " + d / "run --epochs 1 --hidden 4 --quiet");
  ASSERT_EQ(t.rc, 0) << t.output;

  const Result p = run(2, "predict --checkpoint " + d / "run" + " --data " + d / "train.h5" + " --out " + d / "p.csv");
  ASSERT_EQ(p.rank_rcs, (std::vector<int>{0, 0})) << p.output;
  const std::vector<std::string> rows = lines_of(d / "p.csv");
  ASSERT_EQ(rows.size(), 7u);
  EXPECT_EQ(rows[0], "name,index,predicted,p_down,p_up");
  for (int r = 1; r <= 6; ++r)
    EXPECT_EQ(rows[static_cast<size_t>(r)].rfind("s" + std::to_string(6 - r) + ".csv," + std::to_string(r - 1) + ",", 0), 0u)
        << rows[static_cast<size_t>(r)];

  // --quiet: the file, and not a line on the terminal.
  const Result q = run(2, "predict --checkpoint " + d / "run" + " --data " + d / "train.h5" + " --out " + d / "q.csv --quiet");
  ASSERT_EQ(q.rank_rcs, (std::vector<int>{0, 0})) << q.output;
  EXPECT_EQ(q.output, "");
  EXPECT_EQ(lines_of(d / "q.csv"), rows);

  // Without labels, in name order (byte-wise); a name with a comma is quoted as CSV quotes it.
  fs::create_directories(d / "new");
  write_sequence(d / "new/b,1.csv", 1, true);
  write_sequence(d / "new/a 2.csv", 2, false);
  ASSERT_EQ(run(0, "convert " + d / "new " + d / "new.h5").rc, 0);
  const Result u = run(2, "predict --checkpoint " + d / "run" + " --data " + d / "new.h5" + " --out " + d / "u.csv");
  ASSERT_EQ(u.rank_rcs, (std::vector<int>{0, 0})) << u.output;
  const std::vector<std::string> unlabeled = lines_of(d / "u.csv");
  ASSERT_EQ(unlabeled.size(), 3u);
  EXPECT_EQ(unlabeled[1].rfind("a 2.csv,0,", 0), 0u) << unlabeled[1];
  EXPECT_EQ(unlabeled[2].rfind("\"b,1.csv\",1,", 0), 0u) << unlabeled[2];

  // Names that do not tell the sequences apart: predict stops on both ranks before any work, and writes nothing.
  {
    const hid_t f = H5Fopen((d / "new.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    H5Ldelete(f, "/names", H5P_DEFAULT);
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, 4);
    const hsize_t n = 2;
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t ds = H5Dcreate2(f, "/names", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, "samesame");
    H5Dclose(ds);
    H5Sclose(space);
    H5Tclose(type);
    H5Fclose(f);
  }
  const Result dup = run(2, "predict --checkpoint " + d / "run" + " --data " + d / "new.h5" + " --out " + d / "dup.csv");
  EXPECT_EQ(dup.rank_rcs, (std::vector<int>{2, 2})) << dup.output;
  EXPECT_TRUE(contains(dup.output, "dataset /names: sequences 0 and 1 have the same name \"same\"")) << dup.output;
  EXPECT_FALSE(contains(dup.output, "# model:")) << "checked before the model ran: " << dup.output;
  EXPECT_FALSE(fs::exists(d / "dup.csv"));
}

// README's `convert padded.npz data.h5 --missing trim` on a real (N, T, F) array, and the same sequences from a
// zero-padded array with their lengths and names (tests/fixtures/byod/make_npz.py).
TEST(NamesE2e, PaddedNpzWithNanPaddingOrLengths) {
  Scratch d;
  const std::string padded = repo_path("tests/fixtures/byod/padded.npz");
  const Result refused = run(0, "convert " + padded + " " + d / "x.h5");
  EXPECT_EQ(refused.rc, 2) << refused.output;
  EXPECT_TRUE(contains(refused.output, "array 'values'[0, 5, 0] is missing (NaN)")) << refused.output;
  EXPECT_TRUE(contains(refused.output, "--missing trim")) << refused.output;
  EXPECT_FALSE(fs::exists(d / "x.h5"));

  const Result trim = run(0, "convert " + padded + " " + d / "trim.h5 --missing trim");
  ASSERT_EQ(trim.rc, 0) << trim.output;
  EXPECT_TRUE(contains(trim.output, "wrote " + d / "trim.h5: 3 sequences, F=3, lengths 4..7, 3 classes")) << trim.output;
  const Result len = run(0, "convert " + repo_path("tests/fixtures/byod/padded_lengths.npz") + " " + d / "len.h5");
  ASSERT_EQ(len.rc, 0) << len.output;
  ASSERT_EQ(run(0, "convert " + repo_path("tests/fixtures/byod/seq_int_labels.npz") + " " + d / "ref.h5").rc, 0);
  EXPECT_EQ(features_of(d / "trim.h5"), features_of(d / "ref.h5"));
  EXPECT_EQ(features_of(d / "len.h5"), features_of(d / "ref.h5"));
  const Result in = run(0, "inspect " + d / "len.h5");
  EXPECT_TRUE(contains(in.output, "\nnames            walk_a .. sit_c\n")) << in.output;
}

// train and inspect given what convert reads: exit 2 on every rank, and the hint is the command to run.
TEST(NamesE2e, ConvertInputsGivenAsDataGetTheConvertCommand) {
  Scratch d;
  fs::copy_file(repo_path("tests/fixtures/byod/seq_int_labels.npz"), d / "mine.npz");
  std::ofstream(d / "mine.ts") << "@problemName p\n@classLabel true a b\n@data\n1,2:a\n";
  std::ofstream(d / "one.csv") << "1,2\n3,4\n";
  fs::create_directories(d / "folder");
  std::ofstream(d / "folder/a.csv") << "1,2\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train --data " + d / "mine.npz" + " --out " + d / "run --quiet",
       "ragtrain convert " + d / "mine.npz" + " " + d / "mine.h5"},
      {"inspect " + d / "mine.ts", "ragtrain convert " + d / "mine.ts" + " " + d / "mine.h5"},
      {"inspect " + d / "one.csv", "ragtrain convert FOLDER --labels LABELS.csv FOLDER.h5"},
      {"train --data " + d / "folder" + " --out " + d / "run --quiet",
       "ragtrain convert " + d / "folder" + " " + d / "folder.h5"},
  };
  for (const auto& [args, command] : cases) {
    const Result r = run(2, args);
    EXPECT_EQ(r.rank_rcs, (std::vector<int>{2, 2})) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "hint:") && contains(r.output, command)) << args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(d / "run"));
}
