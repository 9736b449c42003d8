// Reads the summaries of several train runs and lays them side by side.
#include "ragtrain/metrics/compare.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "ragtrain/checkpoint/checkpoint.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/metrics/units.hpp"

namespace ragtrain {

namespace {

namespace fs = std::filesystem;

// The figures of a row, in table and CSV order: (key in the row, key in summary.json).
const std::vector<std::pair<const char*, const char*>>& figures() {
  static const std::vector<std::pair<const char*, const char*>> f = {
      {"best_epoch", "best_epoch"},
      {"best_val_loss", "best_val_loss"},
      {"best_val_accuracy", "best_val_accuracy"},
      {"last_val_loss", "val_loss"},
      {"last_val_accuracy", "val_accuracy"},
      {"train_loss", "train_loss"},
      {"steps", "steps"},
      {"sequences_per_second", "sequences_per_second"},
      {"wall_seconds", "wall_seconds"},
  };
  return f;
}

// The effective configuration as name -> value (checkpoint/checkpoint.hpp parses it), --out left out: it names
// the run.
std::map<std::string, std::string> run_options(const std::string& effective) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : parse_effective_config(effective))
    if (name != "out") out[name] = value;
  return out;
}

std::string number_text(const Json& v, const char* format) {
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (!v.is_number()) return "-";
  char buf[40];
  std::snprintf(buf, sizeof buf, format, v.get<double>());
  return buf;
}

}  // namespace

RunSummary read_run_summary(const std::string& run) {
  std::error_code ec;
  const bool folder = fs::is_directory(run, ec);
  const std::string path = folder ? (fs::path(run) / "summary.json").string() : run;
  USER_CHECK(fs::exists(path, ec),
             "run '" << run << "' has no summary.json" << (folder ? "" : " (no such file)"),
             "compare reads finished train runs: pass their --out folders (a run that is still going or was "
             "stopped writes summary.json at its end; its metrics.csv has the epochs so far)");
  std::ifstream in(path);
  const Json s = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  USER_CHECK(s.is_object() && s.contains("config") && s["config"].is_string() && s.contains("world_size"),
             "'" << path << "' is not the summary.json of a train run",
             "pass train --out folders (bench results compare with `ragtrain plot`)");
  return RunSummary{run, run_options(s["config"].get<std::string>()), s};
}

Comparison compare_runs(const std::vector<RunSummary>& runs) {
  Comparison c;
  std::set<std::string> names;
  for (const RunSummary& r : runs)
    for (const auto& [k, v] : r.options) names.insert(k);
  for (const std::string& n : names) {
    std::set<std::string> values;
    for (const RunSummary& r : runs) {
      auto it = r.options.find(n);
      values.insert(it == r.options.end() ? "-" : it->second);
    }
    if (values.size() > 1) c.differing.push_back(n);
  }
  for (const RunSummary& r : runs) {
    Json row{{"run", r.name}, {"ranks", r.summary["world_size"]}};
    Json opts = Json::object();
    for (const std::string& n : c.differing) {
      auto it = r.options.find(n);
      opts[n] = it == r.options.end() ? "-" : it->second;
    }
    row["options"] = opts;
    for (const auto& [key, from] : figures()) row[key] = r.summary.contains(from) ? r.summary[from] : Json(nullptr);
    row["valid"] = r.summary.contains("valid") ? r.summary["valid"] : Json(nullptr);
    c.rows.push_back(row);
  }
  return c;
}

std::string comparison_table(const Comparison& c) {
  std::ostringstream s;
  size_t w = 3;
  for (const Json& r : c.rows) w = std::max(w, r["run"].get<std::string>().size());
  char line[512];
  std::snprintf(line, sizeof line, "# %-*s %5s %10s %10s %8s %10s %8s %10s %9s %10s  %s\n", static_cast<int>(w), "run",
                "ranks", "best_epoch", "best_loss", "best_acc", "last_loss", "last_acc", "train_loss", "seq/s",
                "wall_s", "options that differ");
  s << line;
  std::snprintf(line, sizeof line, "# %-*s %5s %10s %10s %8s %10s %8s %10s %9s %10s\n", static_cast<int>(w), "", "",
                "", "(val)", "(val)", "(val)", "(val)", "", "(1/s)", "(s)");
  s << line;
  for (const Json& r : c.rows) {
    std::string opts;
    for (const auto& [k, v] : r["options"].items()) opts += (opts.empty() ? "" : " ") + k + "=" + v.get<std::string>();
    std::snprintf(line, sizeof line, "  %-*s %5s %10s %10s %8s %10s %8s %10s %9s %10s  ", static_cast<int>(w),
                  r["run"].get<std::string>().c_str(), number_text(r["ranks"], "%g").c_str(),
                  number_text(r["best_epoch"], "%g").c_str(), number_text(r["best_val_loss"], "%.5f").c_str(),
                  number_text(r["best_val_accuracy"], "%.4f").c_str(), number_text(r["last_val_loss"], "%.5f").c_str(),
                  number_text(r["last_val_accuracy"], "%.4f").c_str(), number_text(r["train_loss"], "%.5f").c_str(),
                  number_text(r["sequences_per_second"], "%.1f").c_str(), number_text(r["wall_seconds"], "%.2f").c_str());
    s << line << (opts.empty() ? "-" : opts) << "\n";
  }
  if (c.differing.empty() && c.rows.size() > 1) s << "# the runs have the same options\n";
  return s.str();
}

std::string comparison_csv(const Comparison& c) {
  std::ostringstream s;
  s << "run,ranks";
  for (const std::string& n : c.differing) s << "," << csv_field(n);
  for (const auto& f : figures()) s << "," << f.first;
  s << ",valid\n";
  for (const Json& r : c.rows) {
    s << csv_field(r["run"].get<std::string>()) << "," << number_text(r["ranks"], "%g");
    for (const std::string& n : c.differing) s << "," << csv_field(r["options"][n].get<std::string>());
    for (const auto& f : figures()) {
      const std::string v = number_text(r[f.first], "%.9g");
      s << "," << (v == "-" ? "" : v);
    }
    s << "," << (r["valid"].is_boolean() ? (r["valid"].get<bool>() ? "true" : "false") : "") << "\n";
  }
  return s.str();
}

Json comparison_json(const Comparison& c) {
  return Json{{"differing_options", c.differing}, {"runs", c.rows}};
}

}  // namespace ragtrain
