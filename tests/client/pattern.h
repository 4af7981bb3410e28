#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace memd::test {

// Bytes that depend on their position and a seed, so that a reader can tell
// the right buffer's bytes from any other's.
inline std::byte PatternByte(std::size_t i, std::uint32_t seed) {
  std::uint32_t x = static_cast<std::uint32_t>(i) * 2654435761u + seed * 40503u;
  return static_cast<std::byte>(x >> 24);
}

inline void FillPattern(std::span<std::byte> bytes, std::uint32_t seed) {
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = PatternByte(i, seed);
}

inline bool MatchesPattern(std::span<const std::byte> bytes, std::uint32_t seed) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != PatternByte(i, seed)) return false;
  }
  return true;
}

}  // namespace memd::test
