// The run folder's records: metrics.jsonl (time-stamped), metrics.csv (one row per epoch) and TensorBoard events.
#include "ragtrain/metrics/run_records.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>

#include "ragtrain/core/output_file.hpp"
#include "ragtrain/metrics/provenance.hpp"

namespace ragtrain {

namespace {

// A number as CSV text: enough digits to read back the same double (%.17g) is noisy for a loss; 9 significant
// digits hold a float exactly and every figure of a record.
std::string csv_number(const Json& v) {
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (!v.is_number()) return "";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v.get<double>());
  return buf;
}

void add_if_number(std::vector<Scalar>& out, const Json& rec, const char* key, const char* tag) {
  if (rec.contains(key) && rec[key].is_number()) out.push_back(Scalar{tag, rec[key].get<double>()});
}

}  // namespace

std::vector<std::string> epoch_csv_columns(bool classification, bool has_val) {
  std::vector<std::string> c{"epoch", "step", "train_loss"};
  if (classification) c.push_back("train_accuracy");
  if (has_val) {
    c.push_back("val_loss");
    c.push_back(classification ? "val_accuracy" : "val_mae");
  }
  for (const char* k : {"lr", "sequences_per_second", "elapsed"}) c.push_back(k);
  return c;
}

std::string epoch_csv_header(const std::vector<std::string>& columns) {
  std::string line;
  for (size_t i = 0; i < columns.size(); ++i) line += (i ? "," : "") + columns[i];
  return line + '\n';
}

std::string epoch_csv_row(const Json& rec, const std::vector<std::string>& columns) {
  std::string line;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i) line += ',';
    if (rec.contains(columns[i])) line += csv_number(rec[columns[i]]);
  }
  return line + '\n';
}

std::vector<Scalar> tensorboard_scalars(const Json& rec) {
  // metrics.jsonl record kind, its field, the TensorBoard tag it is plotted under.
  struct Tag {
    const char* event;
    const char* key;
    const char* tag;
  };
  static constexpr Tag kTags[] = {
      {"step", "loss", "train/loss"},
      {"step", "lr", "train/lr"},
      {"step", "grad_norm", "train/grad_norm"},
      {"step", "sequences_per_second", "throughput/sequences_per_second"},
      {"step", "timesteps_per_second", "throughput/timesteps_per_second"},
      {"epoch", "train_loss", "epoch/train_loss"},
      {"epoch", "train_accuracy", "epoch/train_accuracy"},
      {"epoch", "val_loss", "epoch/val_loss"},
      {"epoch", "val_accuracy", "epoch/val_accuracy"},
      {"epoch", "val_mae", "epoch/val_mae"},
      {"epoch", "sequences_per_second", "epoch/sequences_per_second"},
      {"validation", "val_loss", "val/loss"},
      {"validation", "val_accuracy", "val/accuracy"},
      {"validation", "val_mae", "val/mae"},
  };
  std::vector<Scalar> s;
  const std::string event = rec.value("event", "");
  for (const Tag& t : kTags)
    if (event == t.event) add_if_number(s, rec, t.key, t.tag);
  return s;
}

RunRecords::RunRecords() = default;

int64_t RunRecords::open(const RunRecordsSpec& spec) {
  const std::string jsonl = spec.dir + "/metrics.jsonl", csv = spec.dir + "/metrics.csv";
  columns_ = epoch_csv_columns(spec.classification, spec.has_val);
  int64_t dropped = 0;
  std::string table = epoch_csv_header(columns_);
  if (spec.resuming) {
    // metrics.jsonl is the record the CSV is a view of: rebuilt from the records kept, metrics.csv holds exactly
    // the epochs that the resumed run does not redo, whatever state a kill left it in.
    dropped = keep_records_through_step(jsonl, spec.resume_step);
    std::ifstream in(jsonl);
    std::string line;
    while (std::getline(in, line)) {
      const Json rec = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!rec.is_object()) continue;
      if (rec.contains("elapsed") && rec["elapsed"].is_number()) offset_ = std::max(offset_, rec["elapsed"].get<double>());
      if (rec.value("event", "") == "epoch") table += epoch_csv_row(rec, columns_);
    }
  }
  write_text_atomic(csv, table);
  csv_.open(csv, /*append=*/true);
  jsonl_.open(jsonl, /*append=*/spec.resuming);
  events_.open(spec.dir, spec.host);
  // Every point from the first step this invocation trains on supersedes the folder's earlier files (a resumed
  // run's redone steps; with --force, a whole earlier run), as metrics.jsonl does.
  events_.write_session_start(spec.resuming ? spec.resume_step + 1 : 1);
  return dropped;
}

void RunRecords::write(Json rec) {
  rec["time"] = utc_time_ms(std::chrono::system_clock::now());
  rec["elapsed"] = elapsed();
  jsonl_.write(rec);
  if (rec.value("event", "") == "epoch") csv_.write_line(epoch_csv_row(rec, columns_));
  if (rec.contains("step") && rec["step"].is_number_integer())
    events_.write_scalars(rec["step"].get<int64_t>(), tensorboard_scalars(rec));
}

}  // namespace ragtrain
