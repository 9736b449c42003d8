// CRC-32 through zlib (already linked for .npz reading), so checkpoints verify with Python's zlib.crc32.
#include "ragtrain/checkpoint/checksum.hpp"

#include <zlib.h>

#include <algorithm>
#include <climits>

namespace ragtrain {

// Checkpoints store float32 little-endian; hashing the in-memory bytes is only the same thing on such hosts.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "crc32_floats hashes in-memory bytes as little-endian");

uint32_t crc32(const void* data, size_t bytes, uint32_t crc) {
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  // zlib takes uInt lengths: feed buffers above 4 GiB in pieces rather than truncate the count.
  while (bytes > 0) {
    const uInt n = static_cast<uInt>(std::min<size_t>(bytes, UINT_MAX));
    c = ::crc32(c, p, n);
    p += n;
    bytes -= n;
  }
  return static_cast<uint32_t>(c);
}

uint32_t crc32_floats(const float* values, int64_t count, uint32_t crc) {
  return crc32(values, static_cast<size_t>(count) * sizeof(float), crc);
}

}  // namespace ragtrain
