// Parallel shard reads under any rank count: every rank reads its own uneven (possibly empty) subset.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/rng.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/h5.hpp"
#include "ragtrain/data/shard.hpp"
#include "ragtrain/data/synthetic.hpp"

namespace fs = std::filesystem;
using namespace ragtrain;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// Rank 0 writes `data` into a fresh folder that every rank then reads; the folder goes at the end.
class SharedFile {
 public:
  explicit SharedFile(const RaggedData& data) {
    std::string dir;
    if (world_rank() == 0) {
      dir = (fs::temp_directory_path() / "ragtrain-shard-XXXXXX").string();
      if (::mkdtemp(dir.data()) == nullptr) dir.clear();
      if (!dir.empty()) write_dataset(dir + "/data.h5", data);
    }
    int64_t len = static_cast<int64_t>(dir.size());
    MPI_Bcast(&len, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    dir.resize(static_cast<size_t>(len));
    MPI_Bcast(dir.data(), static_cast<int>(len), MPI_CHAR, 0, MPI_COMM_WORLD);
    dir_ = dir;
  }
  ~SharedFile() {
    MPI_Barrier(MPI_COMM_WORLD);   // nobody may still be reading
    std::error_code ec;
    if (world_rank() == 0 && !dir_.empty()) fs::remove_all(dir_, ec);
  }
  bool ok() const { return !dir_.empty(); }
  std::string path() const { return dir_ + "/data.h5"; }

 private:
  std::string dir_;
};

// An uneven split of a shuffled 0..n-1: rank r of the first P-1 ranks gets a share proportional to r + 1,
// the last rank gets nothing (when P > 1). Requested orders are shuffled, not sorted.
std::vector<int64_t> uneven_subset(int64_t n, int rank, int size) {
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
  Rng rng(7, 0);
  shuffle(all, rng);
  const int readers = size > 1 ? size - 1 : 1;
  if (rank >= readers) return {};
  const int64_t weight_total = int64_t{readers} * (readers + 1) / 2;
  int64_t begin = 0;
  for (int r = 0; r < rank; ++r) begin += n * (r + 1) / weight_total;
  const int64_t end = rank == readers - 1 ? n : begin + n * (rank + 1) / weight_total;
  return std::vector<int64_t>(all.begin() + begin, all.begin() + end);
}

// Mismatches between a shard and the in-memory data it was read from.
int64_t mismatches(const Shard& s, const RaggedData& d) {
  int64_t bad = 0;
  const int64_t F = d.num_features, K = d.num_outputs;
  for (int64_t p = 0; p < s.size(); ++p) {
    const auto g = static_cast<size_t>(s.indices[static_cast<size_t>(p)]);
    const int64_t len = d.offsets[g + 1] - d.offsets[g];
    if (s.length(p) != len) {
      ++bad;
      continue;
    }
    for (int64_t v = 0; v < len * F; ++v) bad += s.x(p)[v] != d.features[static_cast<size_t>(d.offsets[g] * F + v)];
    if (!d.labeled)
      bad += !s.labels.empty() || !s.targets.empty();
    else if (d.task == Task::Classification)
      bad += s.labels[static_cast<size_t>(p)] != d.labels[g];
    else
      for (int64_t k = 0; k < K; ++k) bad += s.target(p)[k] != d.targets[g * static_cast<size_t>(K) + static_cast<size_t>(k)];
  }
  return bad;
}

// Gathers every rank's indices and feature values on rank 0 and checks that together they are exactly the
// file: each sequence once, with the values a whole-file read gives.
void expect_union_is_file(const Shard& s, const DatasetInfo& info) {
  const int size = world_size();
  int n_mine = static_cast<int>(s.size()), values_mine = static_cast<int>(s.features.size());
  std::vector<int> n_all(static_cast<size_t>(size)), values_all(static_cast<size_t>(size));
  MPI_Gather(&n_mine, 1, MPI_INT, n_all.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Gather(&values_mine, 1, MPI_INT, values_all.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> n_disp(static_cast<size_t>(size), 0), v_disp(static_cast<size_t>(size), 0);
  for (size_t r = 1; r < n_disp.size(); ++r) {
    n_disp[r] = n_disp[r - 1] + n_all[r - 1];
    v_disp[r] = v_disp[r - 1] + values_all[r - 1];
  }
  const size_t n_total = static_cast<size_t>(n_disp.back() + n_all.back());
  const size_t v_total = static_cast<size_t>(v_disp.back() + values_all.back());
  std::vector<int64_t> indices(world_rank() == 0 ? n_total : 0);
  std::vector<float> values(world_rank() == 0 ? v_total : 0);
  MPI_Gatherv(s.indices.data(), n_mine, MPI_INT64_T, indices.data(), n_all.data(), n_disp.data(), MPI_INT64_T, 0,
              MPI_COMM_WORLD);
  MPI_Gatherv(s.features.data(), values_mine, MPI_FLOAT, values.data(), values_all.data(), v_disp.data(), MPI_FLOAT,
              0, MPI_COMM_WORLD);
  if (world_rank() != 0) return;

  std::vector<int64_t> sorted = indices;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expected(static_cast<size_t>(info.num_sequences));
  for (int64_t i = 0; i < info.num_sequences; ++i) expected[static_cast<size_t>(i)] = i;
  EXPECT_EQ(sorted, expected) << "the ranks' subsets do not partition the file";

  std::vector<int64_t> everything(expected);
  const Shard whole = read_shard(info, everything, MPI_COMM_SELF);
  ASSERT_EQ(values.size(), whole.features.size());
  int64_t bad = 0, at = 0;
  for (int64_t g : indices)
    for (int64_t v = 0; v < info.length(g) * info.num_features; ++v) bad += values[static_cast<size_t>(at++)] != whole.x(g)[v];
  EXPECT_EQ(bad, 0);
}

RaggedData classification_data(int64_t n) {
  SyntheticSpec spec;
  spec.sequences = n;
  spec.features = 7;
  spec.min_length = 1;
  spec.max_length = 40;
  spec.classes = 5;
  spec.seed = 11;
  return make_synthetic(spec);
}

}  // namespace

TEST(Shard, UnevenSubsetsMatchTheFile) {
  const RaggedData data = classification_data(203);
  SharedFile file(data);
  ASSERT_TRUE(file.ok());
  const DatasetInfo info = read_dataset_info(file.path(), MPI_COMM_WORLD);
  EXPECT_EQ(info.num_sequences, 203);
  EXPECT_EQ(info.offsets, data.offsets);

  const std::vector<int64_t> mine = uneven_subset(203, world_rank(), world_size());
  if (world_size() > 1 && world_rank() == world_size() - 1) {
    EXPECT_TRUE(mine.empty());
  }
  const Shard s = read_shard(info, mine, MPI_COMM_WORLD);
  EXPECT_EQ(s.indices, mine);
  EXPECT_EQ(s.num_features, 7);
  EXPECT_EQ(mismatches(s, data), 0);
  expect_union_is_file(s, info);
}

TEST(Shard, RegressionTargets) {
  SyntheticSpec spec;
  spec.task = Task::Regression;
  spec.sequences = 31;
  spec.features = 3;
  spec.outputs = 2;
  spec.min_length = 2;
  spec.max_length = 9;
  const RaggedData data = make_synthetic(spec);
  SharedFile file(data);
  ASSERT_TRUE(file.ok());
  const DatasetInfo info = read_dataset_info(file.path(), MPI_COMM_WORLD);
  const Shard s = read_shard(info, uneven_subset(31, world_rank(), world_size()), MPI_COMM_WORLD);
  EXPECT_EQ(s.targets.size(), static_cast<size_t>(s.size() * 2));
  EXPECT_EQ(mismatches(s, data), 0);
  expect_union_is_file(s, info);
}

// A data set without labels: every rank, the one with nothing to read too, reads features only (no rank may
// enter a collective read of /labels that the others skip).
TEST(Shard, WithoutLabels) {
  RaggedData data = classification_data(57);
  data.labeled = false;
  data.labels.clear();
  data.class_names.clear();
  data.num_outputs = 0;
  SharedFile file(data);
  ASSERT_TRUE(file.ok());
  const DatasetInfo info = read_dataset_info(file.path(), MPI_COMM_WORLD);
  EXPECT_FALSE(info.labeled);
  const Shard s = read_shard(info, uneven_subset(57, world_rank(), world_size()), MPI_COMM_WORLD);
  EXPECT_FALSE(s.labeled);
  EXPECT_EQ(mismatches(s, data), 0);
  expect_union_is_file(s, info);
}

// Round-robin subsets never touch, so each rank's selection is thousands of separate hyperslabs.
TEST(Shard, ManyScatteredSequences) {
  const RaggedData data = classification_data(6000);
  SharedFile file(data);
  ASSERT_TRUE(file.ok());
  const DatasetInfo info = read_dataset_info(file.path(), MPI_COMM_WORLD);
  std::vector<int64_t> mine;
  for (int64_t i = world_rank(); i < 6000; i += world_size() + 1) mine.push_back(i);
  const auto t0 = std::chrono::steady_clock::now();
  const Shard s = read_shard(info, mine, MPI_COMM_WORLD);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(mismatches(s, data), 0);
  // A bound against a read that goes one hyperslab at a time (minutes), with room for four ranks on a busy 2-core
  // machine and for sanitizer builds (RAGTRAIN_TEST_TIME_SCALE): not a measurement.
  const char* scale = std::getenv("RAGTRAIN_TEST_TIME_SCALE");
  const double bound = 60.0 * std::max(1.0, scale != nullptr ? std::atof(scale) : 1.0);
  EXPECT_LT(seconds, bound) << "reading " << mine.size() << " scattered sequences took " << seconds << " s";
}

// A rank that asks for a bad index, or finds a bad value, fails alone and after the collective reads:
// the others finish their reads, and nobody hangs.
TEST(Shard, OneRankFailsNobodyHangs) {
  const RaggedData data = classification_data(40);
  SharedFile file(data);
  ASSERT_TRUE(file.ok());
  const int last = world_size() - 1;
  {
    const DatasetInfo info = read_dataset_info(file.path(), MPI_COMM_WORLD);
    if (world_rank() == last)
      EXPECT_THROW(read_shard(info, {0, 40}, MPI_COMM_WORLD), InternalError);
    else
      EXPECT_EQ(mismatches(read_shard(info, {world_rank()}, MPI_COMM_WORLD), data), 0);
  }

  // A NaN written behind the writer's back: the header stays valid, only sequence 39's values are wrong.
  if (world_rank() == 0) {
    H5Handle f = h5_file(H5Fopen(file.path().c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    H5Handle d = h5_dataset(H5Dopen2(f.get(), "/features", H5P_DEFAULT));
    H5Handle space = h5_space(H5Dget_space(d.get()));
    const hsize_t start[2] = {static_cast<hsize_t>(data.offsets[39] + 0), 3}, count[2] = {1, 1}, one = 1;
    H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
    H5Handle mem = h5_space(H5Screate_simple(1, &one, nullptr));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    ASSERT_GE(H5Dwrite(d.get(), H5T_NATIVE_FLOAT, mem.get(), space.get(), H5P_DEFAULT, &nan), 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const DatasetInfo info = read_dataset_info(file.path(), MPI_COMM_WORLD);
  if (world_rank() == last) {
    try {
      read_shard(info, {39, 1}, MPI_COMM_WORLD);
      ADD_FAILURE() << "no UserError for the NaN";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("sequence 39"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("feature 3"), std::string::npos) << e.what();
    }
  } else {
    EXPECT_EQ(mismatches(read_shard(info, {world_rank() + 2}, MPI_COMM_WORLD), data), 0);
  }
}

TEST(Shard, MissingFileFailsOnEveryRank) {
  const std::string path = "/nonexistent/ragtrain/missing.h5";
  try {
    read_dataset_info(path, MPI_COMM_WORLD);
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
}
