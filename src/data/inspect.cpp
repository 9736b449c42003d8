// inspect_dataset / print_report: full validation of a v1 file and a human summary of what it holds.
#include <algorithm>
#include <iomanip>
#include <numeric>
#include <ostream>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/format.hpp"
#include "ragtrain/data/inspect.hpp"
#include "ragtrain/data/names.hpp"
#include "ragtrain/data/shard.hpp"
#include "ragtrain/data/stored_statistics.hpp"

namespace ragtrain {

namespace {

// Values read per block: bounds the memory of inspect on files larger than RAM.
constexpr int64_t kBlockValues = int64_t{1} << 24;

}  // namespace

// The header checks are read_dataset_info's and the value checks read_shard's, run on this process alone
// (MPI_COMM_SELF), so inspect accepts exactly what a training run accepts.
DatasetReport inspect_dataset(const std::string& path, const MemoryBudget& budget, bool stored_statistics) {
  const DatasetInfo info = read_dataset_info(path, MPI_COMM_SELF, budget);
  if (stored_statistics && info.statistics_error) throw *info.statistics_error;
  // A block is read whole and scattered (twice its size at the peak, see read_shard): keep it within the
  // budget, so inspect checks a file of any size in bounded memory. One sequence larger than that fails there.
  const int64_t block_values = std::max<int64_t>(1, std::min(kBlockValues, budget.bytes / 16));
  DatasetReport r;
  r.path = path;
  copy_header(r, info);
  r.num_sequences = info.num_sequences;
  r.total_timesteps = info.total_timesteps;
  r.lengths = info.lengths();
  r.class_names = info.class_names;
  r.has_names = info.has_names;
  if (info.has_names) {
    const std::vector<std::string> names = read_sequence_names(info, budget);
    r.first_name = names.front();
    r.last_name = names.back();
  }

  // The blocks are consecutive sequences in file order: their moments, streamed, are the whole file's to the bit.
  MomentStream moments(info.num_features);
  std::vector<int64_t> block;
  for (int64_t i = 0; i < info.num_sequences;) {
    block.clear();
    int64_t values = 0;
    do {
      values += info.length(i) * info.num_features;
      block.push_back(i++);
    } while (i < info.num_sequences && values + info.length(i) * info.num_features <= block_values);
    const Shard shard = read_shard(info, block, MPI_COMM_SELF, budget);
    for (int32_t label : shard.labels) ++r.class_counts[label];
    moments.add(shard);
  }
  r.moments = moments.finish();
  if (stored_statistics) r.stored = info.statistics;
  if (r.stored) r.stale = statistics_differ(from_stored(*r.stored), r.moments);
  return r;
}

// Above this many declared classes, inspect lists only the classes that occur.
constexpr int64_t kListAllClasses = 1000;

void print_report(const DatasetReport& r, std::ostream& out) {
  const bool classification = r.labeled && r.task == Task::Classification;
  std::vector<int64_t> sorted = r.lengths;
  std::sort(sorted.begin(), sorted.end());
  const int64_t min_len = sorted.empty() ? 0 : sorted.front(), max_len = sorted.empty() ? 0 : sorted.back();
  const double median =
      sorted.empty() ? 0.0
                     : (sorted.size() % 2 ? static_cast<double>(sorted[sorted.size() / 2])
                                          : 0.5 * static_cast<double>(sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]));
  const double mean = sorted.empty() ? 0.0
                                     : static_cast<double>(std::accumulate(sorted.begin(), sorted.end(), int64_t{0})) /
                                           static_cast<double>(sorted.size());

  out << "file             " << r.path << "\n"
      << "task             "
      << (r.labeled ? task_name(r.task) : "none: no labels (for predict; train and eval need labels)") << "\n"
      << "sequences (N)    " << r.num_sequences << "\n"
      << "features (F)     " << r.num_features << "\n";
  if (r.labeled) out << (classification ? "classes          " : "outputs (K)      ") << r.num_outputs << "\n";
  if (r.has_names)   // the first and the last, as predict's name column will start and end
    out << "names            " << r.first_name
        << (r.num_sequences == 1 ? "" : (r.num_sequences == 2 ? ", " : " .. ") + r.last_name) << "\n";
  out << "statistics       "
      << (!r.stored ? "not stored (train computes them; --write-statistics stores them)"
          : r.stale ? "stored, stale: " + *r.stale
                    : std::string("stored, they match the data"))
      << "\n";
  out << "timesteps        " << r.total_timesteps << "\n"
      << "length           min " << min_len << "  median " << median << "  max " << max_len << "  mean "
      << std::fixed << std::setprecision(2) << mean << "\n";
  out.unsetf(std::ios::floatfield);

  if (classification) {
    // Every class of a usual set, with the empty ones; of a set declaring very many, those with sequences.
    const bool all = r.num_outputs <= kListAllClasses;
    out << "class counts"
        << (all ? "" : " (the " + std::to_string(r.class_counts.size()) + " of " + std::to_string(r.num_outputs) +
                           " declared classes with sequences)")
        << "\n";
    auto row = [&](int64_t c, int64_t n) {
      out << "  " << std::setw(4) << c;
      if (c < static_cast<int64_t>(r.class_names.size()))
        out << "  " << std::left << std::setw(12) << r.class_names[static_cast<size_t>(c)] << std::right;
      out << "  " << std::setw(8) << n << "\n";
    };
    if (all) {
      for (int64_t c = 0; c < r.num_outputs; ++c) row(c, r.class_counts.count(c) ? r.class_counts.at(c) : 0);
    } else {
      for (const auto& [c, n] : r.class_counts) row(c, n);
    }
  }

  // About ten bins of whole lengths; one bin per length when the range is short.
  if (sorted.empty()) return;
  const int64_t width = std::max<int64_t>(1, (max_len - min_len + 10) / 10);
  const int64_t bins = (max_len - min_len) / width + 1;
  std::vector<int64_t> count(static_cast<size_t>(bins), 0);
  for (int64_t len : sorted) ++count[static_cast<size_t>((len - min_len) / width)];
  const int64_t peak = *std::max_element(count.begin(), count.end());
  constexpr int64_t kBar = 40;
  out << "length histogram\n";
  for (int64_t b = 0; b < bins; ++b) {
    const int64_t lo = min_len + b * width, hi = std::min(lo + width - 1, max_len);
    const int64_t n = count[static_cast<size_t>(b)];
    const int64_t bar = (n * kBar + peak - 1) / peak;
    out << "  " << std::setw(6) << lo << (width > 1 ? RT_MSG(" - " << std::setw(6) << hi) : std::string(9, ' '))
        << "  " << std::left << std::setw(kBar) << std::string(static_cast<size_t>(bar), '#') << std::right << "  "
        << n << "\n";
  }
}

}  // namespace ragtrain
