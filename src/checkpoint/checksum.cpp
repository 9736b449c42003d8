// CRC-32 with a table computed at compile time (immutable, so no shared mutable state).
#include "ragtrain/checkpoint/checksum.hpp"

#include <array>

namespace ragtrain {

namespace {

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;   // reflected 0x04C11DB7
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = make_table();

// Checkpoints store float32 little-endian; hashing the in-memory bytes is only the same thing on such hosts.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "crc32_floats hashes in-memory bytes as little-endian");

}  // namespace

uint32_t crc32(const void* data, size_t bytes, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = crc ^ 0xFFFFFFFFu;
  for (size_t i = 0; i < bytes; ++i) c = kTable[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t crc32_floats(const float* values, int64_t count, uint32_t crc) {
  return crc32(values, static_cast<size_t>(count) * sizeof(float), crc);
}

}  // namespace ragtrain
