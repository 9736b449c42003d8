// CRC-32 (the IEEE polynomial of zlib.crc32) over tensors, for checkpoint integrity and cross-rank agreement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ragtrain {

// CRC-32 of `bytes` bytes, continuing from `crc` (0 to start). Equals Python's zlib.crc32(data, crc).
uint32_t crc32(const void* data, size_t bytes, uint32_t crc = 0);

// CRC-32 of float32 values as stored in a checkpoint (little-endian bytes), so that
// zlib.crc32(f["params/fc.bias"][...].astype("<f4").tobytes()) reproduces it.
uint32_t crc32_floats(const float* values, int64_t count, uint32_t crc = 0);
inline uint32_t crc32_floats(const std::vector<float>& v) { return crc32_floats(v.data(), static_cast<int64_t>(v.size())); }

}  // namespace ragtrain
