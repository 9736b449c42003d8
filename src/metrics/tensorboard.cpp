// TensorBoard event files: CRC32C, TFRecord framing, and the few protobuf messages of a scalar summary.
#include "ragtrain/metrics/tensorboard.hpp"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <algorithm>

namespace ragtrain {

namespace {

// The byte-wise table of the reflected Castagnoli polynomial, built once per process (a constant).
const std::array<uint32_t, 256>& crc32c_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protobuf wire format: a key is (field << 3) | wire type; 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, int field, int wire) { put_varint(out, (static_cast<uint64_t>(field) << 3) | wire); }
template <class T>
void put_fixed(std::string& out, T v) {   // little endian, as protobuf and TFRecord store fixed-width values
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));   // x86_64 and aarch64 are little endian
  out.append(reinterpret_cast<const char*>(b), sizeof(T));
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

// Event fields (event.proto): wall_time = 1 (double), step = 2 (int64), file_version = 3, summary = 5,
// session_log = 7. Summary: repeated Value value = 1; Value: tag = 1, simple_value = 2 (float).
// SessionLog: status = 1 (START = 1).
std::string event_head(double wall_time, int64_t step) {
  std::string e;
  put_key(e, 1, 1);
  put_fixed(e, wall_time);
  if (step != 0) {   // proto3 leaves zero out
    put_key(e, 2, 0);
    put_varint(e, static_cast<uint64_t>(step));
  }
  return e;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(const void* data, size_t bytes) {
  const auto& t = crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < bytes; ++i) c = t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t bytes) {
  const uint32_t c = crc32c(data, bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& payload) {
  std::string r;
  std::string len;
  put_fixed(len, static_cast<uint64_t>(payload.size()));
  r += len;
  put_fixed(r, masked_crc32c(len.data(), len.size()));
  r += payload;
  put_fixed(r, masked_crc32c(payload.data(), payload.size()));
  return r;
}

std::string event_file_version(double wall_time) {
  std::string e = event_head(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

std::string event_scalars(double wall_time, int64_t step, const std::vector<Scalar>& scalars) {
  std::string summary;
  for (const Scalar& s : scalars) {
    std::string value;
    put_bytes(value, 1, s.tag);
    put_key(value, 2, 5);
    put_fixed(value, static_cast<float>(s.value));
    put_bytes(summary, 1, value);
  }
  std::string e = event_head(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

std::string event_session_start(double wall_time, int64_t step) {
  std::string log;
  put_key(log, 1, 0);
  put_varint(log, 1);   // SessionLog.START
  std::string e = event_head(wall_time, step);
  put_bytes(e, 7, log);
  return e;
}

void EventFileWriter::open(const std::string& dir, const std::string& host) {
  const double now = unix_seconds();
  // TensorBoard reads a folder's event files in name order, and a resumed run's SessionLog START must come
  // after the files it supersedes: the number in the name is later than every one in the folder already (a
  // resume within the same second would otherwise sort by pid).
  int64_t stamp = static_cast<int64_t>(now);
  std::error_code ec;
  const std::string prefix = kEventFilePrefix;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const int64_t other = std::strtoll(name.c_str() + prefix.size(), nullptr, 10);
    stamp = std::max(stamp, other + 1);
  }
  path_ = dir + "/" + prefix + std::to_string(stamp) + "." + host + "." + std::to_string(::getpid()) + ".ragtrain";
  file_.open(path_);
  file_.write_line(tfrecord(event_file_version(now)));
}

void EventFileWriter::write_scalars(int64_t step, const std::vector<Scalar>& scalars) {
  if (!scalars.empty()) file_.write_line(tfrecord(event_scalars(unix_seconds(), step, scalars)));
}

void EventFileWriter::write_session_start(int64_t step) {
  file_.write_line(tfrecord(event_session_start(unix_seconds(), step)));
}

}  // namespace ragtrain
