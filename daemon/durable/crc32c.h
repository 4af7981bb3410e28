#pragma once

// CRC-32C (Castagnoli), for the state file's frames and header. Our own:
// this Abseil has no absl::crc32c. Every lease granted or ended appends a
// frame, so on x86-64 with SSE4.2 the CPU's crc32 instruction computes it
// (a table per byte was 7.6% of the session thread's time for an
// Open+Release, docs/benchmarks.md); elsewhere a table per byte.

#include <cstddef>
#include <cstdint>

namespace memd::durable {

// The CRC-32C of `bytes` bytes at `data` ("123456789" gives 0xe3069283).
// Thread-safe.
std::uint32_t Crc32c(const void* data, std::size_t bytes);

namespace internal {

// The table-driven computation alone, and whether Crc32c uses the CPU's
// instruction instead: for the test that holds the two equal.
std::uint32_t Crc32cByTable(const void* data, std::size_t bytes);
bool Crc32cUsesTheCpu();

}  // namespace internal
}  // namespace memd::durable
