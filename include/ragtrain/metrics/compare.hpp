// Several train runs side by side (`ragtrain compare RUN_A RUN_B ...`): one row per run with the options in
// which the runs differ, the best and the last validation figures, throughput and wall time; as a '#' table,
// JSON or CSV.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ragtrain/metrics/metrics.hpp"

namespace ragtrain {

struct RunSummary {
  std::string name;                            // the path as given
  std::map<std::string, std::string> options;  // the effective configuration (name = value), --out left out,
                                               // data/val/init-from as canonical paths
  Json summary;                                // summary.json, or what a run without one has of it
  std::string unfinished;                      // empty for a finished run; else how it stands ("stopped by ...")
};

// Reads RUN/summary.json (RUN a train --out folder, or the summary.json itself). A folder without one (a run
// stopped by a signal, killed, or still going) is read from its checkpoint.h5 (configuration, ranks) and
// metrics.jsonl (figures so far), and says so. UserError naming the run when it has neither, or the file is
// not a train summary.
RunSummary read_run_summary(const std::string& run);

struct Comparison {
  std::vector<std::string> differing;   // option names whose values are not the same in every run
  std::vector<Json> rows;               // per run: run, ranks, options {name: value}, figures (null if absent),
                                        // valid, status ("finished" or how an unfinished run stands)
};
// `left_out`: options never listed as differing (what is printed and recorded, not what is trained).
Comparison compare_runs(const std::vector<RunSummary>& runs, const std::set<std::string>& left_out = {});

std::string comparison_table(const Comparison& c);   // '#'-commented header and units, one line per run
std::string comparison_csv(const Comparison& c);     // header row, one row per run; a differing option a column
Json comparison_json(const Comparison& c);           // {"differing_options": [...], "runs": [...]}

}  // namespace ragtrain
