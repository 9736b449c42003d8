// write_dataset: a whole data set written as format v1 by one process, atomically (temp file, fsync, rename),
// with its feature statistics (/statistics).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <thread>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/output_file.hpp"
#include "ragtrain/data/checks.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/h5.hpp"
#include "ragtrain/data/names.hpp"
#include "ragtrain/data/ragged_data.hpp"
#include "ragtrain/data/stored_statistics.hpp"

namespace ragtrain {

namespace {

// The same invariants the readers check, so a file this writes is always one they accept.
void check_data(const std::string& path, const RaggedData& d) {
  const int64_t n = d.num_sequences();
  USER_CHECK(d.num_features >= 1, path << ": cannot write " << d.num_features << " features; expected F >= 1", "");
  USER_CHECK(n >= 1, path << ": cannot write a data set without sequences", "");
  RT_CHECK(static_cast<int64_t>(d.features.size()) == d.offsets.back() * d.num_features,
           "features hold " << d.features.size() << " values for " << d.offsets.back() << " rows of "
                            << d.num_features);
  check_offsets(path, d.offsets, d.offsets.back());
  for (int64_t i = 0; i < n; ++i)
    check_finite_features(path, i, d.features.data() + d.offsets[static_cast<size_t>(i)] * d.num_features,
                          d.offsets[static_cast<size_t>(i + 1)] - d.offsets[static_cast<size_t>(i)], d.num_features);
  if (!d.names.empty()) check_sequence_names(path + ": dataset /names", d.names, n);
  if (!d.labeled) {
    RT_CHECK(d.labels.empty() && d.targets.empty() && d.class_names.empty() && d.num_outputs == 0,
             "a data set without labels holds " << d.labels.size() << " labels, " << d.targets.size()
                                                << " targets, " << d.class_names.size() << " class names");
  } else if (d.task == Task::Classification) {
    USER_CHECK(d.num_outputs >= 2, path << ": cannot write " << d.num_outputs << " classes; expected >= 2", "");
    RT_CHECK(static_cast<int64_t>(d.labels.size()) == n, d.labels.size() << " labels for " << n << " sequences");
    RT_CHECK(d.class_names.empty() || static_cast<int64_t>(d.class_names.size()) == d.num_outputs,
             d.class_names.size() << " class names for " << d.num_outputs << " classes");
    for (int64_t i = 0; i < n; ++i) check_label(path, i, d.labels[static_cast<size_t>(i)], d.num_outputs);
  } else {
    USER_CHECK(d.num_outputs >= 1, path << ": cannot write " << d.num_outputs << " targets; expected K >= 1", "");
    RT_CHECK(static_cast<int64_t>(d.targets.size()) == n * d.num_outputs,
             d.targets.size() << " targets for " << n << " sequences of " << d.num_outputs);
    RT_CHECK(d.class_names.empty(), "class names on a regression data set");
    for (int64_t i = 0; i < n; ++i)
      check_finite_targets(path, i, d.targets.data() + i * d.num_outputs, d.num_outputs);
  }
}

template <class T>
void write_array(hid_t file, const char* name, hid_t file_type, hid_t mem_type, const std::vector<hsize_t>& dims,
                 const T* data) {
  H5Handle space = h5_space(H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  H5Handle dset = h5_dataset(
      H5_CHECK(H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Dwrite(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
}

// task, and num_classes (+ class_names) or num_outputs: the attributes of a data set with labels.
void write_label_attrs(hid_t f, const RaggedData& data) {
  write_string_attr(f, "task", task_name(data.task));
  if (data.task == Task::Classification) {
    write_int_attr(f, "num_classes", data.num_outputs);
    if (!data.class_names.empty()) write_string_array_attr(f, "class_names", data.class_names);
  } else {
    write_int_attr(f, "num_outputs", data.num_outputs);
  }
}

}  // namespace

void write_dataset(const std::string& path, const RaggedData& data) {
  namespace fs = std::filesystem;
  H5QuietErrors quiet;
  check_data(path, data);

  const fs::path parent = fs::path(path).parent_path();
  const std::string folder = parent.empty() ? std::string(".") : parent.string();
  std::error_code ec;
  USER_CHECK(fs::is_directory(folder, ec), path << ": the folder " << folder << " does not exist",
             "create it first (mkdir -p " << folder << ") or choose another output path");
  USER_CHECK(::access(folder.c_str(), W_OK) == 0, path << ": the folder " << folder << " is not writable",
             "choose an output path in a folder you can write to");

  AtomicOutput tmp(path);   // a failed write leaves nothing behind, a kill the previous file or none
  {
    H5Handle file = h5_file(H5Fcreate(tmp.temp_path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    USER_CHECK(file, path << ": could not create the temporary file " << tmp.temp_path(),
               "check free space and permissions; if the file system lacks file locking, set "
               "HDF5_USE_FILE_LOCKING=FALSE");
    const hid_t f = file.get();
    write_string_attr(f, "format", kFormatName);
    write_int_attr(f, "version", kFormatVersion);
    const auto n = static_cast<hsize_t>(data.num_sequences());
    const auto F = static_cast<hsize_t>(data.num_features), K = static_cast<hsize_t>(data.num_outputs);
    // Without labels: no task attributes and no /labels (doc/data-format.md), nothing a reader could misread.
    if (data.labeled) write_label_attrs(f, data);
    if (!data.source.empty()) write_string_attr(f, "source", data.source);

    write_array(f, "/features", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {static_cast<hsize_t>(data.offsets.back()), F},
                data.features.data());
    write_array(f, "/offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, {n + 1}, data.offsets.data());
    if (!data.names.empty()) write_sequence_names(f, data.names);
    // The training statistics, so that train need not read the whole set before its first step (the moments
    // of the whole /features, as a one-rank run computes them).
    const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
    write_statistics(f, to_stored(FeatureMoments::of_rows(data.features.data(), data.offsets.back(),
                                                          data.num_features, threads),
                                  data.offsets.back()));
    if (data.labeled && data.task == Task::Classification)
      write_array(f, "/labels", H5T_STD_I32LE, H5T_NATIVE_INT32, {n}, data.labels.data());
    else if (data.labeled)
      write_array(f, "/labels", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {n, K}, data.targets.data());
    USER_CHECK(file.close() >= 0, path << ": writing the temporary file " << tmp.temp_path() << " failed",
               "check free space on the file system");
  }
  tmp.commit();   // fsync, rename over `path`, fsync of the folder
}

}  // namespace ragtrain
