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
// the run. The data files are compared as canonical paths, relative ones taken from where the run was started
// (`working_directory` of its provenance; else where compare runs), so `t.h5` and `/abs/t.h5` are one file.
std::map<std::string, std::string> run_options(const std::string& effective, const std::string& working_directory) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : parse_effective_config(effective)) {
    if (name == "out") continue;
    if ((name == "data" || name == "val" || name == "init-from") && !value.empty()) {
      std::error_code ec;
      fs::path p(value);
      if (p.is_relative()) p = (working_directory.empty() ? fs::current_path(ec) : fs::path(working_directory)) / p;
      const fs::path canonical = fs::weakly_canonical(p, ec);
      out[name] = ec ? p.lexically_normal().string() : canonical.string();
      continue;
    }
    out[name] = value;
  }
  return out;
}

// The records of metrics.jsonl of `run` (a run folder), in order; empty when it has none.
std::vector<Json> read_records(const fs::path& run) {
  std::vector<Json> records;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    Json r = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (r.is_object() && r.contains("event")) records.push_back(std::move(r));   // a torn last line is skipped
  }
  return records;
}

// What summary.json would hold, from a run that has none (stopped by a signal, killed, or still going): the
// configuration and rank count of its newest checkpoint, the figures of its metrics.jsonl records.
RunSummary summary_of_unfinished(const std::string& run) {
  const fs::path dir(run);
  std::error_code ec;
  USER_CHECK(fs::exists(dir / "checkpoint.h5", ec) && fs::exists(dir / "metrics.jsonl", ec),
             "run '" << run << "' has no summary.json, and no checkpoint.h5 and metrics.jsonl to read instead",
             "compare reads train runs: pass their --out folders (a run that is stopped or still going is read from "
             "its checkpoint.h5 and metrics.jsonl)");
  const Checkpoint ckpt = read_checkpoint((dir / "checkpoint.h5").string());
  Json s{{"world_size", ckpt.resumable ? Json(ckpt.position.world_size) : Json(nullptr)}, {"valid", nullptr}};
  std::string status = "no summary.json: still running or killed";
  for (const Json& r : read_records(dir)) {
    const std::string event = r["event"].get<std::string>();
    if (r.contains("step") && r["step"].is_number_integer()) s["steps"] = r["step"];
    if (r.contains("elapsed") && r["elapsed"].is_number()) s["wall_seconds"] = r["elapsed"];
    // An epoch's record: training and (with --val) validation figures; a --val-every record: validation only.
    if (event == "epoch" || event == "validation")
      for (const char* k : {"val_loss", "val_accuracy", "train_loss", "sequences_per_second"})
        if (r.contains(k) && (event == "epoch" || std::string(k).rfind("val_", 0) == 0)) s[k] = r[k];
    if (event == "best") {
      s["best_epoch"] = r["epoch"];
      s["best_val_loss"] = r["val_loss"];
      s["best_val_accuracy"] = r.contains("val_accuracy") ? r["val_accuracy"] : Json(nullptr);
    }
    if (event == "step") {   // before the first epoch ends, the figures of the last logged interval
      if (r.contains("loss")) s["interval_loss"] = r["loss"];
      if (r.contains("sequences_per_second")) s["interval_sequences_per_second"] = r["sequences_per_second"];
    }
    if (event == "stop")
      status = "stopped by " + r.value("signal", std::string("a signal")) + " at step " + std::to_string(r.value("step", 0));
    if (event == "resume") status = "no summary.json: still running or killed";
  }
  for (const auto& [figure, interval] : {std::pair<const char*, const char*>{"train_loss", "interval_loss"},
                                         {"sequences_per_second", "interval_sequences_per_second"}})
    if (!s.contains(figure) && s.contains(interval)) s[figure] = s[interval];
  return RunSummary{run, run_options(ckpt.config, ""), s, status + " (figures from metrics.jsonl)"};
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
  if (folder && !fs::exists(path, ec)) return summary_of_unfinished(run);
  USER_CHECK(fs::exists(path, ec), "run '" << run << "': no such folder or file",
             "compare reads train runs: pass their --out folders (or their summary.json files)");
  std::ifstream in(path);
  const Json s = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  USER_CHECK(s.is_object() && s.contains("config") && s["config"].is_string() && s.contains("world_size"),
             "'" << path << "' is not the summary.json of a train run",
             "pass train --out folders (bench results compare with `ragtrain plot`)");
  const Json& prov = s.contains("provenance") ? s["provenance"] : Json();
  const std::string where = prov.is_object() && prov.contains("working_directory") &&
                                    prov["working_directory"].is_string()
                                ? prov["working_directory"].get<std::string>()
                                : std::string();
  return RunSummary{run, run_options(s["config"].get<std::string>(), where), s, ""};
}

Comparison compare_runs(const std::vector<RunSummary>& runs, const std::set<std::string>& left_out) {
  Comparison c;
  std::set<std::string> names;
  for (const RunSummary& r : runs)
    for (const auto& [k, v] : r.options)
      if (!left_out.count(k)) names.insert(k);
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
    row["status"] = r.unfinished.empty() ? "finished" : r.unfinished;
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
  for (const Json& r : c.rows)
    if (r["status"] != "finished")
      s << "# " << r["run"].get<std::string>() << ": " << r["status"].get<std::string>() << "\n";
  return s.str();
}

std::string comparison_csv(const Comparison& c) {
  std::ostringstream s;
  s << "run,ranks";
  for (const std::string& n : c.differing) s << "," << csv_field(n);
  for (const auto& f : figures()) s << "," << f.first;
  s << ",valid,status\n";
  for (const Json& r : c.rows) {
    s << csv_field(r["run"].get<std::string>()) << "," << number_text(r["ranks"], "%g");
    for (const std::string& n : c.differing) s << "," << csv_field(r["options"][n].get<std::string>());
    for (const auto& f : figures()) {
      const std::string v = number_text(r[f.first], "%.9g");
      s << "," << (v == "-" ? "" : v);
    }
    s << "," << (r["valid"].is_boolean() ? (r["valid"].get<bool>() ? "true" : "false") : "") << ","
      << csv_field(r["status"].get<std::string>()) << "\n";
  }
  return s.str();
}

Json comparison_json(const Comparison& c) {
  return Json{{"differing_options", c.differing}, {"runs", c.rows}};
}

}  // namespace ragtrain
