// The shard reader's direct path (issue 34): contiguous datasets read with pread into place, the HDF5 path for
// chunked and byte-swapped datasets giving the same shard, short reads named, checks and statistics that do not
// depend on the thread count.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/direct_read.hpp"
#include "ragtrain/data/h5.hpp"
#include "ragtrain/data/normalization.hpp"
#include "ragtrain/data/parallel_blocks.hpp"
#include "ragtrain/data/ragged_data.hpp"
#include "ragtrain/data/shard.hpp"
#include "ragtrain/data/synthetic.hpp"
#include "ragtrain/schedule/schedule.hpp"
#include "ragtrain/train/shard_window.hpp"
#include "unit_test_util.hpp"

using namespace ragtrain;
using ragtrain::test::TempDir;

namespace {

RaggedData data(int64_t n, int64_t min_len, int64_t max_len, int64_t F, Task task = Task::Classification) {
  SyntheticSpec spec;
  spec.sequences = n;
  spec.features = F;
  spec.min_length = min_len;
  spec.max_length = max_len;
  spec.task = task;
  spec.classes = 4;
  spec.outputs = 2;
  spec.seed = 5;
  return make_synthetic(spec);
}

// Every 3rd sequence, backwards: neither file order nor contiguous.
std::vector<int64_t> scattered(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = n - 1; i >= 0; i -= 3) v.push_back(i);
  return v;
}

void expect_same(const Shard& got, const Shard& want) {
  EXPECT_EQ(got.indices, want.indices);
  EXPECT_EQ(got.offsets, want.offsets);
  EXPECT_EQ(got.labels, want.labels);
  EXPECT_EQ(got.targets, want.targets);
  ASSERT_EQ(got.features.size(), want.features.size());
  EXPECT_EQ(0, std::memcmp(got.features.data(), want.features.data(), want.features.size() * sizeof(float)));
}

// Replaces dataset `name` of `path` by a copy of its values stored as `file_type`, chunked (and compressed where
// the library has deflate) when `chunk_rows` > 0: what h5py writes with chunks=True, compression="gzip".
void rewrite(const std::string& path, const char* name, hid_t file_type, hsize_t chunk_rows) {
  H5Handle file = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  ASSERT_TRUE(file);
  H5Handle old = h5_dataset(H5Dopen2(file.get(), name, H5P_DEFAULT));
  H5Handle space = h5_space(H5Dget_space(old.get()));
  H5Handle mem_type = h5_type(H5Tget_native_type(H5Dget_type(old.get()), H5T_DIR_DEFAULT));
  const auto elements = static_cast<size_t>(H5Sget_simple_extent_npoints(space.get()));
  std::vector<char> values(elements * H5Tget_size(mem_type.get()));
  ASSERT_GE(H5Dread(old.get(), mem_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
  old.reset();
  ASSERT_GE(H5Ldelete(file.get(), name, H5P_DEFAULT), 0);
  H5Handle dcpl = h5_plist(H5Pcreate(H5P_DATASET_CREATE));
  if (chunk_rows > 0) {
    std::vector<hsize_t> dims(static_cast<size_t>(H5Sget_simple_extent_ndims(space.get())));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    dims[0] = std::min(dims[0], chunk_rows);
    H5Pset_chunk(dcpl.get(), static_cast<int>(dims.size()), dims.data());
    if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) H5Pset_deflate(dcpl.get(), 4);
  }
  H5Handle d = h5_dataset(H5Dcreate2(file.get(), name, file_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  ASSERT_TRUE(d);
  ASSERT_GE(H5Dwrite(d.get(), mem_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
}

// Row `row`, feature 0 of /features set to `value`.
void poison(const std::string& path, int64_t row, float value) {
  H5Handle file = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  H5Handle d = h5_dataset(H5Dopen2(file.get(), "/features", H5P_DEFAULT));
  H5Handle space = h5_space(H5Dget_space(d.get()));
  const hsize_t start[2] = {static_cast<hsize_t>(row), 0}, count[2] = {1, 1}, one = 1;
  ASSERT_GE(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), 0);
  H5Handle mem = h5_space(H5Screate_simple(1, &one, nullptr));
  ASSERT_GE(H5Dwrite(d.get(), H5T_NATIVE_FLOAT, mem.get(), space.get(), H5P_DEFAULT, &value), 0);
}

}  // namespace

TEST(DirectRead, ContiguousDatasetsAreReadInPlaceWithTheValuesOfTheFile) {
  TempDir tmp;
  for (const Task task : {Task::Classification, Task::Regression}) {
    const RaggedData d = data(300, 1, 40, 5, task);
    const std::string path = tmp.file("contiguous.h5");
    write_dataset(path, d);
    const DatasetInfo info = read_dataset_info(path, MPI_COMM_SELF);
    ShardReadStats stats;
    const Shard got = read_shard(info, scattered(300), MPI_COMM_SELF, MemoryBudget::machine(), &stats);
    EXPECT_TRUE(stats.direct);
    const Shard want = make_shard(d, scattered(300));
    expect_same(got, want);
    const int64_t label_bytes = task == Task::Classification ? 4 : 8;
    EXPECT_EQ(stats.bytes, want.timesteps() * 5 * 4 + want.size() * label_bytes);
  }
}

// A chunked, compressed /features and big-endian /labels cannot be copied as they lie: HDF5 reads them, and the
// shard is the same.
TEST(DirectRead, ChunkedAndByteSwappedDatasetsGoThroughHdf5ToTheSameShard) {
  TempDir tmp;
  const RaggedData d = data(300, 1, 40, 5);
  const std::string path = tmp.file("chunked.h5");
  write_dataset(path, d);
  rewrite(path, "/features", H5T_IEEE_F32LE, 64);
  rewrite(path, "/labels", H5T_STD_I32BE, 0);
  const DatasetInfo info = read_dataset_info(path, MPI_COMM_SELF);
  {
    H5Handle file = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    H5Handle features = h5_dataset(H5Dopen2(file.get(), "/features", H5P_DEFAULT));
    H5Handle labels = h5_dataset(H5Dopen2(file.get(), "/labels", H5P_DEFAULT));
    EXPECT_FALSE(contiguous_offset(path, features.get(), H5T_NATIVE_FLOAT));
    EXPECT_FALSE(contiguous_offset(path, labels.get(), H5T_NATIVE_INT32));
  }
  ShardReadStats stats;
  const Shard got = read_shard(info, scattered(300), MPI_COMM_SELF, MemoryBudget::machine(), &stats);
  EXPECT_FALSE(stats.direct);
  expect_same(got, make_shard(d, scattered(300)));
}

TEST(DirectRead, RangesMergeOnlyWhenFileAndDestinationBothFollowOn) {
  std::vector<ByteRange> r;
  char buf[64];
  append_range(r, {100, 8, buf, 0});
  append_range(r, {108, 4, buf + 8, 1});    // merges
  append_range(r, {112, 4, buf + 20, 2});   // the file follows on, the destination does not
  append_range(r, {200, 4, buf + 24, 3});   // the destination follows on, the file does not
  append_range(r, {204, 0, buf + 28, 4});   // empty: nothing
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].bytes, 12);
  EXPECT_EQ(r[1].sequence, 2);
  EXPECT_EQ(r[2].file_offset, 200);
}

// Pieces smaller than the ranges, several threads: every byte lands in place. A range past the end of the file
// is named by its sequence, the earliest such range whatever thread met it first.
TEST(DirectRead, ReadRangesCopiesEveryByteAndNamesTheFirstShortRange) {
  TempDir tmp;
  const std::string path = tmp.file("bytes.bin");
  std::vector<char> file(10000);
  for (size_t i = 0; i < file.size(); ++i) file[i] = static_cast<char>(i * 7 + 3);
  std::ofstream(path, std::ios::binary).write(file.data(), static_cast<std::streamsize>(file.size()));

  std::vector<char> dest(3000, 0);
  const std::vector<ByteRange> ok = {{9000, 1000, dest.data(), 5}, {0, 1500, dest.data() + 1000, 6},
                                     {4000, 500, dest.data() + 2500, 7}};
  EXPECT_FALSE(read_ranges(path, ok, 3, 97));
  EXPECT_TRUE(std::equal(dest.begin(), dest.begin() + 1000, file.begin() + 9000));
  EXPECT_TRUE(std::equal(dest.begin() + 1000, dest.begin() + 2500, file.begin()));
  EXPECT_TRUE(std::equal(dest.begin() + 2500, dest.end(), file.begin() + 4000));

  const std::vector<ByteRange> short_reads = {{0, 100, dest.data(), 11}, {9950, 100, dest.data() + 100, 12},
                                              {20000, 10, dest.data() + 200, 13}};
  const std::optional<ReadFailure> failed = read_ranges(path, short_reads, 3, 16);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->sequence, 12);
  EXPECT_NE(failed->what.find("truncated"), std::string::npos) << failed->what;

  const std::optional<ReadFailure> missing = read_ranges(tmp.file("gone.bin"), ok, 2);
  ASSERT_TRUE(missing);
  EXPECT_NE(missing->what.find("could not be opened"), std::string::npos) << missing->what;
}

// The checks run on several threads in blocks of positions: the error is still the earliest position's.
TEST(DirectRead, ValueChecksReportTheEarliestBadSequence) {
  TempDir tmp;
  const RaggedData d = data(10000, 1, 3, 1);
  const std::string path = tmp.file("bad.h5");
  write_dataset(path, d);   // refuses non-finite values: they are written into the file afterwards
  poison(path, d.offsets[9000], std::numeric_limits<float>::quiet_NaN());
  poison(path, d.offsets[20], std::numeric_limits<float>::infinity());
  const DatasetInfo info = read_dataset_info(path, MPI_COMM_SELF);
  std::vector<int64_t> all(10000);
  std::iota(all.begin(), all.end(), 0);
  try {
    read_shard(info, all, MPI_COMM_SELF);
    FAIL() << "a non-finite feature was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 20"), std::string::npos) << e.what();
  }
}

TEST(DirectRead, ParallelBlocksRunsEveryBlockOnceAndRethrowsTheEarliestFailure) {
  std::vector<int> hits(1000, 0);
  parallel_blocks(1000, 4, [&](int64_t b) { hits[static_cast<size_t>(b)] += 1; });
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 1000);
  try {
    parallel_blocks(1000, 4, [&](int64_t b) {
      if (b == 700 || b == 300) throw std::runtime_error(std::to_string(b));
    });
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "300");
  }
}

// The statistics are merged over fixed blocks of rows, so the thread count changes no bit of them (the run is
// the same model on any machine), and they agree with the plain two-pass answer to rounding.
TEST(DirectRead, FeatureMomentsDoNotDependOnTheThreads) {
  const RaggedData d = data(3000, 40, 80, 3);   // ~180,000 rows: three blocks of kMomentRows
  std::vector<int64_t> all(3000);
  std::iota(all.begin(), all.end(), 0);
  const Shard s = make_shard(d, all);
  ASSERT_GT(s.timesteps(), 2 * kMomentRows);
  const FeatureMoments one = FeatureMoments::of(s, 1), four = FeatureMoments::of(s, 4);
  EXPECT_EQ(one.count, static_cast<double>(s.timesteps()));
  EXPECT_EQ(one.mean, four.mean);
  EXPECT_EQ(one.m2, four.m2);
  for (int64_t f = 0; f < 3; ++f) {
    double sum = 0;
    for (int64_t t = 0; t < s.timesteps(); ++t) sum += s.features[static_cast<size_t>(t * 3 + f)];
    EXPECT_NEAR(one.mean[static_cast<size_t>(f)], sum / one.count, 1e-9);
  }
  Shard a = s, b = s;
  const FeatureScaling sc = compute_scaling(s, MPI_COMM_SELF, 3);
  apply_scaling(sc, a, 1);
  apply_scaling(sc, b, 4);
  EXPECT_EQ(a.features, b.features);
}

// A streamed shard's statistics: the shard in pieces of uneven sizes (smaller and larger than a block) gives the
// same moments to the bit as the whole shard.
TEST(DirectRead, MomentStreamEqualsTheWholeShard) {
  const RaggedData d = data(3000, 40, 80, 3);
  std::vector<int64_t> all(3000);
  std::iota(all.begin(), all.end(), 0);
  const FeatureMoments whole = FeatureMoments::of(make_shard(d, all), 2);
  MomentStream stream(3);
  const std::vector<int64_t> cuts = {0, 1, 7, 1500, 1501, 2999, 3000};
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    const std::vector<int64_t> piece(all.begin() + cuts[c], all.begin() + cuts[c + 1]);
    stream.add(make_shard(d, piece), 3);
  }
  const FeatureMoments got = stream.finish();
  EXPECT_EQ(got.count, whole.count);
  EXPECT_EQ(got.mean, whole.mean);
  EXPECT_EQ(got.m2, whole.m2);
}

// A window's sequences are exactly those the schedule gives the rank in its steps, across an epoch boundary.
TEST(DirectRead, WindowSequencesAreTheScheduledOnes) {
  std::vector<int64_t> lengths(50);
  for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = 1 + static_cast<int64_t>(i % 7);
  const Schedule schedule(lengths, 2, 3, 9, ScheduleKind::Balanced);
  const int64_t spe = schedule.steps_per_epoch();
  Schedule::Epoch cache;
  int64_t cache_epoch = -1;
  for (int64_t rank = 0; rank < 2; ++rank) {
    const std::vector<int64_t> got = window_sequences(schedule, rank, spe - 2, spe + 3, cache, cache_epoch);
    std::vector<int64_t> want;
    for (int64_t s = spe - 2; s < spe + 3; ++s)
      for (int64_t g : schedule.epoch(s / spe).rank_batch(s % spe, rank))
        if (g >= 0) want.push_back(g);
    std::sort(want.begin(), want.end());
    want.erase(std::unique(want.begin(), want.end()), want.end());
    EXPECT_EQ(got, want);
    EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  }
}
