// Scaling efficiency from several `ragtrain bench` records of the same problem on different rank counts.
#pragma once

#include <string>
#include <vector>

#include "ragtrain/metrics/metrics.hpp"

namespace ragtrain {

struct ScalingRow {
  int64_t ranks = 0;
  double sequences_per_second = 0;
  double us_per_step = 0;
  double speedup = 0;      // throughput / throughput of the fewest ranks
  double efficiency = 0;   // speedup / (ranks / fewest ranks): 1 = perfect weak scaling
  bool valid = true;       // the record's own validity flag (true when it has none)
  std::string file;
};

// Rows sorted by rank count, relative to the record with the fewest ranks. Throws UserError when a record
// lacks world_size or sequences_per_second (naming its file) or two records have the same rank count.
std::vector<ScalingRow> scaling_rows(const std::vector<std::pair<std::string, Json>>& bench_records);

// A '#'-commented fixed-width table with a units row, like the other ragtrain tables.
std::string format_scaling_table(const std::vector<ScalingRow>& rows);

}  // namespace ragtrain
