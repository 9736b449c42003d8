// Per-rank timers and counters, their gathering to rank 0, and crash-tolerant JSON/JSONL output.
#pragma once

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ragtrain/comm/context.hpp"

namespace ragtrain {

using Json = nlohmann::ordered_json;

// Wall-clock seconds since construction or the last restart().
class Stopwatch {
 public:
  Stopwatch() : t0_(clock::now()) {}
  void restart() { t0_ = clock::now(); }
  double seconds() const { return std::chrono::duration<double>(clock::now() - t0_).count(); }

 private:
  using clock = std::chrono::steady_clock;
  clock::time_point t0_;
};

// What one rank did over an interval. Plain doubles so that a gather is one MPI_DOUBLE array.
struct RankCounters {
  double compute_s = 0;    // forward, backward, optimizer
  double comm_s = 0;       // waiting in the gradient all-reduce (includes waiting for slower ranks)
  double io_s = 0;         // reading the shard, writing outputs
  double sequences = 0;    // sequences this rank trained on
  double timesteps = 0;    // their total length
  double io_wait_s = 0;    // the loop waiting for a step's data (a resident shard: turning slots into positions)

  RankCounters& operator+=(const RankCounters& o);
};

// The most resident memory this process has held so far (getrusage's high-water mark), in bytes.
int64_t peak_rss_bytes();

// Gathers every rank's counters to rank 0 (collective). Rank 0 gets `size` entries, the others none.
std::vector<RankCounters> gather_counters(const Context& ctx, const RankCounters& mine);

// min / median / max of a field over ranks, as {"min":..,"median":..,"max":..}.
Json spread(const std::vector<RankCounters>& all, double RankCounters::*field);

// Share of a rank's step time spent waiting in the all-reduce: comm / (compute + comm). A rank that finishes
// its sequences early waits for the slowest here, so this measures imbalance as the ranks felt it.
double wait_fraction(const RankCounters& r);
// min / median / max over ranks of wait_fraction.
Json spread_fraction(const std::vector<RankCounters>& all);

// Appends whole records (text lines, or TensorBoard's binary TFRecords), each with a single write() to a file
// opened O_APPEND, so a killed job leaves whole records only and the file reads record by record whatever else
// appends to it. A failed append (a full disk) is said
// once on stderr and the line is lost: only rank 0 writes, outside any collective, and the next checkpoint write
// stops every rank together on a full disk.
class LineFile {
 public:
  LineFile() = default;
  ~LineFile();
  LineFile(const LineFile&) = delete;
  LineFile& operator=(const LineFile&) = delete;
  // Truncates, or with `append` continues the file (a resumed run); throws UserError if it cannot be opened.
  void open(const std::string& path, bool append = false);
  bool is_open() const { return fd_ >= 0; }
  // One record, written whole (a text line ends with '\n').
  void write_line(const std::string& line);
  void close();

 private:
  int fd_ = -1;
  std::string path_;
  bool warned_ = false;   // a failed append was reported (once)
};

// One JSON object per line (metrics.jsonl), through a LineFile.
class JsonlWriter {
 public:
  void open(const std::string& path, bool append = false) { file_.open(path, append); }
  bool is_open() const { return file_.is_open(); }
  void write(const Json& record) { file_.write_line(record.dump() + '\n'); }
  void close() { file_.close(); }

 private:
  LineFile file_;
};

// Rewrites the JSONL file `path` atomically, keeping the records whose "step" is <= `step`: when a run resumes
// from the checkpoint of step `step`, later records describe work that is being redone. A torn last line (a
// write killed half-way) is dropped too. Returns the number of lines dropped; 0 when the file does not exist.
int64_t keep_records_through_step(const std::string& path, int64_t step);

// Writes `value` to `path` atomically (temporary file in the same folder, fsync, rename).
void write_json_atomic(const std::string& path, const Json& value);

// Creates `dir` (and parents) and checks it is writable; throws UserError naming it otherwise.
void ensure_output_dir(const std::string& dir);

// fsync + rename: the last step of every atomic write.
void commit_file(const std::string& tmp, const std::string& path);

}  // namespace ragtrain
