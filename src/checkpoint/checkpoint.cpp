// Checkpoint write (atomic, one rank) and validated read.
#include "ragtrain/checkpoint/checkpoint.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/h5.hpp"
#include "ragtrain/metrics/metrics.hpp"

namespace ragtrain {

namespace {

void write_floats(hid_t parent, const std::string& name, const std::vector<int64_t>& shape, const float* data) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  H5Handle space = h5_space(H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  H5Handle ds = h5_dataset(H5_CHECK(
      H5Dcreate2(parent, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
}

// Reads a float32 dataset that must have exactly `shape`; UserError naming the file and dataset otherwise.
void read_floats(const std::string& path, hid_t file, const std::string& name, const std::vector<int64_t>& shape,
                 float* out) {
  const std::string hint = "the checkpoint is damaged or was written for another model; retrain or pick another file";
  USER_CHECK(H5Lexists(file, name.c_str(), H5P_DEFAULT) > 0, "checkpoint '" << path << "' has no dataset " << name,
             hint);
  H5Handle ds = h5_dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  USER_CHECK(ds, "checkpoint '" << path << "': cannot open " << name, hint);
  H5Handle space = h5_space(H5Dget_space(ds.get()));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(rank, 0)));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  bool same = rank == static_cast<int>(shape.size());
  for (size_t i = 0; same && i < shape.size(); ++i) same = static_cast<int64_t>(dims[i]) == shape[i];
  std::string want;
  for (int64_t d : shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
  USER_CHECK(same, "checkpoint '" << path << "': " << name << " does not have shape (" << want << ")", hint);
  H5Handle type = h5_type(H5Dget_type(ds.get()));
  USER_CHECK(H5Tget_class(type.get()) == H5T_FLOAT && H5Tget_size(type.get()) == 4,
             "checkpoint '" << path << "': " << name << " is " << type_name(type.get()) << ", expected float32", hint);
  USER_CHECK(H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0,
             "checkpoint '" << path << "': reading " << name << " failed", hint);
}

int64_t positive_attr(const std::string& path, hid_t file, const char* name) {
  const AttrShape s = attr_shape(file, name);
  USER_CHECK(s.kind == AttrKind::Integer && s.elements == 1,
             "checkpoint '" << path << "': attribute " << name << " is missing or not an integer",
             "the file was not written by ragtrain train, or is damaged");
  const int64_t v = read_int_attr(file, name);
  USER_CHECK(v >= 0, "checkpoint '" << path << "': attribute " << name << " = " << v << " is negative",
             "the file is damaged");
  return v;
}

}  // namespace

void write_checkpoint(const std::string& path, const Checkpoint& c) {
  const ParamLayout layout(c.shape);
  RT_CHECK(static_cast<int64_t>(c.params.size()) == layout.total(), "checkpoint parameter count");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    H5QuietErrors quiet;
    H5Handle file = h5_file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    USER_CHECK(file, "cannot create checkpoint '" << tmp << "'", "check that the output folder is writable");
    const hid_t f = file.get();
    write_string_attr(f, "format", kCheckpointFormat);
    write_int_attr(f, "version", kCheckpointVersion);
    write_string_attr(f, "task", task_name(c.shape.task));
    write_int_attr(f, "input_size", c.shape.input_size);
    write_int_attr(f, "hidden", c.shape.hidden);
    write_int_attr(f, "layers", c.shape.layers);
    write_int_attr(f, "outputs", c.shape.outputs);
    write_int_attr(f, "epoch", c.epoch);
    write_int_attr(f, "step", c.step);
    write_string_attr(f, "config", c.config);
    write_string_attr(f, "optimizer", c.optimizer);
    write_int_attr(f, "optimizer_steps", c.optimizer_steps);
    if (!c.class_names.empty()) write_string_array_attr(f, "class_names", c.class_names);

    // Parameters under PyTorch's state_dict names (lstm.weight_ih_l0, ..., fc.bias) and shapes.
    const hid_t g = H5_CHECK(H5Gcreate2(f, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Handle group(g, H5Gclose);
    for (const ParamTensor& t : layout.tensors()) write_floats(g, t.name, t.shape, c.params.data() + t.offset);
    if (!c.opt_m.empty()) {
      H5Handle opt(H5_CHECK(H5Gcreate2(f, "optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)), H5Gclose);
      write_floats(opt.get(), "m", {static_cast<int64_t>(c.opt_m.size())}, c.opt_m.data());
      if (!c.opt_v.empty()) write_floats(opt.get(), "v", {static_cast<int64_t>(c.opt_v.size())}, c.opt_v.data());
    }
    if (!c.feature_mean.empty()) {
      H5Handle norm(H5_CHECK(H5Gcreate2(f, "normalization", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)), H5Gclose);
      write_floats(norm.get(), "mean", {c.shape.input_size}, c.feature_mean.data());
      write_floats(norm.get(), "std", {c.shape.input_size}, c.feature_std.data());
    }
    group.reset();
    if (file.close() < 0) {
      std::remove(tmp.c_str());
      throw UserError("writing checkpoint '" + tmp + "' failed (disk full?)", "free space in the output folder");
    }
  }
  commit_file(tmp, path);
}

Checkpoint read_checkpoint(const std::string& path) {
  H5QuietErrors quiet;
  const std::string hint = "pass a checkpoint.h5 written by `ragtrain train`";
  USER_CHECK(::access(path.c_str(), R_OK) == 0, "checkpoint '" << path << "' does not exist or is not readable", hint);
  USER_CHECK(H5Fis_hdf5(path.c_str()) > 0, "checkpoint '" << path << "' is not an HDF5 file", hint);
  H5Handle file = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  USER_CHECK(file, "checkpoint '" << path << "' cannot be opened", hint);
  const hid_t f = file.get();
  USER_CHECK(attr_shape(f, "format").kind == AttrKind::String && read_string_attr(f, "format") == kCheckpointFormat,
             "'" << path << "' is not a ragtrain checkpoint (attribute format != " << kCheckpointFormat << ")", hint);
  const int64_t version = positive_attr(path, f, "version");
  USER_CHECK(version == kCheckpointVersion,
             "checkpoint '" << path << "' has version " << version << ", this ragtrain reads version "
                            << kCheckpointVersion,
             "use the ragtrain release that wrote it, or retrain");
  Checkpoint c;
  const std::string task = attr_shape(f, "task").kind == AttrKind::String ? read_string_attr(f, "task") : "";
  USER_CHECK(task == "classification" || task == "regression",
             "checkpoint '" << path << "': attribute task is '" << task << "'", "the file is damaged");
  c.shape.task = task == "classification" ? Task::Classification : Task::Regression;
  c.shape.input_size = positive_attr(path, f, "input_size");
  c.shape.hidden = positive_attr(path, f, "hidden");
  c.shape.layers = positive_attr(path, f, "layers");
  c.shape.outputs = positive_attr(path, f, "outputs");
  USER_CHECK(c.shape.input_size > 0 && c.shape.hidden > 0 && c.shape.layers > 0 && c.shape.outputs > 0,
             "checkpoint '" << path << "': model sizes must be positive", "the file is damaged");
  c.epoch = positive_attr(path, f, "epoch");
  c.step = positive_attr(path, f, "step");
  if (attr_shape(f, "config").kind == AttrKind::String) c.config = read_string_attr(f, "config");
  if (attr_shape(f, "optimizer").kind == AttrKind::String) c.optimizer = read_string_attr(f, "optimizer");
  if (attr_shape(f, "optimizer_steps").kind == AttrKind::Integer) c.optimizer_steps = positive_attr(path, f, "optimizer_steps");
  if (attr_shape(f, "class_names").kind == AttrKind::String) c.class_names = read_string_array_attr(f, "class_names");

  const ParamLayout layout(c.shape);
  c.params.resize(static_cast<size_t>(layout.total()));
  for (const ParamTensor& t : layout.tensors())
    read_floats(path, f, "params/" + t.name, t.shape, c.params.data() + t.offset);
  if (H5Lexists(f, "optimizer", H5P_DEFAULT) > 0) {
    c.opt_m.resize(c.params.size());
    read_floats(path, f, "optimizer/m", {layout.total()}, c.opt_m.data());
    if (H5Lexists(f, "optimizer/v", H5P_DEFAULT) > 0) {
      c.opt_v.resize(c.params.size());
      read_floats(path, f, "optimizer/v", {layout.total()}, c.opt_v.data());
    }
  }
  if (H5Lexists(f, "normalization", H5P_DEFAULT) > 0) {
    c.feature_mean.resize(static_cast<size_t>(c.shape.input_size));
    c.feature_std.resize(static_cast<size_t>(c.shape.input_size));
    read_floats(path, f, "normalization/mean", {c.shape.input_size}, c.feature_mean.data());
    read_floats(path, f, "normalization/std", {c.shape.input_size}, c.feature_std.data());
    for (float v : c.feature_std)
      USER_CHECK(std::isfinite(v) && v > 0, "checkpoint '" << path << "': normalization/std holds " << v,
                 "the file is damaged; retrain");
  }
  return c;
}

}  // namespace ragtrain
