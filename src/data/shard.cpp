// read_shard: a rank's own sequences, read with one collective parallel-HDF5 read per dataset.
#include "ragtrain/data/shard.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/memory.hpp"
#include "ragtrain/data/checks.hpp"
#include "ragtrain/data/h5.hpp"

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

}  // namespace

Shard read_shard(const DatasetInfo& info, const std::vector<int64_t>& indices, MPI_Comm comm,
                 const MemoryBudget& budget) {
  H5QuietErrors quiet;
  const std::string& path = info.path;
  const int64_t F = info.num_features, K = info.num_outputs;
  const bool labeled = info.labeled;   // the same on every rank: all of them read /labels, or none
  const bool classification = info.task == Task::Classification;

  // A bad request is remembered, not thrown: this rank must still join the collective reads below.
  std::vector<size_t> order;
  const std::optional<std::string> bad_request = sort_and_check(indices, info.num_sequences, order);
  std::vector<Run> seq_runs, row_runs;
  int64_t shard_rows = 0;
  if (!bad_request)
    for (size_t p : order) {
      const int64_t g = indices[p];
      append_run(seq_runs, static_cast<hsize_t>(g), 1);
      append_run(row_runs, static_cast<hsize_t>(info.offsets[static_cast<size_t>(g)]),
                 static_cast<hsize_t>(info.length(g)));
      shard_rows += info.length(g);   // <= offsets[N]: distinct sequences of validated offsets
    }

  // What this rank is about to allocate, checked before it does: the rows arrive in file order and are then
  // scattered into the requested order, so features and labels are held twice at the peak. The shard sizes
  // differ between ranks, so they agree first: a rank leaving now would leave the others in H5Fopen.
  // read_dataset_info bounded offsets[N] x F x 4 by 2^63; the sums saturate, as more than 2^63 bytes fits no budget.
  const auto n_req = static_cast<int64_t>(indices.size());
  const int64_t label_bytes = !labeled ? 0 : classification ? 4 : sat_mul(K, 4);
  const int64_t values_bytes = sat_add(shard_rows * F * 4, sat_mul(n_req, label_bytes));
  const int64_t need = sat_add(sat_mul(2, values_bytes), sat_mul(n_req, 3 * 8));
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

  std::vector<float> rows;        // (sum of lengths, F) in file order
  std::vector<int32_t> labels;    // (n) in file order, classification
  std::vector<float> targets;     // (n, K) in file order, regression
  bool read_ok = true;
  {
    H5Handle file = open_file_parallel(path, comm);
    USER_CHECK(file, path << ": HDF5 could not open the file through MPI-IO",
               "run `ragtrain inspect " << path << "`; if the file system lacks file locking, set "
                                           "HDF5_USE_FILE_LOCKING=FALSE");
    H5Handle features_ds = h5_dataset(H5Dopen2(file.get(), "/features", H5P_DEFAULT));
    H5Handle labels_ds = labeled ? h5_dataset(H5Dopen2(file.get(), "/labels", H5P_DEFAULT)) : H5Handle();
    // Every rank sees the same file, so all of them throw here or none does.
    const std::vector<hsize_t> want_f = {static_cast<hsize_t>(info.total_timesteps), static_cast<hsize_t>(F)};
    const std::vector<hsize_t> want_l = classification ? std::vector<hsize_t>{static_cast<hsize_t>(info.num_sequences)}
                                                       : std::vector<hsize_t>{static_cast<hsize_t>(info.num_sequences),
                                                                              static_cast<hsize_t>(K)};
    USER_CHECK(features_ds && dims_of(features_ds.get()) == want_f &&
                   (!labeled || (labels_ds && dims_of(labels_ds.get()) == want_l)),
               path << ": /features or /labels is missing or has changed shape since the file was validated",
               "do not rewrite a data set while a run reads it");
    H5Handle xfer = collective_transfer();
    read_ok = read_runs(features_ds.get(), row_runs, H5T_NATIVE_FLOAT, xfer.get(), rows);
    if (labeled)
      read_ok = (classification ? read_runs(labels_ds.get(), seq_runs, H5T_NATIVE_INT32, xfer.get(), labels)
                                : read_runs(labels_ds.get(), seq_runs, H5T_NATIVE_FLOAT, xfer.get(), targets)) &&
                read_ok;
  }
  if (bad_request) throw InternalError(*bad_request);
  USER_CHECK(read_ok, path << ": reading /features or /labels failed",
             "the file may be truncated or damaged; run `ragtrain inspect " << path << "`");

  Shard shard;
  shard.labeled = labeled;
  shard.task = info.task;
  shard.num_features = F;
  shard.num_outputs = K;
  shard.indices = indices;
  const size_t n = indices.size();
  shard.offsets.assign(n + 1, 0);
  for (size_t p = 0; p < n; ++p) shard.offsets[p + 1] = shard.offsets[p] + info.length(indices[p]);
  shard.features.resize(static_cast<size_t>(shard.timesteps() * F));
  if (labeled && classification)
    shard.labels.resize(n);
  else if (labeled)
    shard.targets.resize(n * static_cast<size_t>(K));

  // Scatter from file order into the requested order.
  int64_t file_row = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t p = order[k];
    const int64_t len = info.length(indices[p]);
    std::memcpy(shard.features.data() + shard.offsets[p] * F, rows.data() + file_row * F,
                static_cast<size_t>(len * F) * sizeof(float));
    file_row += len;
    if (!labeled) continue;
    if (classification)
      shard.labels[p] = labels[k];
    else
      std::memcpy(shard.targets.data() + p * static_cast<size_t>(K), targets.data() + k * static_cast<size_t>(K),
                  static_cast<size_t>(K) * sizeof(float));
  }

  for (size_t p = 0; p < n; ++p) {
    const int64_t g = indices[p];
    if (labeled && classification)
      check_label(path, g, shard.labels[p], K);
    else if (labeled)
      check_finite_targets(path, g, shard.target(static_cast<int64_t>(p)), K);
    check_finite_features(path, g, shard.x(static_cast<int64_t>(p)), shard.length(static_cast<int64_t>(p)), F);
  }
  return shard;
}

}  // namespace ragtrain
