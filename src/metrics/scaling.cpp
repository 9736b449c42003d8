// Speed-up and efficiency of bench records against the record with the fewest ranks.
#include "ragtrain/metrics/scaling.hpp"

#include <algorithm>
#include <cstdio>

#include "ragtrain/core/error.hpp"
#include "ragtrain/metrics/units.hpp"

namespace ragtrain {

std::vector<ScalingRow> scaling_rows(const std::vector<std::pair<std::string, Json>>& records) {
  std::vector<ScalingRow> rows;
  for (const auto& [file, r] : records) {
    USER_CHECK(r.contains("world_size") && r["world_size"].is_number_integer() && r.contains("sequences_per_second") &&
                   r["sequences_per_second"].is_number(),
               "bench record '" << file << "' has no world_size or sequences_per_second",
               "pass a folder of files written by `ragtrain bench --out`");
    ScalingRow row;
    row.ranks = r["world_size"].get<int64_t>();
    row.sequences_per_second = r["sequences_per_second"].get<double>();
    row.us_per_step = r.value("us_per_step", 0.0);
    row.valid = r.value("valid", true);
    row.file = file;
    rows.push_back(row);
  }
  std::sort(rows.begin(), rows.end(), [](const ScalingRow& a, const ScalingRow& b) { return a.ranks < b.ranks; });
  for (size_t i = 1; i < rows.size(); ++i)
    USER_CHECK(rows[i].ranks != rows[i - 1].ranks,
               "bench records '" << rows[i - 1].file << "' and '" << rows[i].file << "' both ran on "
                                 << count_of(rows[i].ranks, "rank"),
               "keep one record per rank count in the folder");
  if (rows.empty()) return rows;
  const ScalingRow base = rows.front();
  for (ScalingRow& row : rows) {
    row.speedup = base.sequences_per_second > 0 ? row.sequences_per_second / base.sequences_per_second : 0.0;
    row.efficiency = row.speedup * static_cast<double>(base.ranks) / static_cast<double>(row.ranks);
  }
  return rows;
}

std::string format_scaling_table(const std::vector<ScalingRow>& rows) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "# %6s %14s %12s %9s %11s %6s  %s\n", "ranks", "seq/s", "us/step", "speed-up",
                "efficiency", "valid", "record");
  out += line;
  std::snprintf(line, sizeof line, "# %6s %14s %12s %9s %11s %6s\n", "", "(1/s)", "(us)", "(x)", "(0..1)", "");
  out += line;
  for (const ScalingRow& r : rows) {
    std::snprintf(line, sizeof line, "  %6lld %14.1f %12.1f %9.3f %11.3f %6s  %s\n", static_cast<long long>(r.ranks),
                  r.sequences_per_second, r.us_per_step, r.speedup, r.efficiency, r.valid ? "yes" : "NO",
                  r.file.c_str());
    out += line;
  }
  return out;
}

}  // namespace ragtrain
