// read_dataset_info: the collective open of a format v1 file and the validation of its header and offsets.
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/stored_statistics.hpp"

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <limits>
#include <optional>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/memory.hpp"
#include "ragtrain/data/checks.hpp"
#include "ragtrain/data/h5.hpp"

namespace ragtrain {

std::vector<int64_t> DatasetInfo::lengths() const {
  std::vector<int64_t> out(static_cast<size_t>(num_sequences));
  for (int64_t i = 0; i < num_sequences; ++i) out[static_cast<size_t>(i)] = length(i);
  return out;
}

namespace {

const char* const kWriteHint =
    "create data sets with `ragtrain gen`, `ragtrain convert` (from .ts files), or with h5py as shown in "
    "doc/data-format.md";

std::string inspect_hint(const std::string& path) {
  return "run `ragtrain inspect " + path + "` for a full report; the format is specified in doc/data-format.md";
}

std::string shape_string(const std::vector<hsize_t>& dims) {
  std::ostringstream s;
  s << "(";
  for (size_t i = 0; i < dims.size(); ++i) s << (i ? ", " : "") << dims[i];
  s << (dims.size() == 1 ? ",)" : ")");
  return s.str();
}

// How to turn `path`, an input of `convert` given where a data set belongs, into one: the command itself, with the
// output named after the input, for the kinds convert reads (.ts, .npz, a folder of CSV files); else kWriteHint.
std::string convert_hint(const std::string& path, bool folder) {
  namespace fs = std::filesystem;
  fs::path p(path);
  if (folder && !p.has_filename()) p = p.parent_path();   // "data/" -> data.h5
  std::string ext = p.extension().string();
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const std::string h5 = fs::path(p).replace_extension(".h5").string();
  if (folder)
    return "if the folder holds one CSV file per sequence, convert it first: `ragtrain convert " + path + " " +
           p.string() + ".h5` (add --labels LABELS.csv for its labels; doc/data-format.md, "
           "\"Bring your own data\"); otherwise " + kWriteHint;
  if (ext == ".ts" || ext == ".npz")
    return "convert it to a data set first: `ragtrain convert " + path + " " + h5 + "`, then pass " + h5;
  if (ext == ".csv")
    return "convert reads CSV files as a folder of them, one per sequence: `ragtrain convert FOLDER --labels "
           "LABELS.csv FOLDER.h5` (doc/data-format.md, \"Bring your own data\"), then pass the .h5 file";
  return kWriteHint;
}

// The problem that keeps `path` from being opened as HDF5, if any. Checked before H5Fopen so the message
// says what is wrong (missing, a folder, unreadable, not HDF5) instead of HDF5's generic failure.
std::optional<UserError> open_problem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) {
    const fs::path cwd = fs::current_path(ec);
    return UserError(path + ": no such file",
                     "check the path; a relative path is taken from the working directory (" + cwd.string() +
                         ") of every rank, which must all see the same file system");
  }
  if (fs::is_directory(st)) return UserError(path + ": is a folder; expected an HDF5 file", convert_hint(path, true));
  if (::access(path.c_str(), R_OK) != 0)
    return UserError(path + ": cannot be read (permission denied)", "check the file's permissions (chmod a+r)");
#if H5_VERSION_GE(1, 12, 0)
  const htri_t is_hdf5 = H5Fis_accessible(path.c_str(), H5P_DEFAULT);
#else
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
#endif
  if (is_hdf5 <= 0) return UserError(path + ": is not an HDF5 file", convert_hint(path, false));
  return std::nullopt;
}

}  // namespace

// The ranks must agree before a collective call: the lowest rank that found a problem sends it to the
// others, so every rank throws the same UserError instead of some entering H5Fopen and waiting forever.
void throw_if_any_rank_failed(MPI_Comm comm, const std::optional<UserError>& local) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  int mine = local ? rank : size, first = size;
  MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == size) return;
  std::string packed = local ? std::string(local->what()) + '\0' + local->hint() : std::string();
  int64_t len = static_cast<int64_t>(packed.size());
  MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT64_T, first, comm));
  packed.resize(static_cast<size_t>(len));
  MPI_CHECK(MPI_Bcast(packed.data(), static_cast<int>(len), MPI_CHAR, first, comm));
  if (local) throw *local;
  const size_t split = packed.find('\0');
  throw UserError(packed.substr(0, split) + " (seen by rank " + std::to_string(first) + ")",
                  split == std::string::npos ? std::string() : packed.substr(split + 1));
}

MemoryBudget MemoryBudget::of(const std::string& max_memory, int ranks_on_node) {
  return MemoryBudget{memory_budget(max_memory, ranks_on_node), max_memory};
}

namespace {

// A root attribute holding one value of the expected kind; nullopt when absent and not required.
std::optional<AttrShape> root_attr(hid_t file, const std::string& path, const char* name, AttrKind kind,
                                   bool required, const std::string& expected) {
  const AttrShape shape = attr_shape(file, name);
  if (shape.kind == AttrKind::Missing) {
    USER_CHECK(!required, path << ": root attribute '" << name << "' is missing; expected " << expected,
               (std::string(name) == "format" ? "this is not a ragtrain data set; " : "") << kWriteHint);
    return std::nullopt;
  }
  USER_CHECK(shape.kind == kind,
             path << ": root attribute '" << name << "' is a " << shape.type << "; expected " << expected,
             kWriteHint);
  USER_CHECK(shape.elements == 1,
             path << ": root attribute '" << name << "' holds " << shape.elements << " values; expected "
                  << expected,
             kWriteHint);
  return shape;
}

std::string required_string(hid_t file, const std::string& path, const char* name, const std::string& expected) {
  root_attr(file, path, name, AttrKind::String, true, expected);
  return read_string_attr(file, name);
}

int64_t required_int(hid_t file, const std::string& path, const char* name, const std::string& expected) {
  root_attr(file, path, name, AttrKind::Integer, true, expected);
  return read_int_attr(file, name);
}

void forbid_attr(hid_t file, const std::string& path, const char* name, const char* why) {
  USER_CHECK(attr_shape(file, name).kind == AttrKind::Missing,
             path << ": root attribute '" << name << "' is present; " << why, kWriteHint);
}

// An opened dataset with its datatype and shape, or a UserError if the name is missing or not a dataset.
struct OpenDataset {
  H5Handle dset, type;
  std::vector<hsize_t> dims;
};

OpenDataset open_dataset(hid_t file, const std::string& path, const char* name, const std::string& expected) {
  USER_CHECK(H5Lexists(file, name, H5P_DEFAULT) > 0,
             path << ": dataset " << name << " is missing; expected " << expected, kWriteHint);
  OpenDataset d;
  d.dset = h5_dataset(H5Dopen2(file, name, H5P_DEFAULT));
  USER_CHECK(d.dset, path << ": " << name << " is not a dataset (a group or a broken link?); expected " << expected,
             kWriteHint);
  // Failures from here on are the file's (a damaged header), not bugs: UserError naming the dataset.
  const std::string what = RT_MSG("dataset " << name);
  d.type = h5_type(h5_read_check(H5Dget_type(d.dset.get()), file, what));
  H5Handle space = h5_space(h5_read_check(H5Dget_space(d.dset.get()), file, what));
  const int rank = h5_read_check(H5Sget_simple_extent_ndims(space.get()), file, what);
  d.dims.resize(static_cast<size_t>(rank));
  if (rank > 0) h5_read_check(H5Sget_simple_extent_dims(space.get(), d.dims.data(), nullptr), file, what);
  // A compression filter this HDF5 library lacks (h5py's lzf, a plugin's blosc) makes every read fail later with
  // no reason given: name it now.
  H5Handle dcpl(H5Dget_create_plist(d.dset.get()), H5Pclose);
  const int filters = dcpl ? H5Pget_nfilters(dcpl.get()) : 0;
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0;
    size_t n_values = 0;
    char filter_name[64] = "";
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &n_values, nullptr,
                                           sizeof filter_name, filter_name, nullptr);
    USER_CHECK(id < 0 || H5Zfilter_avail(id) > 0,
               path << ": " << name << " is stored with HDF5 filter " << id << " (" << filter_name
                    << "), which this HDF5 library does not have",
               "rewrite the file without it, e.g. `h5repack -f NONE " << path
                                                                      << " plain.h5`, or with gzip (h5py: "
                                                                         "compression=\"gzip\")");
  }
  return d;
}

bool is_float32(hid_t type) { return H5Tget_class(type) == H5T_FLOAT && H5Tget_size(type) == 4; }
bool is_signed_int(hid_t type, size_t bytes) {
  return H5Tget_class(type) == H5T_INTEGER && H5Tget_size(type) == bytes && H5Tget_sign(type) == H5T_SGN_2;
}

void expect_dtype(const std::string& path, const char* name, const OpenDataset& d, bool ok, const char* dtype,
                  const char* numpy_fix) {
  USER_CHECK(ok,
             path << ": dataset " << name << " has dtype " << type_name(d.type.get()) << "; expected " << dtype,
             "store it as " << dtype << " (numpy: " << numpy_fix << ")");
}

void expect_rank(const std::string& path, const char* name, const OpenDataset& d, size_t rank,
                 const char* shape) {
  USER_CHECK(d.dims.size() == rank,
             path << ": dataset " << name << " has " << d.dims.size() << " dimension(s), shape "
                  << shape_string(d.dims) << "; expected " << rank << "-D " << shape,
             kWriteHint);
}

// The attributes of a file with labels: task, and num_classes (+ class_names) or num_outputs. A file that
// declares a task has /labels (`has_labels`), or it was damaged or written incompletely.
void validate_task(hid_t file, const std::string& path, bool has_labels, DatasetInfo& info) {
  const std::string task = required_string(file, path, "task", "\"classification\" or \"regression\"");
  USER_CHECK(task == "classification" || task == "regression",
             path << ": root attribute 'task' is \"" << task << "\"; expected \"classification\" or \"regression\"",
             kWriteHint);
  info.task = task == "classification" ? Task::Classification : Task::Regression;
  USER_CHECK(has_labels,
             path << ": dataset /labels is missing, but root attribute 'task' says \"" << task
                  << "\"; expected " << (info.task == Task::Classification ? "int32 (N,)" : "float32 (N, num_outputs)")
                  << " labels",
             "add /labels; or, for a data set without labels (predict and inspect only), leave out /labels and the "
             "attributes task, num_classes, num_outputs and class_names (doc/data-format.md)");

  if (info.task == Task::Classification) {
    info.num_outputs = required_int(file, path, "num_classes", "an integer >= 2 (the number of classes)");
    USER_CHECK(info.num_outputs >= 2 && info.num_outputs <= INT32_MAX,
               path << ": root attribute 'num_classes' is " << info.num_outputs << "; expected 2.." << INT32_MAX,
               "a classification data set has at least two classes");
    forbid_attr(file, path, "num_outputs", "it belongs to regression files; classification files use 'num_classes'");
    const AttrShape names = attr_shape(file, "class_names");
    if (names.kind != AttrKind::Missing) {
      USER_CHECK(names.kind == AttrKind::String && names.elements == info.num_outputs,
                 path << ": root attribute 'class_names' is a " << names.type << " with " << names.elements
                      << " value(s); expected " << info.num_outputs << " strings (num_classes)",
                 "store one name per class, in class-index order, or leave the attribute out");
      info.class_names = read_string_array_attr(file, "class_names");
    }
  } else {
    info.num_outputs = required_int(file, path, "num_outputs", "an integer >= 1 (K, the targets per sequence)");
    USER_CHECK(info.num_outputs >= 1,
               path << ": root attribute 'num_outputs' is " << info.num_outputs << "; expected >= 1",
               "num_outputs is K, the second dimension of /labels");
    forbid_attr(file, path, "num_classes", "it belongs to classification files; regression files use 'num_outputs'");
    forbid_attr(file, path, "class_names", "class names only make sense for classification");
  }
}

// /labels of a file with labels: int32 (N,) for classification, float32 (N, K) for regression.
void validate_labels(hid_t file, const std::string& path, const DatasetInfo& info) {
  const OpenDataset labels = open_dataset(
      file, path, "/labels", info.task == Task::Classification ? "int32 (N,)" : "float32 (N, num_outputs)");
  if (info.task == Task::Classification) {
    expect_dtype(path, "/labels", labels, is_signed_int(labels.type.get(), 4), "int32", "y.astype(np.int32)");
    expect_rank(path, "/labels", labels, 1, "(N,)");
    USER_CHECK(static_cast<int64_t>(labels.dims[0]) == info.num_sequences,
               path << ": dataset /labels has " << labels.dims[0] << " labels but /offsets describes "
                    << info.num_sequences << " sequences; expected one label per sequence",
               inspect_hint(path));
  } else {
    expect_dtype(path, "/labels", labels, is_float32(labels.type.get()), "float32", "y.astype(np.float32)");
    expect_rank(path, "/labels", labels, 2, "(N, num_outputs)");
    USER_CHECK(static_cast<int64_t>(labels.dims[0]) == info.num_sequences &&
                   static_cast<int64_t>(labels.dims[1]) == info.num_outputs,
               path << ": dataset /labels has shape " << shape_string(labels.dims) << "; expected ("
                    << info.num_sequences << ", " << info.num_outputs << ") = (N, num_outputs)",
               inspect_hint(path));
  }
}

// /names, when present: N strings (fixed or variable length), 1-D. The names themselves are read by those who
// print them (read_sequence_names: predict, inspect), not by every rank of every run.
bool validate_names(hid_t file, const std::string& path, const DatasetInfo& info) {
  if (H5Lexists(file, "/names", H5P_DEFAULT) <= 0) return false;
  const OpenDataset names = open_dataset(file, path, "/names", "strings (N,)");
  USER_CHECK(H5Tget_class(names.type.get()) == H5T_STRING,
             path << ": dataset /names has dtype " << type_name(names.type.get()) << "; expected strings",
             "store names as strings (h5py: f[\"names\"] = numpy.array([n.encode() for n in names])), or leave "
             "/names out");
  expect_rank(path, "/names", names, 1, "(N,)");
  USER_CHECK(static_cast<int64_t>(names.dims[0]) == info.num_sequences,
             path << ": dataset /names has " << names.dims[0] << " names but /offsets describes " << info.num_sequences
                  << " sequences; expected one name per sequence",
             inspect_hint(path));
  return true;
}

// Everything read_dataset_info promises, on an opened file. Every rank runs it on the same bytes.
DatasetInfo validate(hid_t file, const std::string& path, const MemoryBudget& budget) {
  DatasetInfo info;
  info.path = path;

  const std::string format = required_string(file, path, "format", RT_MSG("the string \"" << kFormatName << "\""));
  USER_CHECK(format == kFormatName,
             path << ": root attribute 'format' is \"" << format << "\"; expected \"" << kFormatName << "\"",
             "this is not a ragtrain data set; " << kWriteHint);
  const int64_t version = required_int(file, path, "version", RT_MSG("the integer " << kFormatVersion));
  USER_CHECK(version == kFormatVersion,
             path << ": root attribute 'version' is " << version << "; this ragtrain reads version "
                  << kFormatVersion,
             "rewrite the file in format version " << kFormatVersion << " (doc/data-format.md)");
  // /labels is optional: a file without it, and without the attributes that describe labels, is a data set
  // for predict and inspect (train and eval refuse it, require_labels).
  const bool has_labels = H5Lexists(file, "/labels", H5P_DEFAULT) > 0;
  if (!has_labels && attr_shape(file, "task").kind == AttrKind::Missing) {
    for (const char* name : {"num_classes", "num_outputs", "class_names"})
      USER_CHECK(attr_shape(file, name).kind == AttrKind::Missing,
                 path << ": root attribute '" << name << "' is present but the file has no /labels and no 'task'",
                 "a data set without labels (for predict and inspect) has neither; add /labels and 'task' (see "
                 "doc/data-format.md), or delete the attribute");
    info.labeled = false;
  } else {
    validate_task(file, path, has_labels, info);
  }
  root_attr(file, path, "source", AttrKind::String, false, "a string (provenance)");

  const OpenDataset features = open_dataset(file, path, "/features", "float32 (total_timesteps, F)");
  expect_dtype(path, "/features", features, is_float32(features.type.get()), "float32", "x.astype(np.float32)");
  expect_rank(path, "/features", features, 2, "(total_timesteps, F)");
  USER_CHECK(features.dims[1] >= 1,
             path << ": dataset /features has shape " << shape_string(features.dims) << "; expected F >= 1 columns",
             kWriteHint);

  const OpenDataset offsets = open_dataset(file, path, "/offsets", "int64 (N + 1)");
  expect_dtype(path, "/offsets", offsets, is_signed_int(offsets.type.get(), 8), "int64", "o.astype(np.int64)");
  expect_rank(path, "/offsets", offsets, 1, "(N + 1)");
  USER_CHECK(offsets.dims[0] >= 2,
             path << ": dataset /offsets has shape " << shape_string(offsets.dims)
                  << "; expected N + 1 >= 2 entries (at least one sequence)",
             kWriteHint);
  info.num_sequences = static_cast<int64_t>(offsets.dims[0]) - 1;
  info.num_features = static_cast<int64_t>(features.dims[1]);

  if (info.labeled) validate_labels(file, path, info);
  info.has_names = validate_names(file, path, info);

  // Checked arithmetic on the declared sizes: a header may claim anything up to 2^64 rows, and every later
  // computation (bytes of a shard, lengths) relies on rows x F x 4 fitting an int64.
  const int64_t max_rows = std::numeric_limits<int64_t>::max() / 4 / info.num_features;
  USER_CHECK(features.dims[0] <= static_cast<hsize_t>(max_rows) && offsets.dims[0] <= static_cast<hsize_t>(max_rows),
             path << ": dataset /features has shape " << shape_string(features.dims) << " and /offsets "
                  << shape_string(offsets.dims) << "; more than 2^63 bytes, which no machine can hold",
             "the header is damaged or was written with wrong sizes; " << inspect_hint(path));
  // /offsets is the one dataset read whole, by every rank: its size is checked before it is allocated. More
  // ranks do not help here (check_fits's usual advice), so the hint says what does.
  try {
    check_fits(static_cast<int64_t>(offsets.dims[0]) * 8, budget.bytes,
               RT_MSG(path << ": reading dataset /offsets (" << offsets.dims[0] << " int64 entries, N + 1)"),
               budget.max_memory);
  } catch (const UserError& e) {
    throw UserError(e.what(), RT_MSG("every rank reads /offsets whole; if the file really holds "
                                     << info.num_sequences << " sequences, raise --max-memory or split it into "
                                        "several files; otherwise its header is damaged: "
                                     << inspect_hint(path)));
  }
  info.offsets.resize(offsets.dims[0]);
  USER_CHECK(H5Dread(offsets.dset.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, info.offsets.data()) >= 0,
             path << ": dataset /offsets could not be read", "the file may be truncated or damaged; " << inspect_hint(path));
  check_offsets(path, info.offsets, static_cast<int64_t>(features.dims[0]));
  info.total_timesteps = info.offsets.back();
  try {
    info.statistics = read_statistics(file, path, info.total_timesteps, info.num_features);
  } catch (const UserError& e) {
    info.statistics_error = e;
  }
  return info;
}

}  // namespace

DatasetInfo read_dataset_info(const std::string& path, MPI_Comm comm, const MemoryBudget& budget) {
  H5QuietErrors quiet;
  throw_if_any_rank_failed(comm, open_problem(path));
  H5Handle file = open_file_parallel(path, comm);
  USER_CHECK(file, path << ": HDF5 could not open the file through MPI-IO",
             "the file may be truncated or damaged (try `h5dump -H " << path
                 << "`); if the file system does not support file locking, set HDF5_USE_FILE_LOCKING=FALSE");
  return validate(file.get(), path, budget);
}

void require_labels(const DatasetInfo& info, const std::string& option, const std::string& needed_for) {
  USER_CHECK(info.labeled,
             option << " " << info.path << ": the data set has no labels (no /labels dataset); " << needed_for
                    << " needs a label or target per sequence",
             "pass a data set with labels (convert it from a .ts file with @classLabel true ..., a CSV folder with "
             "--labels FILE,LABEL, or an .npz file with a labels array); a data set without labels is for `ragtrain "
             "predict` and `ragtrain inspect`");
}

DatasetInfo validate_dataset(int64_t file, const std::string& path, const MemoryBudget& budget) {
  H5QuietErrors quiet;
  return validate(static_cast<hid_t>(file), path, budget);
}

}  // namespace ragtrain
