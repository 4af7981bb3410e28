#include "daemon/durable/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace memd::durable {
namespace {

constexpr std::uint32_t kPolynomial = 0x82f63b78;  // Castagnoli, reflected.

constexpr std::array<std::uint32_t, 256> MakeTable() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? kPolynomial : 0);
    table[i] = crc;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> kTable = MakeTable();

#if defined(__x86_64__)
// Eight bytes an instruction, then the tail a byte at a time. The builds
// target baseline x86-64, hence the attribute and the check at run time.
__attribute__((target("sse4.2"))) std::uint32_t ByInstruction(const unsigned char* p,
                                                              std::size_t bytes) {
  std::uint64_t crc = ~0u;
  for (; bytes >= 8; bytes -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, sizeof word);
    crc = _mm_crc32_u64(crc, word);
  }
  auto crc32 = static_cast<std::uint32_t>(crc);
  for (; bytes > 0; --bytes, ++p) crc32 = _mm_crc32_u8(crc32, *p);
  return ~crc32;
}
#endif

}  // namespace

namespace internal {

std::uint32_t Crc32cByTable(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t crc = ~0u;
  for (std::size_t i = 0; i < bytes; ++i) crc = (crc >> 8) ^ kTable[(crc ^ p[i]) & 0xff];
  return ~crc;
}

bool Crc32cUsesTheCpu() {
#if defined(__x86_64__)
  static const bool has_sse42 = __builtin_cpu_supports("sse4.2");
  return has_sse42;
#else
  return false;
#endif
}

}  // namespace internal

std::uint32_t Crc32c(const void* data, std::size_t bytes) {
#if defined(__x86_64__)
  if (internal::Crc32cUsesTheCpu()) {
    return ByInstruction(static_cast<const unsigned char*>(data), bytes);
  }
#endif
  return internal::Crc32cByTable(data, bytes);
}

}  // namespace memd::durable
