// read_shard: a rank's own sequences, read straight into place with pread where the datasets allow it, else with
// one collective parallel-HDF5 read per dataset.
#include "ragtrain/data/shard.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/memory.hpp"
#include "ragtrain/data/checks.hpp"
#include "ragtrain/data/direct_read.hpp"
#include "ragtrain/data/h5.hpp"
#include "ragtrain/data/parallel_blocks.hpp"

namespace ragtrain {

namespace {

// Rows [first, first + count) of a dataset.
struct Run {
  hsize_t first = 0, count = 0;
};

// Saturating int64 arithmetic for byte counts: a count past 2^63 only has to compare larger than any budget.
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

// Appends a run, merging it into the previous one when they touch: fewer hyperslabs to combine.
void append_run(std::vector<Run>& runs, hsize_t first, hsize_t count) {
  if (!runs.empty() && runs.back().first + runs.back().count == first)
    runs.back().count += count;
  else
    runs.push_back(Run{first, count});
}

std::vector<hsize_t> dims_of(hid_t dset) {
  H5Handle space = h5_space(H5_CHECK(H5Dget_space(dset)));
  std::vector<hsize_t> dims(static_cast<size_t>(H5_CHECK(H5Sget_simple_extent_ndims(space.get()))));
  if (!dims.empty()) H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  return dims;
}

// The union of `runs` (rows [first, first + count) x all `width` columns) as a selection on a copy of
// `space`. Appending thousands of hyperslabs one by one with H5S_SELECT_OR is quadratic in HDF5 1.10 (each
// OR walks the whole span tree), so runs are appended in small groups and the groups merged pairwise with
// H5Scombine_select, which keeps the cost close to linear in the number of runs.
H5Handle select_runs(hid_t space, const std::vector<Run>& runs, hsize_t width) {
  constexpr size_t kGroup = 32;
  std::vector<H5Handle> level;
  for (size_t g = 0; g < runs.size() || level.empty(); g += kGroup) {
    H5Handle part = h5_space(H5_CHECK(H5Scopy(space)));
    H5_CHECK(H5Sselect_none(part.get()));
    for (size_t i = g; i < std::min(runs.size(), g + kGroup); ++i) {
      const hsize_t start[2] = {runs[i].first, 0}, count[2] = {runs[i].count, width};
      H5_CHECK(H5Sselect_hyperslab(part.get(), H5S_SELECT_OR, start, nullptr, count, nullptr));
    }
    level.push_back(std::move(part));
  }
  while (level.size() > 1) {
    std::vector<H5Handle> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2)
      next.push_back(h5_space(H5_CHECK(H5Scombine_select(level[i].get(), H5S_SELECT_OR, level[i + 1].get()))));
    if (level.size() % 2 == 1) next.push_back(std::move(level.back()));
    level = std::move(next);
  }
  return std::move(level.front());
}

// One collective H5Dread of the rows in `runs` (sorted, disjoint) of a 1-D or 2-D dataset, packed in file
// order into `out`. A rank without runs still joins, with empty selections on both sides: leaving out the
// call would leave the other ranks waiting inside it. Returns false if HDF5 reported a failure.
template <class T>
bool read_runs(hid_t dset, const std::vector<Run>& runs, hid_t mem_type, hid_t xfer, std::vector<T>& out) {
  const std::vector<hsize_t> dims = dims_of(dset);
  const hsize_t width = dims.size() == 2 ? dims[1] : 1;
  hsize_t rows = 0;
  for (const Run& r : runs) rows += r.count;
  out.assign(static_cast<size_t>(rows * width), T{});

  H5Handle dset_space = h5_space(H5_CHECK(H5Dget_space(dset)));
  H5Handle file_space = select_runs(dset_space.get(), runs, width);
  const hsize_t mem_elems = std::max<hsize_t>(rows * width, 1);
  H5Handle mem_space = h5_space(H5_CHECK(H5Screate_simple(1, &mem_elems, nullptr)));
  if (rows == 0) H5_CHECK(H5Sselect_none(mem_space.get()));
  T unused{};
  return H5Dread(dset, mem_type, mem_space.get(), file_space.get(), xfer, rows ? out.data() : &unused) >= 0;
}

// The first problem with `indices` (out of range, duplicate), if any; `order` gets the positions sorted by
// global index, which is also file order because offsets increase.
std::optional<std::string> sort_and_check(const std::vector<int64_t>& indices, int64_t n,
                                          std::vector<size_t>& order) {
  order.resize(indices.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return indices[a] < indices[b]; });
  for (size_t k = 0; k < order.size(); ++k) {
    const int64_t g = indices[order[k]];
    if (g < 0 || g >= n)
      return RT_MSG("read_shard: index " << g << " at position " << order[k] << " is outside [0, " << n << ")");
    if (k > 0 && g == indices[order[k - 1]])
      return RT_MSG("read_shard: index " << g << " is requested twice (positions " << order[k - 1] << " and "
                                         << order[k] << ")");
  }
  return std::nullopt;
}

// The shard's shape in the requested order, its buffers not yet allocated.
Shard shard_layout(const DatasetInfo& info, const std::vector<int64_t>& indices, bool valid) {
  Shard shard;
  copy_header(shard, info);
  shard.indices = indices;
  shard.offsets.assign(indices.size() + 1, 0);
  if (valid)
    for (size_t p = 0; p < indices.size(); ++p) shard.offsets[p + 1] = shard.offsets[p] + info.length(indices[p]);
  return shard;
}

// Every value of the shard checked (labels in range, features and targets finite) by `threads` threads; the
// error of the earliest position that fails is thrown, as a pass in position order would.
void check_values(const std::string& path, const Shard& shard, int threads) {
  constexpr int64_t kBlock = 4096;   // positions per task
  const int64_t n = shard.size(), K = shard.num_outputs;
  parallel_blocks((n + kBlock - 1) / kBlock, threads, [&](int64_t b) {
    for (int64_t p = b * kBlock; p < std::min(n, (b + 1) * kBlock); ++p) {
      const int64_t g = shard.indices[static_cast<size_t>(p)];
      if (shard.labeled && shard.task == Task::Classification)
        check_label(path, g, shard.labels[static_cast<size_t>(p)], K);
      else if (shard.labeled)
        check_finite_targets(path, g, shard.target(p), K);
      check_finite_features(path, g, shard.x(p), shard.length(p), shard.num_features);
    }
  });
}

// The datasets of an open v1 file, checked to have the shapes the file was validated with, and where their
// values lie when they can be read directly (see contiguous_offset).
struct OpenDatasets {
  H5Handle features, labels;
  std::optional<int64_t> features_at, labels_at;
};

OpenDatasets open_datasets(hid_t file, const DatasetInfo& info) {
  const bool classification = info.task == Task::Classification;
  OpenDatasets d;
  d.features = h5_dataset(H5Dopen2(file, "/features", H5P_DEFAULT));
  d.labels = info.labeled ? h5_dataset(H5Dopen2(file, "/labels", H5P_DEFAULT)) : H5Handle();
  // Every rank sees the same file, so all of them throw here or none does.
  const auto N = static_cast<hsize_t>(info.num_sequences), K = static_cast<hsize_t>(info.num_outputs);
  const std::vector<hsize_t> want_f = {static_cast<hsize_t>(info.total_timesteps),
                                       static_cast<hsize_t>(info.num_features)};
  const std::vector<hsize_t> want_l = classification ? std::vector<hsize_t>{N} : std::vector<hsize_t>{N, K};
  USER_CHECK(d.features && dims_of(d.features.get()) == want_f &&
                 (!info.labeled || (d.labels && dims_of(d.labels.get()) == want_l)),
             info.path << ": /features or /labels is missing or has changed shape since the file was validated",
             "do not rewrite a data set while a run reads it");
  d.features_at = contiguous_offset(info.path, d.features.get(), H5T_NATIVE_FLOAT);
  if (info.labeled)
    d.labels_at = contiguous_offset(info.path, d.labels.get(), classification ? H5T_NATIVE_INT32 : H5T_NATIVE_FLOAT);
  return d;
}

// Rows of `file_order` (the shard's sequences in file order, `width` values per row) copied to their place in
// `dest`, the shard's order: the HDF5 path reads in file order.
template <class T>
void scatter(const std::vector<T>& file_order, const std::vector<size_t>& order, const Shard& shard, bool by_rows,
             int64_t width, T* dest) {
  int64_t from = 0;
  for (size_t p : order) {
    const int64_t rows = by_rows ? shard.length(static_cast<int64_t>(p)) : 1;
    const int64_t to = by_rows ? shard.offsets[p] : static_cast<int64_t>(p);
    std::memcpy(dest + to * width, file_order.data() + from * width, static_cast<size_t>(rows * width) * sizeof(T));
    from += rows;
  }
}

// The datasets HDF5 must read (chunked, compressed, another byte order): one collective read each, every rank
// joining even with nothing to read. False if HDF5 reported a failure.
bool read_through_hdf5(OpenDatasets& ds, const DatasetInfo& info, const std::vector<size_t>& order,
                       const std::vector<Run>& seq_runs, const std::vector<Run>& row_runs, Shard& shard) {
  H5Handle xfer = collective_transfer();
  bool ok = true;
  if (!ds.features_at) {
    std::vector<float> rows;   // (shard rows, F) in file order
    ok = read_runs(ds.features.get(), row_runs, H5T_NATIVE_FLOAT, xfer.get(), rows);
    if (ok) scatter(rows, order, shard, true, info.num_features, shard.features.data());
  }
  if (!info.labeled || ds.labels_at) return ok;
  if (info.task == Task::Classification) {
    std::vector<int32_t> labels;   // (n) in file order
    const bool got = read_runs(ds.labels.get(), seq_runs, H5T_NATIVE_INT32, xfer.get(), labels);
    if (got) scatter(labels, order, shard, false, 1, shard.labels.data());
    return got && ok;
  }
  std::vector<float> targets;   // (n, K) in file order
  const bool got = read_runs(ds.labels.get(), seq_runs, H5T_NATIVE_FLOAT, xfer.get(), targets);
  if (got) scatter(targets, order, shard, false, info.num_outputs, shard.targets.data());
  return got && ok;
}

// The datasets that can be read directly, read with pread straight into the shard (independent reads: no rank
// waits for another). Sequences adjacent both in the file and in the shard become one request. Returns the bytes
// read; a short or failed read throws UserError naming the file, the dataset and the first sequence it held.
int64_t read_directly(const DatasetInfo& info, const std::optional<int64_t>& features_at,
                      const std::optional<int64_t>& labels_at, const std::vector<size_t>& order, int threads,
                      Shard& shard) {
  const int64_t F = info.num_features, K = info.num_outputs;
  std::vector<ByteRange> features, labels;
  for (size_t p : order) {
    const int64_t g = shard.indices[p];
    if (features_at)
      append_range(features, ByteRange{*features_at + info.offsets[static_cast<size_t>(g)] * F * 4,
                                       info.length(g) * F * 4,
                                       reinterpret_cast<char*>(shard.features.data() + shard.offsets[p] * F), g});
    if (!labels_at) continue;
    const int64_t width = info.task == Task::Classification ? 4 : K * 4;
    char* dest = info.task == Task::Classification ? reinterpret_cast<char*>(shard.labels.data() + p)
                                                   : reinterpret_cast<char*>(shard.targets.data() + p * K);
    append_range(labels, ByteRange{*labels_at + g * width, width, dest, g});
  }
  int64_t bytes = 0;
  for (const auto& [ranges, name] : {std::pair{&features, "/features"}, std::pair{&labels, "/labels"}}) {
    const std::optional<ReadFailure> failed = read_ranges(info.path, *ranges, threads);
    USER_CHECK(!failed, info.path << ": reading " << name << " of sequence " << failed->sequence << " failed: "
                                  << failed->what,
               "the file may be truncated or damaged (was it copied completely?); run `ragtrain inspect "
                   << info.path << "`");
    for (const ByteRange& r : *ranges) bytes += r.bytes;
  }
  return bytes;
}

}  // namespace

Shard read_shard(const DatasetInfo& info, const std::vector<int64_t>& indices, MPI_Comm comm,
                 const MemoryBudget& budget, ShardReadStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  H5QuietErrors quiet;
  const std::string& path = info.path;
  const int64_t F = info.num_features, K = info.num_outputs;
  const bool labeled = info.labeled;   // the same on every rank: all of them read /labels, or none
  const bool classification = info.task == Task::Classification;
  const int threads = reader_threads(comm);

  // A bad request is remembered, not thrown: this rank must still join the collective calls below.
  std::vector<size_t> order;
  const std::optional<std::string> bad_request = sort_and_check(indices, info.num_sequences, order);
  if (bad_request) order.clear();
  Shard shard = shard_layout(info, indices, !bad_request);
  std::vector<Run> seq_runs, row_runs;
  for (size_t p : order) {
    const int64_t g = indices[p];
    append_run(seq_runs, static_cast<hsize_t>(g), 1);
    append_run(row_runs, static_cast<hsize_t>(info.offsets[static_cast<size_t>(g)]),
               static_cast<hsize_t>(info.length(g)));
  }
  const int64_t shard_rows = shard.timesteps();   // <= offsets[N]: distinct sequences of validated offsets

  H5Handle file = open_file_parallel(path, comm);
  USER_CHECK(file, path << ": HDF5 could not open the file through MPI-IO",
             "run `ragtrain inspect " << path << "`; if the file system lacks file locking, set "
                                         "HDF5_USE_FILE_LOCKING=FALSE");
  OpenDatasets ds = open_datasets(file.get(), info);
  // Which datasets HDF5 reads must be the same on every rank, since those reads are collective: the same file gives
  // the same answer, unless a rank's check of the address failed on its own (an I/O error); then all use HDF5.
  int direct[2] = {ds.features_at ? 1 : 0, ds.labels_at ? 1 : 0};
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, direct, 2, MPI_INT, MPI_MIN, comm));
  if (!direct[0]) ds.features_at.reset();
  if (!direct[1]) ds.labels_at.reset();

  // What this rank is about to allocate, checked before it does. A dataset read directly goes straight to its
  // place in the shard; one read through HDF5 arrives in file order and is then scattered, so it is held twice
  // at the peak. The shard sizes differ between ranks, so they agree first: a rank leaving alone would leave the
  // others in the collective calls. read_dataset_info bounded offsets[N] x F x 4 by 2^63; the sums saturate.
  const auto n_req = static_cast<int64_t>(indices.size());
  const int64_t feature_bytes = sat_mul(shard_rows, sat_mul(F, 4));
  const int64_t label_bytes = sat_mul(n_req, !labeled ? 0 : classification ? 4 : sat_mul(K, 4));
  int64_t need = sat_add(sat_add(feature_bytes, label_bytes), sat_mul(n_req, 3 * 8));
  if (!ds.features_at) need = sat_add(need, feature_bytes);
  if (labeled && !ds.labels_at) need = sat_add(need, label_bytes);
  std::optional<UserError> too_big;
  try {
    check_fits(need, budget.bytes,
               RT_MSG(path << ": reading this rank's shard (" << n_req << " sequence(s), " << shard_rows
                           << " timesteps x " << F << " features of /features)"),
               budget.max_memory);
  } catch (const UserError& e) {
    too_big = e;
  }
  throw_if_any_rank_failed(comm, too_big);

  shard.features.resize(static_cast<size_t>(shard_rows * F));
  if (labeled && classification)
    shard.labels.resize(indices.size());
  else if (labeled)
    shard.targets.resize(indices.size() * static_cast<size_t>(K));
  const bool hdf5_ok = read_through_hdf5(ds, info, order, seq_runs, row_runs, shard);
  const std::optional<int64_t> features_at = ds.features_at, labels_at = ds.labels_at;
  ds = OpenDatasets();
  file.reset();   // collective, and every rank is here: nothing below waits for another rank

  if (bad_request) throw InternalError(*bad_request);
  USER_CHECK(hdf5_ok, path << ": reading /features or /labels failed",
             "the file may be truncated or damaged; run `ragtrain inspect " << path << "`");
  int64_t bytes = read_directly(info, features_at, labels_at, order, threads, shard);
  if (!features_at) bytes += feature_bytes;
  if (labeled && !labels_at) bytes += label_bytes;
  const double read_s = seconds();
  check_values(path, shard, threads);
  if (stats) {
    stats->bytes += bytes;
    stats->read_s += read_s;
    stats->check_s += seconds() - read_s;
    stats->direct = features_at.has_value();
    stats->threads = threads;
  }
  return shard;
}

std::optional<DirectSource> probe_direct(const DatasetInfo& info, MPI_Comm comm) {
  H5QuietErrors quiet;
  std::optional<int64_t> features_at, labels_at;
  {
    H5Handle file = open_file_parallel(info.path, comm);
    USER_CHECK(file, info.path << ": HDF5 could not open the file through MPI-IO",
               "run `ragtrain inspect " << info.path << "`");
    OpenDatasets ds = open_datasets(file.get(), info);
    features_at = ds.features_at;
    labels_at = ds.labels_at;
  }
  int direct[2] = {features_at ? 1 : 0, !info.labeled || labels_at ? 1 : 0};
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, direct, 2, MPI_INT, MPI_MIN, comm));
  if (!direct[0] || !direct[1]) return std::nullopt;
  return DirectSource{*features_at, info.labeled ? *labels_at : -1};
}

int64_t shard_bytes(const DatasetInfo& info, const std::vector<int64_t>& indices) {
  const int64_t label_bytes = !info.labeled ? 0 : info.task == Task::Classification ? 4 : info.num_outputs * 4;
  int64_t bytes = 0;
  for (int64_t g : indices) bytes += info.length(g) * info.num_features * 4 + label_bytes + 3 * 8;
  return bytes + 8;
}

Shard read_shard_direct(const DatasetInfo& info, const DirectSource& source, const std::vector<int64_t>& indices,
                        int threads, ShardReadStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<size_t> order;
  const std::optional<std::string> bad_request = sort_and_check(indices, info.num_sequences, order);
  if (bad_request) throw InternalError(*bad_request);
  Shard shard = shard_layout(info, indices, true);
  shard.features.resize(static_cast<size_t>(shard.timesteps() * info.num_features));
  if (info.labeled && info.task == Task::Classification)
    shard.labels.resize(indices.size());
  else if (info.labeled)
    shard.targets.resize(indices.size() * static_cast<size_t>(info.num_outputs));
  const std::optional<int64_t> labels_at =
      source.labels_at >= 0 ? std::optional<int64_t>(source.labels_at) : std::nullopt;
  const int64_t bytes = read_directly(info, source.features_at, labels_at, order, threads, shard);
  const double read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  check_values(info.path, shard, threads);
  if (stats) {
    stats->bytes += bytes;
    stats->read_s += read_s;
    stats->check_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - read_s;
    stats->direct = true;
    stats->threads = threads;
  }
  return shard;
}

}  // namespace ragtrain
