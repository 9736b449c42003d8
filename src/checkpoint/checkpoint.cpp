// Checkpoint write (atomic, one rank) and validated read, with a CRC-32 per tensor.
#include "ragtrain/checkpoint/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>

#include "ragtrain/checkpoint/checksum.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/core/memory.hpp"
#include "ragtrain/data/h5.hpp"
#include "ragtrain/metrics/metrics.hpp"

namespace ragtrain {

namespace {

const char* const kDamaged = "the checkpoint is damaged or was written for another model; retrain or pick another file "
                             "(checkpoint-step*.h5 beside it are older complete copies)";

// A float32 tensor with its CRC-32 (of the little-endian bytes) as the dataset attribute "crc32".
void write_floats(hid_t parent, const std::string& name, const std::vector<int64_t>& shape, const float* data) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  H5Handle space = h5_space(H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  H5Handle ds = h5_dataset(H5_CHECK(
      H5Dcreate2(parent, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
  write_int_attr(ds.get(), "crc32", static_cast<int64_t>(crc32_floats(data, count)));
}

// Reads a float32 dataset that must have exactly `shape`, and checks its CRC-32 when the file has one
// (version >= 2). UserError naming the file and dataset otherwise.
void read_floats(const std::string& path, hid_t file, const std::string& name, const std::vector<int64_t>& shape,
                 float* out, bool require_crc) {
  USER_CHECK(H5Lexists(file, name.c_str(), H5P_DEFAULT) > 0, "checkpoint '" << path << "' has no dataset " << name,
             kDamaged);
  H5Handle ds = h5_dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  USER_CHECK(ds, "checkpoint '" << path << "': cannot open " << name, kDamaged);
  H5Handle space = h5_space(H5Dget_space(ds.get()));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(rank, 0)));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  bool same = rank == static_cast<int>(shape.size());
  for (size_t i = 0; same && i < shape.size(); ++i) same = static_cast<int64_t>(dims[i]) == shape[i];
  std::string want;
  int64_t count = 1;
  for (int64_t d : shape) {
    want += (want.empty() ? "" : ", ") + std::to_string(d);
    count *= d;
  }
  USER_CHECK(same, "checkpoint '" << path << "': " << name << " does not have shape (" << want << ")", kDamaged);
  H5Handle type = h5_type(H5Dget_type(ds.get()));
  USER_CHECK(H5Tget_class(type.get()) == H5T_FLOAT && H5Tget_size(type.get()) == 4,
             "checkpoint '" << path << "': " << name << " is " << type_name(type.get()) << ", expected float32", kDamaged);
  USER_CHECK(H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0,
             "checkpoint '" << path << "': reading " << name << " failed", kDamaged);
  const AttrShape crc_attr = attr_shape(ds.get(), "crc32");
  if (crc_attr.kind == AttrKind::Missing && !require_crc) return;
  USER_CHECK(crc_attr.kind == AttrKind::Integer && crc_attr.elements == 1,
             "checkpoint '" << path << "': " << name << " has no integer attribute crc32", kDamaged);
  const int64_t stored = read_int_attr(ds.get(), "crc32");
  const uint32_t actual = crc32_floats(out, count);
  USER_CHECK(stored == static_cast<int64_t>(actual),
             "checkpoint '" << path << "': " << name << " fails its checksum (stored CRC-32 " << stored << ", data has "
                            << actual << ")",
             kDamaged);
}

int64_t positive_attr(const std::string& path, hid_t obj, const char* name) {
  const AttrShape s = attr_shape(obj, name);
  USER_CHECK(s.kind == AttrKind::Integer && s.elements == 1,
             "checkpoint '" << path << "': attribute " << name << " is missing or not an integer",
             "the file was not written by ragtrain train, or is damaged");
  const int64_t v = read_int_attr(obj, name);
  USER_CHECK(v >= 0, "checkpoint '" << path << "': attribute " << name << " = " << v << " is negative",
             "the file is damaged");
  return v;
}

std::string string_attr(const std::string& path, hid_t obj, const char* name) {
  USER_CHECK(attr_shape(obj, name).kind == AttrKind::String,
             "checkpoint '" << path << "': attribute " << name << " is missing or not a string", kDamaged);
  return read_string_attr(obj, name);
}

// float64 scalar attributes: the accumulators are sums of doubles and must come back bit for bit.
// The model options that came after version 2 (bidirectional, pool, dropout rates): absent in older files, which
// then load as what they were trained as: unidirectional, last step, no dropout.
void read_model_options(const std::string& path, hid_t f, Checkpoint& c) {
  const AttrShape bidi = attr_shape(f, "bidirectional");
  if (bidi.kind != AttrKind::Missing) {
    const int64_t v = positive_attr(path, f, "bidirectional");
    USER_CHECK(v == 0 || v == 1, "checkpoint '" << path << "': attribute bidirectional = " << v, kDamaged);
    c.shape.bidirectional = v == 1;
  }
  if (attr_shape(f, "pool").kind != AttrKind::Missing) {
    const std::string pool = string_attr(path, f, "pool");
    const std::optional<Pool> p = parse_pool(pool);
    USER_CHECK(p.has_value(), "checkpoint '" << path << "': attribute pool is '" << pool << "'", kDamaged);
    c.shape.pool = *p;
  }
  for (auto [name, rate] : {std::pair<const char*, double*>{"dropout", &c.dropout.between},
                            std::pair<const char*, double*>{"head_dropout", &c.dropout.head}}) {
    const AttrShape a = attr_shape(f, name);
    if (a.kind == AttrKind::Missing) continue;
    USER_CHECK(a.kind == AttrKind::Float && a.elements == 1,
               "checkpoint '" << path << "': attribute " << name << " is not a float", kDamaged);
    H5Handle attr = h5_attribute(H5_CHECK(H5Aopen(f, name, H5P_DEFAULT)));
    H5_CHECK(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, rate));
    USER_CHECK(*rate >= 0 && *rate < 1, "checkpoint '" << path << "': attribute " << name << " = " << *rate,
               kDamaged);
  }
}

void write_double_attr(hid_t obj, const char* name, double value) {
  H5Handle space = h5_space(H5_CHECK(H5Screate(H5S_SCALAR)));
  H5Handle attr = h5_attribute(
      H5_CHECK(H5Acreate2(obj, name, H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, &value));
}

double double_attr(const std::string& path, hid_t obj, const char* name) {
  const AttrShape s = attr_shape(obj, name);
  USER_CHECK(s.kind == AttrKind::Float && s.elements == 1,
             "checkpoint '" << path << "': attribute train_state/" << name << " is missing or not a float", kDamaged);
  H5Handle attr = h5_attribute(H5_CHECK(H5Aopen(obj, name, H5P_DEFAULT)));
  double v = 0;
  H5_CHECK(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &v));
  USER_CHECK(std::isfinite(v), "checkpoint '" << path << "': train_state/" << name << " = " << v, kDamaged);
  return v;
}

void write_position(hid_t f, const Checkpoint& c) {
  const RunPosition& p = c.position;
  write_int_attr(f, "steps_per_epoch", p.steps_per_epoch);
  write_int_attr(f, "global_batch", p.global_batch);
  write_int_attr(f, "world_size", p.world_size);
  write_int_attr(f, "batch_per_rank", p.batch_per_rank);
  write_int_attr(f, "epochs", p.epochs);
  write_string_attr(f, "rng", "counter-based: every draw is a function of (rng_seed, stream, index); no other state");
  write_string_attr(f, "rng_seed", std::to_string(p.seed));   // a string: uint64 does not fit HDF5's int64 helpers
  write_string_attr(f, "schedule", p.schedule);
  write_int_attr(f, "data_sequences", p.data_sequences);
  write_int_attr(f, "data_lengths_crc32", static_cast<int64_t>(p.data_lengths_crc32));
  write_int_attr(f, "complete", p.complete ? 1 : 0);
  H5Handle g(H5_CHECK(H5Gcreate2(f, "train_state", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)), H5Gclose);
  const TrainAccumulators& a = c.accumulators;
  write_double_attr(g.get(), "epoch_loss_sum", a.epoch_loss_sum);
  write_double_attr(g.get(), "epoch_count", a.epoch_count);
  write_double_attr(g.get(), "epoch_correct", a.epoch_correct);
  write_double_attr(g.get(), "interval_loss_sum", a.interval_loss_sum);
  write_double_attr(g.get(), "interval_count", a.interval_count);
  write_double_attr(g.get(), "epoch_imbalance_sum", a.epoch_imbalance_sum);
  write_double_attr(g.get(), "interval_imbalance_sum", a.interval_imbalance_sum);
  write_double_attr(g.get(), "run_imbalance_sum", a.run_imbalance_sum);
  write_double_attr(g.get(), "interval_steps", a.interval_steps);
  write_double_attr(g.get(), "first_loss", a.first_loss);
  write_double_attr(g.get(), "skipped_steps", a.skipped_steps);
  const BestSoFar& b = c.best;
  if (b.step >= 0) {   // float64 like the rest of train_state: integers this size are exact
    write_double_attr(g.get(), "best_step", static_cast<double>(b.step));
    write_double_attr(g.get(), "best_epoch", static_cast<double>(b.epoch));
    write_double_attr(g.get(), "best_val_loss", b.val_loss);
    write_double_attr(g.get(), "best_val_accuracy", b.val_accuracy);
    write_double_attr(g.get(), "best_validations_since", static_cast<double>(b.validations_since));
  }
}

void read_position(const std::string& path, hid_t f, Checkpoint& c) {
  RunPosition& p = c.position;
  p.steps_per_epoch = positive_attr(path, f, "steps_per_epoch");
  p.global_batch = positive_attr(path, f, "global_batch");
  p.world_size = positive_attr(path, f, "world_size");
  p.batch_per_rank = positive_attr(path, f, "batch_per_rank");
  p.epochs = positive_attr(path, f, "epochs");
  const std::string seed = string_attr(path, f, "rng_seed");
  std::istringstream in(seed);
  USER_CHECK((in >> p.seed) && in.eof(), "checkpoint '" << path << "': attribute rng_seed = '" << seed << "'", kDamaged);
  p.schedule = string_attr(path, f, "schedule");
  p.data_sequences = positive_attr(path, f, "data_sequences");
  p.data_lengths_crc32 = static_cast<uint32_t>(positive_attr(path, f, "data_lengths_crc32"));
  p.complete = positive_attr(path, f, "complete") != 0;
  USER_CHECK(p.steps_per_epoch > 0 && p.global_batch == p.world_size * p.batch_per_rank && p.world_size > 0 &&
                 c.step <= p.epochs * p.steps_per_epoch && c.epoch == c.step / p.steps_per_epoch,
             "checkpoint '" << path << "': inconsistent position (step " << c.step << ", epoch " << c.epoch
                            << ", steps_per_epoch " << p.steps_per_epoch << ", global_batch " << p.global_batch << " = "
                            << p.world_size << " x " << p.batch_per_rank << ")",
             kDamaged);
  USER_CHECK(H5Lexists(f, "train_state", H5P_DEFAULT) > 0, "checkpoint '" << path << "' has no group train_state",
             kDamaged);
  H5Handle g(H5Gopen2(f, "train_state", H5P_DEFAULT), H5Gclose);
  USER_CHECK(g, "checkpoint '" << path << "': cannot open train_state", kDamaged);
  TrainAccumulators& a = c.accumulators;
  a.epoch_loss_sum = double_attr(path, g.get(), "epoch_loss_sum");
  a.epoch_count = double_attr(path, g.get(), "epoch_count");
  a.epoch_correct = double_attr(path, g.get(), "epoch_correct");
  a.interval_loss_sum = double_attr(path, g.get(), "interval_loss_sum");
  a.interval_count = double_attr(path, g.get(), "interval_count");
  a.epoch_imbalance_sum = double_attr(path, g.get(), "epoch_imbalance_sum");
  a.interval_imbalance_sum = double_attr(path, g.get(), "interval_imbalance_sum");
  a.run_imbalance_sum = double_attr(path, g.get(), "run_imbalance_sum");
  a.interval_steps = double_attr(path, g.get(), "interval_steps");
  a.first_loss = double_attr(path, g.get(), "first_loss");
  if (attr_shape(g.get(), "skipped_steps").kind != AttrKind::Missing)   // written since --on-nonfinite
    a.skipped_steps = double_attr(path, g.get(), "skipped_steps");
  if (attr_shape(g.get(), "best_step").kind != AttrKind::Missing) {   // written since --select
    BestSoFar& b = c.best;
    b.step = static_cast<int64_t>(double_attr(path, g.get(), "best_step"));
    b.epoch = static_cast<int64_t>(double_attr(path, g.get(), "best_epoch"));
    b.val_loss = double_attr(path, g.get(), "best_val_loss");
    b.val_accuracy = double_attr(path, g.get(), "best_val_accuracy");
    b.validations_since = static_cast<int64_t>(double_attr(path, g.get(), "best_validations_since"));
    USER_CHECK(b.step >= 0 && b.step <= c.step && b.validations_since >= 0,
               "checkpoint '" << path << "': train_state/best_step " << b.step << " at step " << c.step, kDamaged);
  }
  c.resumable = true;
}

// A failed write of `path`, errno `err`, as the user sees it: the file, what failed, the system's reason, and
// what to do. A full disk (or quota) is the common case on a cluster and gets its own hint.
UserError io_error(const std::string& path, const std::string& what, int err) {
  std::string why = std::strerror(err);
  if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
  const bool full = err == ENOSPC || err == EDQUOT;
  return UserError(RT_MSG("cannot write checkpoint '" << path << "': " << why << " (" << what << ")"),
                   full ? "free space on the file system of the output folder (df -h), or write to another --out; "
                          "the partial file was removed and the checkpoints written before are intact"
                        : "check that the output folder is writable and its file system healthy; the partial file "
                          "was removed and the checkpoints written before are intact");
}

// The whole checkpoint as the bytes of an HDF5 file, built in memory (HDF5's core driver, no backing store), so
// that HDF5 never touches the disk: every byte reaches it through write_image, where each write() and the fsync
// are checked. Writing through HDF5's sec2 driver instead, a full disk surfaces as a failed H5Fclose that leaves
// the file open inside HDF5 and crashes the process at exit (HDF5 1.10, measured on a full tmpfs), and a
// delayed-allocation file system reports it only to fsync. Costs one copy of the checkpoint in memory.
std::vector<char> build_image(const Checkpoint& c) {
  const ParamLayout layout(c.shape);
  H5Handle fapl = h5_plist(H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)));
  H5_CHECK(H5Pset_fapl_core(fapl.get(), 1 << 20, /*backing_store=*/0));
  H5Handle file = h5_file(H5_CHECK(H5Fcreate("ragtrain-checkpoint-image.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get())));
  {
    const hid_t f = file.get();
    write_string_attr(f, "format", kCheckpointFormat);
    write_int_attr(f, "version", kCheckpointVersion);
    write_string_attr(f, "task", task_name(c.shape.task));
    write_int_attr(f, "input_size", c.shape.input_size);
    write_int_attr(f, "hidden", c.shape.hidden);
    write_int_attr(f, "layers", c.shape.layers);
    write_int_attr(f, "outputs", c.shape.outputs);
    write_int_attr(f, "bidirectional", c.shape.bidirectional ? 1 : 0);
    write_string_attr(f, "pool", pool_name(c.shape.pool));
    write_double_attr(f, "dropout", c.dropout.between);
    write_double_attr(f, "head_dropout", c.dropout.head);
    write_int_attr(f, "epoch", c.epoch);
    write_int_attr(f, "step", c.step);
    write_string_attr(f, "config", c.config);
    write_string_attr(f, "optimizer", c.optimizer);
    write_int_attr(f, "optimizer_steps", c.optimizer_steps);
    write_string_attr(f, "checksum", "crc32: every dataset's attribute crc32 = zlib.crc32 of its little-endian float32 bytes");
    if (!c.class_names.empty()) write_string_array_attr(f, "class_names", c.class_names);
    if (c.resumable) write_position(f, c);

    // Parameters under PyTorch's state_dict names (lstm.weight_ih_l0, ..., fc.bias) and shapes.
    const hid_t g = H5_CHECK(H5Gcreate2(f, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Handle group(g, H5Gclose);
    for (const ParamTensor& t : layout.tensors()) write_floats(g, t.name, t.shape, c.params.data() + t.offset);
    if (!c.opt_m.empty()) {
      H5Handle opt(H5_CHECK(H5Gcreate2(f, "optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)), H5Gclose);
      write_floats(opt.get(), "m", {static_cast<int64_t>(c.opt_m.size())}, c.opt_m.data());
      if (!c.opt_v.empty()) write_floats(opt.get(), "v", {static_cast<int64_t>(c.opt_v.size())}, c.opt_v.data());
    }
    // --normalize: the mode as an attribute of /normalization, with the statistics of `feature` inside it.
    RT_CHECK((c.normalization == "feature") == !c.feature_mean.empty() && c.feature_std.size() == c.feature_mean.size(),
             "normalization '" << c.normalization << "' with " << c.feature_mean.size() << " feature means");
    if (c.normalization != "none") {
      H5Handle norm(H5_CHECK(H5Gcreate2(f, "normalization", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)), H5Gclose);
      write_string_attr(norm.get(), "mode", c.normalization);
      if (!c.feature_mean.empty()) {
        write_floats(norm.get(), "mean", {c.shape.input_size}, c.feature_mean.data());
        write_floats(norm.get(), "std", {c.shape.input_size}, c.feature_std.data());
      }
    }
    group.reset();
  }
  H5_CHECK(H5Fflush(file.get(), H5F_SCOPE_GLOBAL));
  const ssize_t bytes = H5_CHECK(H5Fget_file_image(file.get(), nullptr, 0));
  std::vector<char> image(static_cast<size_t>(bytes));
  RT_CHECK(H5Fget_file_image(file.get(), image.data(), image.size()) == bytes, "H5Fget_file_image");
  RT_CHECK(file.close() >= 0, "H5Fclose of the in-memory checkpoint");
  return image;
}

// Writes `image` to `tmp` and makes it durable (fsync): every call checked, so a full disk or an I/O error is
// reported here and `tmp` removed, before anything is renamed over the previous checkpoint.
void write_image(const std::string& path, const std::string& tmp, const std::vector<char>& image, int64_t step) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw io_error(path, "cannot create '" + tmp + "'", errno);
  auto fail = [&](const std::string& what) {
    const int err = errno;
    ::close(fd);
    std::remove(tmp.c_str());
    return io_error(path, what, err);
  };
  // The test hook pauses half-way, so that a kill finds a torn temporary file on disk.
  const size_t half = image.size() / 2;
  size_t done = 0;
  while (done < image.size()) {
    if (done == half) checkpoint_test_pause("write", step);
    const size_t chunk = std::min(image.size() - done, done < half ? half - done : image.size() - done);
    const ssize_t n = ::write(fd, image.data() + done, chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      throw fail(RT_MSG("wrote " << done << " of " << image.size() << " bytes of '" << tmp << "'"));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) throw fail("fsync of '" + tmp + "'");
  if (::close(fd) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw io_error(path, "closing '" + tmp + "'", err);
  }
}

}  // namespace

void write_checkpoint(const std::string& path, const Checkpoint& c) {
  const ParamLayout layout(c.shape);
  RT_CHECK(static_cast<int64_t>(c.params.size()) == layout.total(), "checkpoint parameter count");
  const std::vector<char> image = build_image(c);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  write_image(path, tmp, image, c.step);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw io_error(path, "renaming '" + tmp + "' to it failed", err);
  }
}

void checkpoint_test_pause(const char* point, int64_t step) {
  const char* knob = std::getenv(kCheckpointPauseEnv);
  if (knob == nullptr) return;
  const std::string want = RT_MSG(step << ":" << point);
  if (want != knob) return;
  std::fprintf(stderr, "ragtrain: test hook %s=%s: pid %d paused in the %s of the step %lld checkpoint\n",
               kCheckpointPauseEnv, knob, static_cast<int>(::getpid()), point, static_cast<long long>(step));
  std::fflush(stderr);
  // Long enough for any test to kill the process; bounded, so a forgotten variable cannot hang a run for ever.
  for (int i = 0; i < 600; ++i) ::usleep(100000);
}

Checkpoint read_checkpoint(const std::string& path) {
  H5QuietErrors quiet;
  const std::string hint = "pass a checkpoint.h5 written by `ragtrain train`";
  USER_CHECK(::access(path.c_str(), R_OK) == 0, "checkpoint '" << path << "' does not exist or is not readable", hint);
  USER_CHECK(H5Fis_hdf5(path.c_str()) > 0, "checkpoint '" << path << "' is not an HDF5 file (or is truncated)", hint);
  H5Handle file = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  USER_CHECK(file, "checkpoint '" << path << "' cannot be opened by HDF5: the file is truncated or damaged", kDamaged);
  const hid_t f = file.get();
  USER_CHECK(attr_shape(f, "format").kind == AttrKind::String && read_string_attr(f, "format") == kCheckpointFormat,
             "'" << path << "' is not a ragtrain checkpoint (attribute format != " << kCheckpointFormat << ")", hint);
  Checkpoint c;
  c.version = positive_attr(path, f, "version");
  USER_CHECK(c.version == 1 || c.version == kCheckpointVersion,
             "checkpoint '" << path << "' has version " << c.version << ", this ragtrain reads versions 1 and "
                            << kCheckpointVersion,
             "use the ragtrain release that wrote it, or retrain");
  const bool v2 = c.version >= 2;
  const std::string task = attr_shape(f, "task").kind == AttrKind::String ? read_string_attr(f, "task") : "";
  USER_CHECK(task == "classification" || task == "regression",
             "checkpoint '" << path << "': attribute task is '" << task << "'", "the file is damaged");
  c.shape.task = task == "classification" ? Task::Classification : Task::Regression;
  c.shape.input_size = positive_attr(path, f, "input_size");
  c.shape.hidden = positive_attr(path, f, "hidden");
  c.shape.layers = positive_attr(path, f, "layers");
  c.shape.outputs = positive_attr(path, f, "outputs");
  read_model_options(path, f, c);
  USER_CHECK(c.shape.input_size > 0 && c.shape.hidden > 0 && c.shape.layers > 0 && c.shape.outputs > 0,
             "checkpoint '" << path << "': model sizes must be positive", "the file is damaged");
  {
    // The sizes come from the file: bound the parameter count (in double: no overflow) by this machine's memory
    // before ParamLayout or any allocation uses them, so a damaged header is a message, not std::bad_alloc.
    const double count = parameter_count(c.shape);
    const double bytes = 3 * 4 * count;   // parameters and two optimizer moments, float32
    USER_CHECK(bytes < static_cast<double>(memory_budget("auto", 1)),
               "checkpoint '" << path << "': declares a model (input " << c.shape.input_size << ", hidden "
                              << c.shape.hidden << ", layers " << c.shape.layers << ", outputs " << c.shape.outputs
                              << ") of " << count << " parameters, more than this machine's memory holds",
               kDamaged);
  }
  c.epoch = positive_attr(path, f, "epoch");
  c.step = positive_attr(path, f, "step");
  if (attr_shape(f, "config").kind == AttrKind::String) c.config = read_string_attr(f, "config");
  if (attr_shape(f, "optimizer").kind == AttrKind::String) c.optimizer = read_string_attr(f, "optimizer");
  if (attr_shape(f, "optimizer_steps").kind == AttrKind::Integer) c.optimizer_steps = positive_attr(path, f, "optimizer_steps");
  if (attr_shape(f, "class_names").kind == AttrKind::String) c.class_names = read_string_array_attr(f, "class_names");
  if (v2 && attr_shape(f, "steps_per_epoch").kind != AttrKind::Missing) read_position(path, f, c);

  const ParamLayout layout(c.shape);
  c.params.resize(static_cast<size_t>(layout.total()));
  // A NaN or Inf stored in a checkpoint (its CRC-32 matches what was written: damaged before the write, or
  // edited) is the checkpoint's fault, said here, not a "non-finite loss" blamed on the data a step later.
  auto require_finite = [&](const float* v, int64_t n, const std::string& what, bool non_negative) {
    for (int64_t i = 0; i < n; ++i)
      USER_CHECK(std::isfinite(v[i]) && (!non_negative || v[i] >= 0),
                 "checkpoint '" << path << "': " << what << " holds " << v[i] << " at index " << i, kDamaged);
  };
  for (const ParamTensor& t : layout.tensors()) {
    read_floats(path, f, "params/" + t.name, t.shape, c.params.data() + t.offset, v2);
    require_finite(c.params.data() + t.offset, t.size, "params/" + t.name, false);
  }
  if (H5Lexists(f, "optimizer", H5P_DEFAULT) > 0) {
    c.opt_m.resize(c.params.size());
    read_floats(path, f, "optimizer/m", {layout.total()}, c.opt_m.data(), v2);
    require_finite(c.opt_m.data(), layout.total(), "optimizer/m", false);
    if (H5Lexists(f, "optimizer/v", H5P_DEFAULT) > 0) {
      c.opt_v.resize(c.params.size());
      read_floats(path, f, "optimizer/v", {layout.total()}, c.opt_v.data(), v2);
      require_finite(c.opt_v.data(), layout.total(), "optimizer/v", true);   // a second moment: a mean of squares
    }
  }
  // Files from before --normalize had modes hold /normalization (mean and std) exactly when trained with it.
  c.normalization = H5Lexists(f, "normalization", H5P_DEFAULT) > 0 ? "feature" : "none";
  if (c.normalization != "none") {
    H5Handle norm(H5_CHECK(H5Gopen2(f, "normalization", H5P_DEFAULT)), H5Gclose);
    if (attr_shape(norm.get(), "mode").kind != AttrKind::Missing) c.normalization = string_attr(path, norm.get(), "mode");
    USER_CHECK(c.normalization == "feature" || c.normalization == "series",
               "checkpoint '" << path << "': normalization/mode is '" << c.normalization << "'",
               "expected feature or series; the file is damaged or from a newer ragtrain");
  }
  if (c.normalization == "feature") {
    c.feature_mean.resize(static_cast<size_t>(c.shape.input_size));
    c.feature_std.resize(static_cast<size_t>(c.shape.input_size));
    read_floats(path, f, "normalization/mean", {c.shape.input_size}, c.feature_mean.data(), v2);
    read_floats(path, f, "normalization/std", {c.shape.input_size}, c.feature_std.data(), v2);
    require_finite(c.feature_mean.data(), c.shape.input_size, "normalization/mean", false);
    for (float v : c.feature_std)
      USER_CHECK(std::isfinite(v) && v > 0, "checkpoint '" << path << "': normalization/std holds " << v,
                 "the file is damaged; retrain");
  }
  return c;
}

std::vector<std::pair<std::string, std::string>> parse_effective_config(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    out.emplace_back(line.substr(0, eq), line.substr(eq + 3));
  }
  return out;
}

}  // namespace ragtrain
