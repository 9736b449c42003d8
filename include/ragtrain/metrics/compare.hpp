// Several train runs side by side (`ragtrain compare RUN_A RUN_B ...`): one row per run with the options in
// which the runs differ, the best and the last validation figures, throughput and wall time; as a '#' table,
// JSON or CSV.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ragtrain/metrics/metrics.hpp"

namespace ragtrain {

struct RunSummary {
  std::string name;                            // the path as given
  std::map<std::string, std::string> options;  // the effective configuration (name = value), --out left out
  Json summary;                                // summary.json
};

// Reads RUN/summary.json (RUN a train --out folder, or the summary.json itself). UserError naming the run when
// it has none (not finished, or not a train folder) or it is not a train summary.
RunSummary read_run_summary(const std::string& run);

struct Comparison {
  std::vector<std::string> differing;   // option names whose values are not the same in every run
  std::vector<Json> rows;               // per run: run, ranks, options {name: value}, figures (null if absent)
};
Comparison compare_runs(const std::vector<RunSummary>& runs);

std::string comparison_table(const Comparison& c);   // '#'-commented header and units, one line per run
std::string comparison_csv(const Comparison& c);     // header row, one row per run; a differing option a column
Json comparison_json(const Comparison& c);           // {"differing_options": [...], "runs": [...]}

}  // namespace ragtrain
