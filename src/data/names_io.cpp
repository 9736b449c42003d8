// Sequence names (/names) in a file: the serial read of a file's names (checked) and the write.
#include <algorithm>
#include <cstdint>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/memory.hpp"
#include "ragtrain/data/h5.hpp"
#include "ragtrain/data/names.hpp"

namespace ragtrain {

std::vector<std::string> read_sequence_names(const DatasetInfo& info, const MemoryBudget& budget) {
  RT_CHECK(info.has_names, "read_sequence_names on " << info.path << ", which has no /names");
  H5QuietErrors quiet;
  const std::string& path = info.path;
  H5Handle file = open_file_parallel(path, MPI_COMM_SELF);
  USER_CHECK(file, path << ": HDF5 could not open the file", "the file may have changed since it was checked");
  const std::string what = "dataset /names";
  H5Handle dset = h5_dataset(h5_read_check(H5Dopen2(file.get(), "/names", H5P_DEFAULT), file.get(), what));
  H5Handle file_type = h5_type(h5_read_check(H5Dget_type(dset.get()), file.get(), what));
  const bool variable = h5_read_check(H5Tis_variable_str(file_type.get()), file.get(), what) > 0;
  const H5T_cset_t cset = H5Tget_cset(file_type.get());
  if (cset != H5T_CSET_ASCII && cset != H5T_CSET_UTF8)
    throw_damaged(file.get(), RT_MSG(what << " (character set " << static_cast<int>(cset) << ", neither ASCII nor UTF-8)"));
  const auto n = static_cast<size_t>(info.num_sequences);
  H5Handle space = h5_space(h5_read_check(H5Dget_space(dset.get()), file.get(), what));
  USER_CHECK(h5_read_check(H5Sget_simple_extent_npoints(space.get()), file.get(), what) == info.num_sequences,
             path << ": dataset /names no longer holds " << n << " names", "the file changed while it was read");
  // One byte more than the stored width, so that a NUL-padded name filling its width keeps its last byte.
  const size_t width = variable ? sizeof(char*) : H5Tget_size(file_type.get()) + 1;
  const int64_t bytes = width > static_cast<size_t>(INT64_MAX) / std::max<size_t>(n, 1)
                            ? INT64_MAX : static_cast<int64_t>(n * width);
  check_fits(bytes, budget.bytes,
             RT_MSG(path << ": reading dataset /names (" << n << " strings of " << width << " bytes)"),
             budget.max_memory);

  H5Handle mem_type = h5_type(H5_CHECK(H5Tcopy(H5T_C_S1)));
  H5_CHECK(H5Tset_cset(mem_type.get(), cset));
  std::vector<std::string> names;
  names.reserve(n);
  if (variable) {
    H5_CHECK(H5Tset_size(mem_type.get(), H5T_VARIABLE));
    std::vector<char*> ptrs(n, nullptr);
    h5_read_check(H5Dread(dset.get(), mem_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), file.get(), what);
    for (char* p : ptrs) {
      names.emplace_back(p != nullptr ? p : "");
      H5free_memory(p);
    }
  } else {
    H5_CHECK(H5Tset_size(mem_type.get(), width));
    H5_CHECK(H5Tset_strpad(mem_type.get(), H5T_STR_NULLTERM));
    std::vector<char> buf(n * width, '\0');
    h5_read_check(H5Dread(dset.get(), mem_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), file.get(), what);
    for (size_t i = 0; i < n; ++i) names.emplace_back(buf.data() + i * width);
  }
  check_sequence_names(path + ": dataset /names", names, info.num_sequences);
  return names;
}

void write_sequence_names(hid_t file, const std::vector<std::string>& names) {
  size_t width = 1;
  for (const std::string& s : names) width = std::max(width, s.size());
  H5Handle type = h5_type(H5_CHECK(H5Tcopy(H5T_C_S1)));
  H5_CHECK(H5Tset_size(type.get(), width));
  H5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  H5_CHECK(H5Tset_strpad(type.get(), H5T_STR_NULLPAD));
  std::vector<char> buf(names.size() * width, '\0');
  for (size_t i = 0; i < names.size(); ++i) std::copy(names[i].begin(), names[i].end(), buf.begin() + i * width);
  const hsize_t n = names.size();
  H5Handle space = h5_space(H5_CHECK(H5Screate_simple(1, &n, nullptr)));
  H5Handle dset = h5_dataset(
      H5_CHECK(H5Dcreate2(file, "/names", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Dwrite(dset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()));
}

}  // namespace ragtrain
