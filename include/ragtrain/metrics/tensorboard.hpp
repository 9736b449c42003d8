// TensorBoard event files written natively: TFRecord framing (length, masked CRC32C of the length, payload,
// masked CRC32C of the payload) around hand-encoded tensorflow.Event protocol buffers holding scalar summaries.
// Field numbers follow tensorflow/core/util/event.proto and framework/summary.proto (doc/hpc.md says how the
// files were checked); no protobuf library is needed, and a running job's curves can be watched live.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ragtrain/metrics/metrics.hpp"

namespace ragtrain {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), and TFRecord's mask of it: rotate right by 15, add
// 0xa282ead8 (so that a CRC of data holding CRCs is not trivially related to them).
uint32_t crc32c(const void* data, size_t bytes);
uint32_t masked_crc32c(const void* data, size_t bytes);

// One TFRecord: uint64 length (little endian), masked CRC32C of those 8 bytes, the payload, its masked CRC32C.
std::string tfrecord(const std::string& payload);

// tensorflow.Event payloads (protobuf wire format).
struct Scalar {
  std::string tag;   // "train/loss"
  double value;      // stored as Summary.Value.simple_value (a float)
};
std::string event_file_version(double wall_time);                                        // "brain.Event:2"
std::string event_scalars(double wall_time, int64_t step, const std::vector<Scalar>& scalars);
// SessionLog START at `step`: TensorBoard drops the events of earlier files from `step` on (a resumed run redoes them).
std::string event_session_start(double wall_time, int64_t step);

// The event file of one invocation in `dir`: events.out.tfevents.<unix seconds>.<host>.<pid>.ragtrain, opened
// with the file-version event first. Every event is one append (a LineFile write), so a killed job leaves whole
// records and TensorBoard can read the file while it grows.
class EventFileWriter {
 public:
  void open(const std::string& dir, const std::string& host);
  bool is_open() const { return file_.is_open(); }
  const std::string& path() const { return path_; }
  void write_scalars(int64_t step, const std::vector<Scalar>& scalars);
  void write_session_start(int64_t step);

 private:
  LineFile file_;   // whole-record appends; TFRecords are binary, not lines, but the append rule is the same
  std::string path_;
};

// The event file name prefix TensorBoard looks for.
inline constexpr const char* kEventFilePrefix = "events.out.tfevents.";

}  // namespace ragtrain
