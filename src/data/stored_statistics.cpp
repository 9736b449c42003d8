// /statistics of a data file: the stored moments of every feature, read, checked, written.
#include "ragtrain/data/stored_statistics.hpp"

#include <cmath>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/h5.hpp"

namespace ragtrain {

namespace {

constexpr const char* kPartialGroup = "/statistics.partial";

std::string refresh_hint(const std::string& path) {
  return "rewrite them from the data with `ragtrain inspect " + path + " --write-statistics`, or delete the group "
         "(h5py: del f['statistics']) to have train compute them";
}

// A float64 dataset of the group, of shape (F); nullopt when it is missing or of another type or shape.
std::optional<std::vector<double>> read_column(hid_t group, const char* name, int64_t F) {
  if (H5Lexists(group, name, H5P_DEFAULT) <= 0) return std::nullopt;
  H5Handle dset = h5_dataset(H5Dopen2(group, name, H5P_DEFAULT));
  if (!dset) return std::nullopt;
  H5Handle space = h5_space(H5Dget_space(dset.get()));
  H5Handle type = h5_type(H5Dget_type(dset.get()));
  hsize_t dims[1] = {0};
  if (!space || !type || H5Tget_class(type.get()) != H5T_FLOAT || H5Sget_simple_extent_ndims(space.get()) != 1 ||
      H5Sget_simple_extent_dims(space.get(), dims, nullptr) < 0 || dims[0] != static_cast<hsize_t>(F))
    return std::nullopt;
  std::vector<double> v(static_cast<size_t>(F));
  if (H5Dread(dset.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0) return std::nullopt;
  return v;
}

void write_column(hid_t group, const char* name, const std::vector<double>& v) {
  const hsize_t n = v.size();
  H5Handle space = h5_space(H5_CHECK(H5Screate_simple(1, &n, nullptr)));
  H5Handle dset = h5_dataset(
      H5_CHECK(H5Dcreate2(group, name, H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Dwrite(dset.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()));
}

void write_group(hid_t file, const char* name, const StoredStatistics& s) {
  H5Handle group(H5_CHECK(H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)), H5Gclose);
  write_int_attr(group.get(), "rows", s.rows);
  write_int_attr(group.get(), "block_rows", kMomentRows);
  write_column(group.get(), "feature_mean", s.mean);
  write_column(group.get(), "feature_m2", s.m2);
}

}  // namespace

std::optional<StoredStatistics> read_statistics(hid_t file, const std::string& path, int64_t rows, int64_t F) {
  if (H5Lexists(file, kStatisticsGroup, H5P_DEFAULT) <= 0) return std::nullopt;
  const std::string where = path + ": the stored feature statistics (" + kStatisticsGroup + ")";
  H5Handle group(H5Gopen2(file, kStatisticsGroup, H5P_DEFAULT), H5Gclose);
  USER_CHECK(group, where << " are not a group", refresh_hint(path));
  const AttrKind rows_kind = attr_shape(group.get(), "rows").kind, block_kind = attr_shape(group.get(), "block_rows").kind;
  USER_CHECK(rows_kind == AttrKind::Integer && block_kind == AttrKind::Integer,
             where << " lack the integer attributes rows and block_rows", refresh_hint(path));
  StoredStatistics s;
  s.rows = read_int_attr(group.get(), "rows");
  const int64_t block_rows = read_int_attr(group.get(), "block_rows");
  USER_CHECK(block_rows == kMomentRows,
             where << " were computed over blocks of " << block_rows << " rows; this ragtrain uses " << kMomentRows,
             refresh_hint(path));
  USER_CHECK(s.rows == rows,
             where << " cover " << s.rows << " timesteps, but /features has " << rows
                   << " (the data was changed after they were written)",
             refresh_hint(path));
  std::optional<std::vector<double>> mean = read_column(group.get(), "feature_mean", F);
  std::optional<std::vector<double>> m2 = read_column(group.get(), "feature_m2", F);
  USER_CHECK(mean && m2, where << " need float datasets feature_mean and feature_m2 of shape (" << F << ")",
             refresh_hint(path));
  for (int64_t f = 0; f < F; ++f) {
    const double mu = (*mean)[static_cast<size_t>(f)], sq = (*m2)[static_cast<size_t>(f)];
    USER_CHECK(std::isfinite(mu) && std::isfinite(sq) && sq >= 0,
               where << " hold mean " << mu << " and m2 " << sq << " for feature " << f
                     << "; expected finite values and m2 >= 0",
               refresh_hint(path));
  }
  s.mean = std::move(*mean);
  s.m2 = std::move(*m2);
  return s;
}

StoredStatistics to_stored(const FeatureMoments& moments, int64_t rows) {
  RT_CHECK(moments.count == static_cast<double>(rows), "moments of " << moments.count << " rows stored as " << rows);
  return StoredStatistics{rows, moments.mean, moments.m2};
}

FeatureMoments from_stored(const StoredStatistics& stored) {
  FeatureMoments m;
  m.count = static_cast<double>(stored.rows);
  m.mean = stored.mean;
  m.m2 = stored.m2;
  return m;
}

void write_statistics(hid_t file, const StoredStatistics& stats) { write_group(file, kStatisticsGroup, stats); }

namespace {

H5Handle open_for_writing(const std::string& path) {
  H5Handle file = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  USER_CHECK(file, path << ": could not open the file for writing its statistics",
             "check that it is an HDF5 file you may write (`ragtrain inspect " + path + "`) and that no run has it open; if the file system lacks file locking, "
             "set HDF5_USE_FILE_LOCKING=FALSE");
  return file;
}

}  // namespace

void remove_statistics(const std::string& path) {
  H5QuietErrors quiet;
  H5Handle file = open_for_writing(path);
  if (H5Lexists(file.get(), kStatisticsGroup, H5P_DEFAULT) > 0)
    H5_CHECK(H5Ldelete(file.get(), kStatisticsGroup, H5P_DEFAULT));
  USER_CHECK(file.close() >= 0, path << ": removing the statistics failed", "check free space on the file system");
}

void store_statistics(const std::string& path, const StoredStatistics& stats) {
  H5QuietErrors quiet;
  H5Handle file = open_for_writing(path);
  if (H5Lexists(file.get(), kPartialGroup, H5P_DEFAULT) > 0) H5_CHECK(H5Ldelete(file.get(), kPartialGroup, H5P_DEFAULT));
  write_group(file.get(), kPartialGroup, stats);
  if (H5Lexists(file.get(), kStatisticsGroup, H5P_DEFAULT) > 0)
    H5_CHECK(H5Ldelete(file.get(), kStatisticsGroup, H5P_DEFAULT));
  H5_CHECK(H5Lmove(file.get(), kPartialGroup, file.get(), kStatisticsGroup, H5P_DEFAULT, H5P_DEFAULT));
  USER_CHECK(file.close() >= 0, path << ": writing the statistics failed", "check free space on the file system");
}

}  // namespace ragtrain
