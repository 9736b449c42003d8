// The records of a train run folder, fed from one place: every record goes to metrics.jsonl stamped with the
// wall-clock time and the seconds since the run began, every epoch record also becomes a row of metrics.csv,
// and the curves (loss, accuracy, learning rate, throughput) go to a TensorBoard event file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ragtrain/metrics/metrics.hpp"
#include "ragtrain/metrics/tensorboard.hpp"

namespace ragtrain {

// The columns of metrics.csv: the epoch record's keys, in this order; the validation columns only with --val,
// accuracy columns only for classification (regression: val_mae).
std::vector<std::string> epoch_csv_columns(bool classification, bool has_val);
// The header line, and one epoch record as a CSV line (a missing or null value is an empty field).
std::string epoch_csv_header(const std::vector<std::string>& columns);
std::string epoch_csv_row(const Json& epoch_record, const std::vector<std::string>& columns);

// What a record becomes in TensorBoard: "step" records -> train/loss, train/lr, train/grad_norm,
// throughput/sequences_per_second, throughput/timesteps_per_second; "epoch" records -> epoch/train_loss,
// epoch/train_accuracy, epoch/val_loss, epoch/val_accuracy or epoch/val_mae, epoch/sequences_per_second;
// "validation" records -> val/loss, val/accuracy or val/mae. Only the numbers the record holds (not nulls).
std::vector<Scalar> tensorboard_scalars(const Json& record);

struct RunRecordsSpec {
  std::string dir;                 // --out
  bool resuming = false;           // continue the folder's records from `resume_step`
  int64_t resume_step = 0;
  bool classification = true, has_val = false;
  std::string host;                // the event file's name carries it
};

class RunRecords {
 public:
  RunRecords();   // the run's clock starts here: construct it when the run starts
  // Creates (or, resuming, continues) DIR/metrics.jsonl and DIR/metrics.csv and a new event file. Resuming,
  // metrics.jsonl keeps the records up to `resume_step` (the ones after describe work being redone), elapsed
  // continues from the last of them, metrics.csv is rebuilt from the epoch records kept. The event file starts
  // with a SessionLog START at the first step this invocation trains (resume_step + 1, or 1), so TensorBoard
  // drops the points of the folder's earlier files from there on.
  // Returns the number of metrics.jsonl records dropped.
  int64_t open(const RunRecordsSpec& spec);
  bool is_open() const { return jsonl_.is_open(); }
  // Adds "time" (UTC, ISO 8601 with milliseconds) and "elapsed" (seconds since the run began) and writes it.
  void write(Json record);
  double elapsed() const { return offset_ + clock_.seconds(); }
  const std::string& event_file() const { return events_.path(); }

 private:
  Stopwatch clock_;
  double offset_ = 0;   // a resumed run's elapsed at its resume point
  JsonlWriter jsonl_;
  LineFile csv_;
  std::vector<std::string> columns_;
  EventFileWriter events_;
};

}  // namespace ragtrain
